#!/usr/bin/env bash
# The integration guides' commands as written, as the roles they name, beside scripts/with-postgres's server (a
# cluster of its own: the guides' role names are taken as they are), each in a database of its own:
# - docs/guides/postgres.md, its block. What it leaves to the reader is made first: the app's database, its owner
#   `app_owner` (CREATEROLE, no superuser), its tables and a mapping of them.
# - docs/guides/supabase.md, its steps' commands in order, with its mapping, over tables of the shape that mapping
#   names (uuid ids, JSON preferences, RLS on) and Supabase's API roles. Here `postgres` is the cluster's superuser,
#   where Supabase's is not: IntegrationTests runs the same steps with an owner that is no superuser.
# Only the placeholders change: `…` (the password) and `db.example` (the host). Then the app writes a user and a
# device, and the jobs' role must see both, with no drift.
#   scripts/with-postgres bash scripts/lib/guides-as-written.bash BIN     (scripts/walkthrough runs it)
set -euo pipefail
admin=${PUSH_TEST_POSTGRES_URL:?run it under scripts/with-postgres}
bin=$(cd "${1:?the directory of the executables}" && pwd)
guide=$(cd "$(dirname "$0")/../.." && pwd)/docs/guides/postgres.md
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
export PATH="$bin:$PATH"

# The server's URL with another role, password and database.
url() {
    python3 - "$admin" "$@" <<'PY'
import sys, urllib.parse
u = urllib.parse.urlsplit(sys.argv[1])
role, password, database = sys.argv[2:5]
auth = role + (":" + password if password else "")
print(urllib.parse.urlunsplit((u.scheme, f"{auth}@{u.hostname}:{u.port}", "/" + database, u.query, "")))
PY
}
host=$(python3 -c 'import sys, urllib.parse; u = urllib.parse.urlsplit(sys.argv[1]); print(f"{u.hostname}:{u.port}")' "$admin")
query=$(python3 -c 'import sys, urllib.parse; print(urllib.parse.urlsplit(sys.argv[1]).query)' "$admin")
admin_user=$(python3 -c 'import sys, urllib.parse; u = urllib.parse.urlsplit(sys.argv[1]); print(u.username)' "$admin")
admin_password=$(python3 -c 'import sys, urllib.parse; u = urllib.parse.urlsplit(sys.argv[1]); print(u.password or "")' "$admin")

# What the guide assumes: the app's database, its owner and tables.
psql "$admin" -q -v ON_ERROR_STOP=1 -c "CREATE DATABASE app" \
    -c "CREATE ROLE app_owner LOGIN CREATEROLE PASSWORD 'owner-secret'"
ADMIN_DB=$(url "$admin_user" "$admin_password" app)
APP_DB=$(url app_owner owner-secret app)
export ADMIN_DB APP_DB
psql "$ADMIN_DB" -q -v ON_ERROR_STOP=1 -c "CREATE SCHEMA app AUTHORIZATION app_owner"
psql "$APP_DB" -q -v ON_ERROR_STOP=1 \
    -c "CREATE TABLE app.members (id bigint PRIMARY KEY, zone text, reminder_time time)" \
    -c "CREATE TABLE app.devices (id bigserial PRIMARY KEY, member_id bigint NOT NULL REFERENCES app.members,
            token text UNIQUE NOT NULL, os text NOT NULL, enabled boolean NOT NULL DEFAULT true)" \
    -c "CREATE TABLE app.posts (member_id bigint NOT NULL, posted_at timestamptz NOT NULL)"
cat >"$work/mapping.json" <<'JSON'
{ "users":   { "table": "app.members", "columns": { "id": "id", "timezone": "zone", "reminder_time": "reminder_time" } },
  "devices": { "table": "app.devices",
               "columns": { "user_id": "member_id", "token": "token", "platform": "os", "active": "enabled" },
               "fixed": { "provider": "fcm" } },
  "entries": { "table": "app.posts", "columns": { "user_id": "member_id", "at": "posted_at" } } }
JSON

# The guide's block, as written but for its placeholders.
python3 - "$guide" "$host" "$query" >"$work/guide.sh" <<'PY'
import re, sys
text, host, query = open(sys.argv[1]).read(), sys.argv[2], sys.argv[3]
block = re.search(r"```sh\n(.*?)```", text, re.S).group(1)
if "…" not in block or "db.example" not in block:
    sys.exit("guides: the guide's block has no … or db.example to fill in: update this script")
block = block.replace("…", "push-secret")
block = re.sub(r"db\.example/(\w+)", lambda m: f"{host}/{m.group(1)}" + (f"?{query}" if query else ""), block)
print(block)
PY
(cd "$work" && bash -euo pipefail guide.sh) >"$work/guide.txt" 2>&1 ||
    { cat "$work/guide.sh" "$work/guide.txt" >&2; echo "guides: the guide's block failed" >&2; exit 1; }

# The app writes; the jobs' role sees it, and finds no drift.
psql "$APP_DB" -q -v ON_ERROR_STOP=1 -c "INSERT INTO app.members VALUES (7, 'Europe/Berlin', '21:00')" \
    -c "INSERT INTO app.devices (member_id, token, os) VALUES (7, 'guide-token:APA91b', 'android')"
jobs=$(url push push-secret app)
seen=$(psql "$jobs" -tAc "SELECT count(*) FROM users WHERE id = '7'"; psql "$jobs" -tAc "SELECT count(*) FROM user_devices WHERE is_active")
[ "$seen" = $'1\n1' ] || { echo "guides: the jobs' role sees $seen (users, devices), not 1 and 1" >&2; exit 1; }
pushctl integrate check --database "$jobs" >"$work/check.txt" ||
    { cat "$work/check.txt" >&2; echo "guides: integrate check found drift" >&2; exit 1; }
echo "guides: the plain-PostgreSQL guide's commands, as written, as the roles they name"

# The Supabase guide: its API roles, the app's tables as its mapping names them, then its steps in order.
psql "$admin" -q -v ON_ERROR_STOP=1 -c "CREATE DATABASE supa" \
    -c "DO \$\$ BEGIN CREATE ROLE anon NOLOGIN; CREATE ROLE authenticated NOLOGIN; END \$\$"
APP_DATABASE_URL=$(url "$admin_user" "$admin_password" supa)
PUSH_DATABASE_URL=$(url diary_push push-secret supa)
export APP_DATABASE_URL PUSH_DATABASE_URL
psql "$APP_DATABASE_URL" -q -v ON_ERROR_STOP=1 \
    -c "CREATE TABLE public.profiles (id uuid PRIMARY KEY, timezone text, preferences jsonb NOT NULL DEFAULT '{}')" \
    -c "CREATE TABLE public.user_devices (id bigserial PRIMARY KEY, user_id uuid NOT NULL REFERENCES public.profiles,
            fcm_token text UNIQUE NOT NULL, platform text NOT NULL, is_active boolean NOT NULL DEFAULT true,
            last_seen timestamptz NOT NULL DEFAULT now())" \
    -c "CREATE TABLE public.entries (id bigserial PRIMARY KEY, user_id uuid NOT NULL, created_at timestamptz NOT NULL DEFAULT now())" \
    -c "ALTER TABLE public.profiles ENABLE ROW LEVEL SECURITY" -c "ALTER TABLE public.user_devices ENABLE ROW LEVEL SECURITY" \
    -c "ALTER TABLE public.entries ENABLE ROW LEVEL SECURITY"
supabase=$(dirname "$guide")/supabase.md
mkdir "$work/supa"
python3 - "$supabase" "$work/supa" <<'PY'
import re, sys
text, out = open(sys.argv[1]).read(), sys.argv[2]
open(f"{out}/mapping.json", "w").write(re.search(r"```json\n(.*?)```", text, re.S).group(1))
sql, shell = [], []
for line in text.splitlines():
    if not re.match(r"\| \d\. ", line):
        continue
    for span in re.findall(r"`([^`]+)`", line.split("|")[2]):
        if span.startswith(("pushctl ", "psql ")):
            shell.append(span)
        elif re.match(r"[A-Z]+ ", span):
            sql.append(span.replace("…", "push-secret"))
if not sql or len(shell) < 4:
    sys.exit("guides: the Supabase guide's steps name no SQL or fewer than 4 commands: update this script")
open(f"{out}/step1.sql", "w").write("\n".join(sql) + "\n")
open(f"{out}/steps.sh", "w").write("\n".join(shell) + "\n")
PY
psql "$APP_DATABASE_URL" -q -v ON_ERROR_STOP=1 -f "$work/supa/step1.sql" >"$work/supa/step1.txt" 2>&1 ||
    { cat "$work/supa/step1.sql" "$work/supa/step1.txt" >&2; echo "guides: the Supabase guide's SQL failed" >&2; exit 1; }
(cd "$work/supa" && bash -euo pipefail steps.sh) >"$work/supa/steps.txt" 2>&1 ||
    { cat "$work/supa/steps.sh" "$work/supa/steps.txt" >&2; echo "guides: the Supabase guide's steps failed" >&2; exit 1; }
user=0b5e7c1a-4f3e-4c1e-9a57-0d1c2b3a4f5e
psql "$APP_DATABASE_URL" -q -v ON_ERROR_STOP=1 \
    -c "INSERT INTO public.profiles VALUES ('$user', 'Africa/Lagos', '{\"reminder_time\": \"21:00\", \"reminders\": true}')" \
    -c "INSERT INTO public.user_devices (user_id, fcm_token, platform) VALUES ('$user', 'supa-token:APA91b', 'android')"
seen=$(psql "$PUSH_DATABASE_URL" -tAc "SELECT count(*) FROM users WHERE id = '$user'"
    psql "$PUSH_DATABASE_URL" -tAc "SELECT count(*) FROM user_devices WHERE is_active")
[ "$seen" = $'1\n1' ] || { echo "guides: diary_push sees $seen (users, devices), not 1 and 1" >&2; exit 1; }
pushctl integrate check --database "$PUSH_DATABASE_URL" >"$work/supa/check.txt" ||
    { cat "$work/supa/check.txt" >&2; echo "guides: integrate check found drift (Supabase)" >&2; exit 1; }
# The app's own roles keep their search path (the recipe changes none of them).
[ -z "$(psql "$admin" -tAc "SELECT 1 FROM pg_db_role_setting s JOIN pg_roles r ON r.oid = s.setrole WHERE r.rolname IN ('postgres', 'anon', 'authenticated')")" ] ||
    { echo "guides: the Supabase recipe changed a setting of one of the app's roles" >&2; exit 1; }
echo "guides: the Supabase guide's steps, as written, in order"

#!/usr/bin/env bash
# The plain-PostgreSQL guide's block (docs/guides/postgres.md) as written, as the roles it names, beside
# scripts/with-postgres's server (a cluster of its own: the guide's role names are taken as they are). What the guide
# leaves to the reader is made first: the app's database, its owner `app_owner` (CREATEROLE, no superuser), its
# tables and a mapping of them. Only the guide's placeholders change: `…` (the password) and `db.example` (the host).
# Then the app writes a member and a device, and the jobs' role must see both, with no drift.
#   scripts/with-postgres bash scripts/lib/postgres-guide.bash BIN     (scripts/walkthrough runs it)
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
    sys.exit("postgres-guide: the guide's block has no … or db.example to fill in: update this script")
block = block.replace("…", "push-secret")
block = re.sub(r"db\.example/(\w+)", lambda m: f"{host}/{m.group(1)}" + (f"?{query}" if query else ""), block)
print(block)
PY
(cd "$work" && bash -euo pipefail guide.sh) >"$work/guide.txt" 2>&1 ||
    { cat "$work/guide.sh" "$work/guide.txt" >&2; echo "postgres-guide: the guide's block failed" >&2; exit 1; }

# The app writes; the jobs' role sees it, and finds no drift.
psql "$APP_DB" -q -v ON_ERROR_STOP=1 -c "INSERT INTO app.members VALUES (7, 'Europe/Berlin', '21:00')" \
    -c "INSERT INTO app.devices (member_id, token, os) VALUES (7, 'guide-token:APA91b', 'android')"
jobs=$(url push push-secret app)
seen=$(psql "$jobs" -tAc "SELECT count(*) FROM users WHERE id = '7'"; psql "$jobs" -tAc "SELECT count(*) FROM user_devices WHERE is_active")
[ "$seen" = $'1\n1' ] || { echo "postgres-guide: the jobs' role sees $seen (users, devices), not 1 and 1" >&2; exit 1; }
pushctl integrate check --database "$jobs" >"$work/check.txt" ||
    { cat "$work/check.txt" >&2; echo "postgres-guide: integrate check found drift" >&2; exit 1; }
echo "postgres-guide: the plain-PostgreSQL guide's commands, as written, as the roles they name"

#!/usr/bin/env python3
"""A backend that writes the push schema with SQL only, as docs/SCHEMA.md says, word for word.

Standard library only: SQLite through the sqlite3 module, PostgreSQL through the psql client. It takes every
statement from docs/SCHEMA.md's "Writing from a backend" section (so the document is what runs), signs users up,
sets and changes their settings and zones, registers, moves and logs out devices, switches one phone to an FCM
installation id, records entries in the users' day, deletes an account and signs the same id up again. Then it
runs `diary-reminder` at a fixed --now into an outbox and checks who was reminded, and that a second run reminds
nobody.

    Examples/sql-backend/walkthrough.py --database PATH_OR_POSTGRES_URL --bin DIR_WITH_THE_BINARIES

Exits 0 when every check holds, 1 (with what differed) when one does not.
"""
import argparse
import json
import os
import re
import sqlite3
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
NOW = 1_795_291_200          # 2026-11-21T20:00:00Z: the run's instant
MORNING = NOW - 10 * 3600    # 10:00 UTC the same day


def statements(schema_path):
    """dialect -> operation -> SQL, from the fenced blocks tagged `sql <dialect> <operation>`."""
    found = {}
    for dialect, operation, body in re.findall(r"^```sql (sqlite|postgres) (\S+)\n(.*?)^```", open(schema_path).read(),
                                               flags=re.S | re.M):
        found.setdefault(dialect, {})[operation] = body
    return found


class SQLiteBackend:
    def __init__(self, path, sql):
        self.sql = sql
        self.connection = sqlite3.connect(path, isolation_level=None)
        self.connection.executescript(sql["connect"])   # foreign keys on, busy_timeout

    def run(self, *operations):
        """The operations (name, parameters) in one transaction."""
        self.connection.execute("BEGIN IMMEDIATE")
        try:
            for name, values in operations:
                self.connection.execute(self.sql[name], values)
            self.connection.execute("COMMIT")
        except Exception:
            self.connection.execute("ROLLBACK")
            raise


class PostgresBackend:
    def __init__(self, url, sql):
        self.url, self.sql = url.split("?")[0], sql

    @staticmethod
    def literal(value):
        if value is None:
            return "NULL"
        if isinstance(value, bool):
            return "true" if value else "false"
        if isinstance(value, (int, float)):
            return repr(value)
        return "'" + str(value).replace("'", "''") + "'"

    def run(self, *operations):
        """The operations in one transaction: psql runs a -c string as one."""
        text = ";\n".join(
            re.sub(r"(?<!:):([a-z_]+)", lambda m: self.literal(values[m.group(1)]), self.sql[name]).rstrip().rstrip(";")
            for name, values in operations)
        result = subprocess.run(["psql", "-v", "ON_ERROR_STOP=1", "-q", "-X", self.url, "-c", text],
                                capture_output=True, text=True)
        if result.returncode != 0:
            raise RuntimeError(result.stderr.strip())


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--database", required=True)
    parser.add_argument("--bin", required=True, help="the directory of diary-reminder and pushctl")
    parser.add_argument("--schema", default=os.path.join(ROOT, "docs", "SCHEMA.md"))
    args = parser.parse_args()
    postgres = args.database.startswith(("postgres://", "postgresql://"))
    migrate = subprocess.run([os.path.join(args.bin, "pushctl"), "migrate", "--database", args.database],
                             capture_output=True, text=True)
    if migrate.returncode != 0:
        sys.exit(f"pushctl migrate: {migrate.stderr}")
    sql = statements(args.schema)["postgres" if postgres else "sqlite"]
    db = PostgresBackend(args.database, sql) if postgres else SQLiteBackend(args.database, sql)
    failures = []

    def user(uid, zone, reminder="20:00", reminders=True):
        db.run(("upsert-user", {"id": uid, "timezone": zone, "locale": "en", "plan": "free", "now": MORNING}),
               ("upsert-settings", {"user_id": uid, "diary_reminder_enabled": reminders, "reminder_time": reminder,
                                    "content_limit_warnings_enabled": True, "quiet_hours_start": None,
                                    "quiet_hours_end": None, "now": MORNING}))

    def device(uid, token, kind="token", replaces=None):
        register = ("register-device", {"user_id": uid, "token": token, "provider": "fcm", "platform": "android",
                                        "apns_environment": None, "token_kind": kind, "app_version": "3.1",
                                        "now": MORNING})
        if replaces:
            db.run(register, ("retire-replaced", {"replaced_token": replaces, "user_id": uid, "now": MORNING}))
        else:
            db.run(register)

    # Sign-ups and settings.
    for uid in ["ana", "ben", "dan", "eve", "fay", "gus", "hal"]:
        user(uid, "UTC")
    user("cai", "Asia/Tokyo")                        # 20:00 in Tokyo is 11:00 UTC: not due at 20:00 UTC …
    db.run(("upsert-user", {"id": "cai", "timezone": "UTC", "locale": "en", "plan": "free", "now": MORNING}))  # … until she moves
    for uid in ["ana", "ben", "cai", "dan", "gus"]:
        device(uid, f"{uid}-phone:APA91b")
    device("eve", "shared-phone:APA91b")
    device("fay", "shared-phone:APA91b")             # the phone changes hands
    db.run(("logout", {"token": "shared-phone:APA91b", "user_id": "eve", "now": MORNING}))   # eve's late logout
    db.run(("logout", {"token": "dan-phone:APA91b", "user_id": "dan", "now": MORNING}))      # dan logs out
    # Entries in the user's day: ben wrote this morning.
    db.run(("entry", {"user_id": "ben", "created_at": MORNING}))
    # A JavaScript Date.now() is milliseconds: refused, saying so, and nothing is written.
    try:
        db.run(("entry", {"user_id": "ana", "created_at": MORNING * 1000}))
        failures.append("an entry in milliseconds was accepted")
    except Exception as error:
        if "seconds, not milliseconds" not in str(error):
            failures.append(f"an entry in milliseconds was refused without saying why: {error}")
    # Deletion and re-sign-up: gus's old phone goes with the account.
    db.run(("delete-user", {"id": "gus"}))
    user("gus", "UTC")
    device("gus", "gus-new-phone:APA91b")
    # hal's app turns FCM installation ids on: the FID replaces the token, in one transaction.
    device("hal", "hal-phone:APA91b")
    device("hal", "cHalInstallation00000a", kind="fid", replaces="hal-phone:APA91b")

    def remind():
        with tempfile.NamedTemporaryFile("r", suffix=".jsonl") as outbox:
            run = subprocess.run([os.path.join(args.bin, "diary-reminder"), "--database", args.database, "--now",
                                  "2026-11-21T20:00:00Z", "--outbox", outbox.name], capture_output=True, text=True)
            if run.returncode != 0:
                failures.append(f"diary-reminder exited {run.returncode}: {run.stderr.strip()}")
            return sorted((line["user_id"], line["device"]) for line in map(json.loads, open(outbox.name)) if line)

    expected = [("ana", "ana-phone:APA91b"), ("cai", "cai-phone:APA91b"), ("fay", "shared-phone:APA91b"),
                ("gus", "gus-new-phone:APA91b"), ("hal", "cHalInstallation00000a")]
    first = remind()
    if first != expected:
        failures.append(f"reminded {first}, expected {expected}")
    second = remind()
    if second:
        failures.append(f"a second run reminded {second}")
    for failure in failures:
        print(f"walkthrough: {failure}", file=sys.stderr)
    print(f"walkthrough ({'postgres' if postgres else 'sqlite'}): {len(expected)} reminded as expected, "
          f"{len(failures)} failed checks")
    sys.exit(1 if failures else 0)


if __name__ == "__main__":
    main()

import Foundation
import JobKitTestSupport
import Logging
import PostgresNIO
import Testing

@testable import JobKit
@testable import JobKitPostgres

/// Issue 67: an app whose users, devices and entries live in its own PostgreSQL tables, Supabase-style (uuid ids,
/// a JSON column of preferences, its own device table of FCM tokens, RLS on, the API roles), integrated by the SQL
/// `pushctl integrate postgres` prints: the app writes only its own tables, as its signed-in users' role, and the
/// jobs remind exactly as the rows say.
@Suite(.serialized) struct IntegrationTests {
    /// One app schema and its mapping; each test database gets it.
    struct App: Sendable {
        let ddl: [String]
        let mapping: String
        /// SQL the app runs for: a sign-up (id, zone, reminder time), a device, an entry, a logout, a token
        /// rotation, a settings change, an account deletion.
        let signUp: @Sendable (String, String, String) -> String
        let addDevice: @Sendable (String, String) -> String
        let write: @Sendable (String, String) -> String
        let logout: @Sendable (String, String) -> String
        let rotate: @Sendable (String, String, String) -> String
        let remindersOff: @Sendable (String) -> String
        let deleteAccount: @Sendable (String) -> String
        /// The app's active flag of a token.
        let isActive: @Sendable (String) -> String
    }

    /// The Storyie seed's shape: `profiles`, `user_devices (user_id uuid, fcm_token, platform, is_active, last_seen)`,
    /// `entries (id, user_id, created_at)`.
    static let supabase = App(
        ddl: [
            """
            CREATE TABLE public.profiles (id uuid PRIMARY KEY, timezone text,
                preferences jsonb NOT NULL DEFAULT '{}'::jsonb)
            """,
            """
            CREATE TABLE public.user_devices (id bigserial PRIMARY KEY,
                user_id uuid NOT NULL REFERENCES public.profiles (id) ON DELETE CASCADE,
                fcm_token text NOT NULL, platform text NOT NULL, is_active boolean NOT NULL DEFAULT true,
                last_seen timestamptz NOT NULL DEFAULT now(), UNIQUE (user_id, fcm_token))
            """,
            """
            CREATE TABLE public.entries (id bigserial PRIMARY KEY,
                user_id uuid NOT NULL REFERENCES public.profiles (id) ON DELETE CASCADE,
                created_at timestamptz NOT NULL DEFAULT now())
            """,
        ],
        mapping: """
            { "users": { "table": "public.profiles",
                         "columns": { "id": "id", "timezone": "timezone",
                                      "reminder_time": "preferences.reminder_time",
                                      "reminders": "preferences.reminders" } },
              "devices": { "table": "public.user_devices",
                           "columns": { "user_id": "user_id", "token": "fcm_token", "platform": "platform",
                                        "active": "is_active" },
                           "fixed": { "provider": "fcm" } },
              "entries": { "table": "public.entries", "columns": { "user_id": "user_id", "at": "created_at" } } }
            """,
        signUp: { id, zone, time in
            "INSERT INTO profiles (id, timezone, preferences) VALUES ('\(id)', '\(zone)', '{\"reminder_time\": \"\(time)\", \"reminders\": true}')"
        },
        addDevice: { id, token in
            "INSERT INTO user_devices (user_id, fcm_token, platform) VALUES ('\(id)', '\(token)', 'android')"
        },
        write: { id, at in "INSERT INTO entries (user_id, created_at) VALUES ('\(id)', '\(at)')" },
        logout: { id, token in
            "UPDATE user_devices SET is_active = false WHERE user_id = '\(id)' AND fcm_token = '\(token)'"
        },
        rotate: { id, old, new in
            "UPDATE user_devices SET fcm_token = '\(new)' WHERE user_id = '\(id)' AND fcm_token = '\(old)'"
        },
        remindersOff: { id in
            "UPDATE profiles SET preferences = preferences || '{\"reminders\": false}' WHERE id = '\(id)'"
        },
        deleteAccount: { id in "DELETE FROM profiles WHERE id = '\(id)'" },
        isActive: { token in "SELECT is_active::text FROM user_devices WHERE fcm_token = '\(token)'" })

    /// The same app with other names and types: text ids, a `time` column, a JSON-as-text column, integer-free
    /// `enabled` flags, a provider column, and entries written with a `timestamp` without zone.
    static let other = App(
        ddl: [
            "CREATE SCHEMA app",
            """
            CREATE TABLE app.accounts (account_id text PRIMARY KEY, tz text, remind_at time NOT NULL DEFAULT '21:00',
                settings text NOT NULL DEFAULT '{}')
            """,
            """
            CREATE TABLE app.push_tokens (owner text NOT NULL REFERENCES app.accounts ON DELETE CASCADE,
                value text PRIMARY KEY, service text NOT NULL DEFAULT 'fcm', os text NOT NULL,
                enabled boolean NOT NULL DEFAULT true)
            """,
            """
            CREATE TABLE app.journal (author text NOT NULL REFERENCES app.accounts ON DELETE CASCADE,
                written_at timestamp NOT NULL)
            """,
        ],
        mapping: """
            { "users": { "table": "app.accounts",
                         "columns": { "id": "account_id", "timezone": "tz", "reminder_time": "remind_at",
                                      "reminders": "settings.daily" } },
              "devices": { "table": "app.push_tokens",
                           "columns": { "user_id": "owner", "token": "value", "provider": "service", "platform": "os",
                                        "active": "enabled" } },
              "entries": { "table": "app.journal", "columns": { "user_id": "author", "at": "written_at" } } }
            """,
        signUp: { id, zone, time in
            "INSERT INTO app.accounts (account_id, tz, remind_at, settings) VALUES ('\(id)', '\(zone)', '\(time)', '{\"daily\": true}')"
        },
        addDevice: { id, token in
            "INSERT INTO app.push_tokens (owner, value, os) VALUES ('\(id)', '\(token)', 'android')"
        },
        write: { id, at in "INSERT INTO app.journal VALUES ('\(id)', ('\(at)'::timestamptz AT TIME ZONE 'UTC'))" },
        logout: { id, token in "UPDATE app.push_tokens SET enabled = false WHERE owner = '\(id)' AND value = '\(token)'"
        },
        rotate: { id, old, new in
            "UPDATE app.push_tokens SET value = '\(new)' WHERE owner = '\(id)' AND value = '\(old)'"
        },
        remindersOff: { id in "UPDATE app.accounts SET settings = '{\"daily\": false}' WHERE account_id = '\(id)'" },
        deleteAccount: { id in "DELETE FROM app.accounts WHERE account_id = '\(id)'" },
        isActive: { token in "SELECT enabled::text FROM app.push_tokens WHERE value = '\(token)'" })

    /// Runs `statements` in one session; the last one's first column, as text.
    static func session(_ location: PostgresLocation, _ statements: [String]) async throws -> [String] {
        let connection = try await PostgresConnection.connect(
            configuration: try location.connectionConfiguration(applicationName: "tests"), id: 0, logger: quietLogger)
        var last: [String] = []
        do {
            for statement in statements {
                last = try await connection.query(PostgresQuery(unsafeSQL: statement), logger: quietLogger)
                    .collect().map { (try? $0.decode(String.self)) ?? "" }
            }
        } catch {
            try? await connection.close()
            throw TestSetupError(message: "\(statements.last ?? ""): \(String(reflecting: error))")
        }
        try await connection.close()
        return last
    }

    /// The app, as its signed-in users: Supabase's `authenticated` role, RLS on, its own path.
    static func asApp(_ location: PostgresLocation, _ statements: [String]) async throws -> [String] {
        try await session(location, ["SET ROLE authenticated", "SET search_path = public"] + statements)
    }

    @Test(arguments: [("supabase", supabase), ("other names", other)])
    func theAppWritesItsOwnTablesAndTheJobsRemindAsTheySay(_ name: String, _ app: App) async throws {
        let admin = try PostgresLocation.parse(try Backend.postgresAdminURL)
        var location = admin
        location.database = "t_" + UUID().uuidString.lowercased().replacingOccurrences(of: "-", with: "")
        _ = try await Self.session(admin, ["CREATE DATABASE \(location.database)"])
        let appTables =
            name == "supabase"
            ? ["public.profiles", "public.user_devices", "public.entries"]
            : ["app.accounts", "app.push_tokens", "app.journal"]
        _ = try await Self.session(
            location,
            [
                """
                DO $$ DECLARE r text; BEGIN
                    FOREACH r IN ARRAY ARRAY['anon', 'authenticated', 'service_role'] LOOP
                        IF NOT EXISTS (SELECT 1 FROM pg_roles WHERE rolname = r) THEN
                            EXECUTE format('CREATE ROLE %I NOLOGIN', r);
                        END IF;
                    END LOOP;
                END $$
                """,
                "CREATE SCHEMA push",
                "ALTER ROLE \(location.user) IN DATABASE \(location.database) SET search_path = push",
            ] + app.ddl
                + appTables.flatMap { table in
                    [
                        "ALTER TABLE \(table) ENABLE ROW LEVEL SECURITY",
                        "CREATE POLICY own_rows ON \(table) TO authenticated USING (true) WITH CHECK (true)",
                        "GRANT SELECT, INSERT, UPDATE, DELETE ON \(table) TO authenticated",
                    ]
                } + [
                    "GRANT USAGE ON SCHEMA \(name == "supabase" ? "public" : "app") TO authenticated",
                    "GRANT USAGE ON ALL SEQUENCES IN SCHEMA \(name == "supabase" ? "public" : "app") TO authenticated",
                ])
        let store = try await PostgresStore.open(location, mode: .create, logger: quietLogger)
        defer { Task { await store.close() } }

        // A user who signed up before the integration: the backfill brings them in.
        let early = "00000000-0000-4000-8000-000000000001"
        _ = try await Self.asApp(location, [app.signUp(early, "UTC", "20:00"), app.addDevice(early, "early-token")])

        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("integrate-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: directory) }
        let mappingFile = directory.appendingPathComponent("mapping.json").path
        try app.mapping.write(toFile: mappingFile, atomically: true, encoding: .utf8)
        let generated = try await Executables.run(
            "pushctl", ["integrate", "postgres", "--mapping", mappingFile, "--owner", "diary_push_integration"])
        #expect(generated.status == 0, "\(generated.stderr)")
        let sqlFile = directory.appendingPathComponent("integration.sql").path
        try generated.stdout.write(toFile: sqlFile, atomically: true, encoding: .utf8)
        let url = try Backend.postgresAdminURL.replacingOccurrences(of: "/postgres?", with: "/\(location.database)?")
        for _ in 0..<2 {  // applied twice: idempotent
            let psql = await Executables.finish(
                try Executables.start(
                    executable: URL(fileURLWithPath: "/usr/bin/psql"),
                    [url, "-q", "-v", "ON_ERROR_STOP=1", "-f", sqlFile]))
            #expect(psql.status == 0, "\(psql.stderr)")
        }
        let backfill = try await Executables.run("pushctl", ["integrate", "backfill", "--database", url])
        #expect(backfill.status == 0 && backfill.stdout.contains("users: done, 1 rows"), "\(backfill)")

        // The app's life, as its users' role: sign-ups, a device each, a write, a logout, a rotation, settings,
        // an account deletion, a dead token.
        let ids = (2...7).map { String(format: "00000000-0000-4000-8000-%012d", $0) }
        let (due, wrote, loggedOut, rotated, off, deleted) = (ids[0], ids[1], ids[2], ids[3], ids[4], ids[5])
        var statements: [String] = []
        for id in ids {
            statements += [app.signUp(id, "Europe/Berlin", "21:00"), app.addDevice(id, "tok-\(id.suffix(4))")]
        }
        statements += [
            app.addDevice(due, "dead-\(due.suffix(4))"),
            app.write(wrote, "2026-11-21T19:30:00Z"),
            app.logout(loggedOut, "tok-\(loggedOut.suffix(4))"),
            app.rotate(rotated, "tok-\(rotated.suffix(4))", "new-\(rotated.suffix(4))"),
            app.remindersOff(off),
            app.deleteAccount(deleted),
        ]
        _ = try await Self.asApp(location, statements)
        // The app's role reaches nothing of the push schema.
        await #expect(throws: (any Error).self) { _ = try await Self.asApp(location, ["SELECT id FROM push.users"]) }

        let sender = RecordingSender()
        let summary = try await DiaryReminderRunner(store: store, sender: sender, logger: quietLogger).run(
            ReminderRunOptions(now: instant("2026-11-21T20:00:00Z")))
        let reached = await sender.sent.map { "\($0.device.userID) \($0.device.token)" }.sorted()
        #expect(
            reached
                == [
                    "\(due) dead-\(due.suffix(4))", "\(due) tok-\(due.suffix(4))", "\(early) early-token",
                    "\(rotated) new-\(rotated.suffix(4))",
                ].sorted(),
            "\(reached)")
        #expect(summary.claimed == 3 && !reached.contains { $0.hasPrefix(deleted) }, "\(summary.text)")
        // The dead token, deactivated by the run, is inactive in the app's own table too.
        #expect(try await Self.asApp(location, [app.isActive("dead-\(due.suffix(4))")]) == ["false"])
        #expect(try await Self.asApp(location, [app.isActive("tok-\(due.suffix(4))")]) == ["true"])

        let check = try await Executables.run("pushctl", ["integrate", "check", "--database", url])
        #expect(check.status == 0 && check.stdout.hasSuffix("in step\n"), "\(check.stdout) \(check.stderr)")
        // Drift: a push row changed behind the mirror's back, and a row the push schema refuses.
        _ = try await Self.session(location, ["DELETE FROM push.users WHERE id = '\(off)'"])
        _ = try await Self.asApp(location, [app.addDevice(due, "bad token with spaces")])
        let drift = try await Executables.run("pushctl", ["integrate", "check", "--database", url])
        #expect(drift.status == 1, "\(drift.stdout) \(drift.stderr)")
        #expect(drift.stdout.contains("users \(off): in the app, not in the push schema"), "\(drift.stdout)")
        #expect(drift.stdout.contains("rejects"), "\(drift.stdout)")

        // Removed, the mirror is gone and the app writes as before.
        let drop = try await Executables.run("pushctl", ["integrate", "postgres", "--mapping", mappingFile, "--drop"])
        try drop.stdout.write(toFile: sqlFile, atomically: true, encoding: .utf8)
        let dropped = await Executables.finish(
            try Executables.start(
                executable: URL(fileURLWithPath: "/usr/bin/psql"), [url, "-q", "-v", "ON_ERROR_STOP=1", "-f", sqlFile]))
        #expect(dropped.status == 0, "\(dropped.stderr)")
        _ = try await Self.asApp(location, [app.signUp("00000000-0000-4000-8000-000000000099", "UTC", "09:00")])
        #expect(try await Self.session(location, ["SELECT count(*)::text FROM push.users"]) == ["5"])
    }
}

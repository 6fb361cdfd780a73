import Foundation
import JobKitTestSupport
import Logging
import PostgresNIO
import Testing

@testable import JobKit
@testable import JobKitDelivery
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
        /// Its three tables, qualified.
        let tables: [String]
        /// SQL that registers a Firebase installation id (FID) for a user, where the app keeps them.
        var addFID: (@Sendable (String, String) -> String)? = nil
        /// SQL that registers an APNs token for a user, where the app keeps a provider column.
        var addAPNs: (@Sendable (String, String) -> String)? = nil
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
        isActive: { token in "SELECT is_active::text FROM user_devices WHERE fcm_token = '\(token)'" },
        tables: ["public.profiles", "public.user_devices", "public.entries"])

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
            CREATE TABLE app.push_tokens (id bigserial PRIMARY KEY,
                owner text NOT NULL REFERENCES app.accounts ON DELETE CASCADE, value text UNIQUE, fid text UNIQUE,
                service text NOT NULL DEFAULT 'fcm', os text NOT NULL, enabled boolean NOT NULL DEFAULT true,
                CHECK (value IS NOT NULL OR fid IS NOT NULL))
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
                           "columns": { "user_id": "owner", "token": "value", "fid": "fid", "provider": "service",
                                        "platform": "os", "active": "enabled" } },
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
        isActive: { token in "SELECT enabled::text FROM app.push_tokens WHERE value = '\(token)'" },
        tables: ["app.accounts", "app.push_tokens", "app.journal"],
        addFID: { id, fid in "INSERT INTO app.push_tokens (owner, fid, os) VALUES ('\(id)', '\(fid)', 'android')" },
        addAPNs: { id, token in
            "INSERT INTO app.push_tokens (owner, value, service, os) VALUES ('\(id)', '\(token)', 'apns', 'ios')"
        })

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

    /// A fresh database with Supabase's roles, the app's tables under RLS (written by `authenticated`), the push
    /// schema migrated, and the integration's SQL from `pushctl integrate postgres` applied (twice: idempotent)
    /// after `before` ran as the app.
    struct Integrated {
        let location: PostgresLocation
        let url: String
        let directory: URL
        let mappingFile: String
        let sqlFile: String
    }

    static func integrated(_ app: App, before: [String] = []) async throws -> Integrated {
        let admin = try PostgresLocation.parse(try Backend.postgresAdminURL)
        var location = admin
        location.database = "t_" + UUID().uuidString.lowercased().replacingOccurrences(of: "-", with: "")
        _ = try await Self.session(admin, ["CREATE DATABASE \(location.database)"])
        let appSchema = app.tables.first!.split(separator: ".").first!
        _ = try await Self.session(
            location,
            [
                """
                DO $$ DECLARE r text; BEGIN
                    FOREACH r IN ARRAY ARRAY['anon', 'authenticated', 'service_role'] LOOP
                        -- Roles are the cluster's: another test's database may be making them at this moment.
                        IF NOT EXISTS (SELECT 1 FROM pg_roles WHERE rolname = r) THEN
                            BEGIN
                                EXECUTE format('CREATE ROLE %I NOLOGIN', r);
                            EXCEPTION WHEN duplicate_object OR unique_violation THEN NULL;
                            END;
                        END IF;
                    END LOOP;
                END $$
                """,
                "CREATE SCHEMA push",
                "ALTER ROLE \(location.user) IN DATABASE \(location.database) SET search_path = push",
            ] + app.ddl
                + app.tables.flatMap { table in
                    [
                        "ALTER TABLE \(table) ENABLE ROW LEVEL SECURITY",
                        "CREATE POLICY own_rows ON \(table) TO authenticated USING (true) WITH CHECK (true)",
                        "GRANT SELECT, INSERT, UPDATE, DELETE ON \(table) TO authenticated",
                    ]
                } + [
                    "GRANT USAGE ON SCHEMA \(appSchema) TO authenticated",
                    "GRANT USAGE ON ALL SEQUENCES IN SCHEMA \(appSchema) TO authenticated",
                ])
        let store = try await PostgresStore.open(location, mode: .create, logger: quietLogger)
        await store.close()
        if !before.isEmpty { _ = try await Self.asApp(location, before) }

        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("integrate-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        let mappingFile = directory.appendingPathComponent("mapping.json").path
        try app.mapping.write(toFile: mappingFile, atomically: true, encoding: .utf8)
        let generated = try await Executables.run(
            "pushctl", ["integrate", "postgres", "--mapping", mappingFile, "--owner", "diary_push_integration"])
        #expect(generated.status == 0, "\(generated.stderr)")
        let sqlFile = directory.appendingPathComponent("integration.sql").path
        try generated.stdout.write(toFile: sqlFile, atomically: true, encoding: .utf8)
        let url = try Backend.postgresAdminURL.replacingOccurrences(of: "/postgres?", with: "/\(location.database)?")
        for _ in 0..<2 {
            let psql = await Executables.finish(
                try Executables.start(
                    executable: URL(fileURLWithPath: "/usr/bin/psql"),
                    [url, "-q", "-v", "ON_ERROR_STOP=1", "-f", sqlFile]))
            #expect(psql.status == 0, "\(psql.stderr)")
        }
        return Integrated(
            location: location, url: url, directory: directory, mappingFile: mappingFile, sqlFile: sqlFile)
    }

    @Test(arguments: [("supabase", supabase), ("other names", other)])
    func theAppWritesItsOwnTablesAndTheJobsRemindAsTheySay(_ name: String, _ app: App) async throws {
        // A user who signed up before the integration: the backfill brings them in.
        let early = "00000000-0000-4000-8000-000000000001"
        let setup = try await Self.integrated(
            app, before: [app.signUp(early, "UTC", "20:00"), app.addDevice(early, "early-token")])
        defer { try? FileManager.default.removeItem(at: setup.directory) }
        let (location, url, mappingFile, sqlFile) = (setup.location, setup.url, setup.mappingFile, setup.sqlFile)
        let store = try await PostgresStore.open(location, mode: .readWrite, logger: quietLogger)
        defer { Task { await store.close() } }
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
        // Where the app keeps FCM installation ids, the logged-out user's new phone has one: reminded by its FID.
        let fid = "cFidOfANewPhone0123456"
        if let addFID = app.addFID { statements.append(addFID(loggedOut, fid)) }
        // Where the app keeps APNs tokens, one as an iOS app hex-encodes it in upper case (%02X), dead: the push
        // schema keeps it in lower case, and its deactivation must still reach the app's row (issue 78).
        let upperDead = "DEAD" + String(repeating: "0A", count: 30)
        if let addAPNs = app.addAPNs { statements.append(addAPNs(due, upperDead)) }
        _ = try await Self.asApp(location, statements)
        // The app's role reaches nothing of the push schema.
        await #expect(throws: (any Error).self) { _ = try await Self.asApp(location, ["SELECT id FROM push.users"]) }

        // The run, against the provider simulator (FCM HTTP v1 over HTTP/2 and TLS, with its OAuth endpoint).
        let harness = try await DeliveryHarness.start()
        defer { Task { await harness.stop() } }
        let sender = try await PushSender(configuration: harness.delivery(), credentials: store, logger: quietLogger)
        let summary = try await DiaryReminderRunner(store: store, sender: sender, logger: quietLogger).run(
            ReminderRunOptions(now: instant("2026-11-21T20:00:00Z")))
        await sender.shutdown()
        let accepted = harness.simulator.accepted()
        let reached = accepted.map(\.token).sorted()
        #expect(
            reached
                == (["tok-\(due.suffix(4))", "early-token", "new-\(rotated.suffix(4))"]
                + (app.addFID == nil ? [] : [fid])).sorted(),
            "\(reached) \(summary.text)")
        #expect(summary.outcomes[.tokenDead] == (app.addAPNs == nil ? 1 : 2), "\(summary.text)")
        #expect(
            summary.claimed == (app.addFID == nil ? 3 : 4) && !reached.contains { $0.hasSuffix(deleted.suffix(4)) },
            "\(summary.text)")
        if app.addFID != nil {
            // Sent as FCM's `message.fid`, never as a token.
            #expect(accepted.filter { $0.token == fid }.map(\.target) == ["fid"])
        }
        // The dead token, deactivated by the run, is inactive in the app's own table too.
        #expect(try await Self.asApp(location, [app.isActive("dead-\(due.suffix(4))")]) == ["false"])
        #expect(try await Self.asApp(location, [app.isActive("tok-\(due.suffix(4))")]) == ["true"])
        if app.addAPNs != nil {
            let rejects = try await Self.session(
                location,
                [
                    """
                    SELECT coalesce((SELECT string_agg(operation || ': ' || error, '; ') FROM push.integration_rejects), '')
                        || ' devices: ' || (SELECT string_agg(token || ' ' || is_active::text || ' '
                        || coalesce(deactivation_reason, '-'), ', ') FROM push.user_devices WHERE token LIKE 'dead%')
                        || ' holds: ' || coalesce((SELECT string_agg(reason, ', ') FROM push.device_holds), '')
                        || ' deliveries: ' || coalesce((SELECT string_agg(d.token || ' ' || x.outcome || ' ' || coalesce(x.reason, '-'), ', ')
                        FROM push.notification_deliveries x JOIN push.user_devices d ON d.id = x.device_id), '')
                        || ' app: ' || (SELECT string_agg(value || ' ' || enabled::text, ', ') FROM app.push_tokens)
                    """
                ])
            #expect(
                try await Self.asApp(location, [app.isActive(upperDead)]) == ["false"],
                "rejects: \(rejects) \(summary.text)")
        }
        // Entries are read in place: the app's own, and the push schema's (the API's, pushctl's) through the view.
        let day = instant("2026-11-21T00:00:00Z")..<instant("2026-11-22T00:00:00Z")
        #expect(try await store.entryCount(userID: wrote, in: day) == 1)
        try await store.recordEntry(userID: early, at: instant("2026-11-21T20:05:00Z"))
        #expect(try await store.entryCount(userID: early, in: day) == 1)

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
        // The push schema's own entries are a table again, with what was written through the view.
        #expect(
            try await Self.session(
                location, ["SELECT relkind::text FROM pg_class WHERE oid = 'push.diary_entries'::regclass"]) == ["r"])
        #expect(try await store.entryCount(userID: early, in: day) == 1)
        #expect(try await store.entryCount(userID: wrote, in: day) == 0)
    }

    /// Issue 78, as the plain-PostgreSQL guide sets it up: the jobs log in as their own role, which owns the push
    /// schema; the app's tables belong to another role (not a superuser: CREATEROLE, a member of the jobs' role, as
    /// Supabase's `postgres` is); the SQL is applied once. Bigint ids, upper-case APNs tokens beside FCM ones, a
    /// nested JSON flag, the app's own `last_seen`. Every command of the guide then runs as the jobs' role, a bad row
    /// is reported by its key and passed over, no token is printed whole, and 120 days on the janitor deactivates
    /// none of the devices the app still holds active (while a device of the jobs' own still goes stale).
    @Test func theGuidesRolesRunEveryCommandAfterOneApplyAndMirroredDevicesNeverGoStale() async throws {
        let admin = try PostgresLocation.parse(try Backend.postgresAdminURL)
        let suffix = String(UUID().uuidString.lowercased().prefix(8))
        let (jobs, owner, functions) = ("push_\(suffix)", "app_owner_\(suffix)", "diary_push_integration_\(suffix)")
        var location = admin
        location.database = "t_" + suffix
        _ = try await Self.session(
            admin,
            [
                "CREATE DATABASE \(location.database)",
                "CREATE ROLE \(jobs) LOGIN PASSWORD 'jobs-secret'",
                "CREATE ROLE \(owner) LOGIN CREATEROLE PASSWORD 'owner-secret'",
                "GRANT \(jobs) TO \(owner)",
            ])
        func url(_ role: String, _ password: String) throws -> String {
            var components = try #require(URLComponents(string: try Backend.postgresAdminURL))
            components.user = role
            components.password = password
            components.path = "/" + location.database
            return try #require(components.string)
        }
        let (jobsURL, ownerURL) = (try url(jobs, "jobs-secret"), try url(owner, "owner-secret"))
        var asOwner = try PostgresLocation.parse(ownerURL)
        asOwner.database = location.database
        // The guide's first line (the schema, the jobs' path), then the app's own tables, by their owner.
        _ = try await Self.session(
            location,
            [
                "CREATE SCHEMA push AUTHORIZATION \(jobs)",
                "ALTER ROLE \(jobs) IN DATABASE \(location.database) SET search_path = push",
                "CREATE SCHEMA app AUTHORIZATION \(owner)",
            ])
        _ = try await Self.session(
            asOwner,
            [
                """
                CREATE TABLE app.members (member_id bigint PRIMARY KEY, "Zone" text,
                    prefs jsonb NOT NULL DEFAULT '{}'::jsonb)
                """,
                """
                CREATE TABLE app.devices (id bigserial PRIMARY KEY,
                    member_id bigint NOT NULL REFERENCES app.members ON DELETE CASCADE, push_token text UNIQUE,
                    kind text NOT NULL, os text NOT NULL, enabled boolean NOT NULL DEFAULT true,
                    last_seen timestamptz NOT NULL DEFAULT now(), revoked_at timestamptz)
                """,
                // Names that need quoting (issue 78, item 10): a space, mixed case, a quote.
                #"CREATE TABLE app."Diary Posts" (member_id bigint NOT NULL, "Posted At" timestamptz NOT NULL, "it's gone" timestamptz)"#,
            ])
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("guide-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: directory) }
        let mappingFile = directory.appendingPathComponent("mapping.json").path
        try #"""
        { "users": { "table": "app.members",
                     "columns": { "id": "member_id", "timezone": "Zone",
                                  "reminder_time": "prefs.daily.time", "reminders": "prefs.daily.on" } },
          "devices": { "table": "app.devices",
                       "columns": { "user_id": "member_id", "token": "push_token", "provider": "kind",
                                    "platform": "os", "active": "enabled", "last_seen": "last_seen",
                                    "revoked": "revoked_at" } },
          "entries": { "table": "app.\"Diary Posts\"",
                       "columns": { "user_id": "member_id", "at": "\"Posted At\"", "deleted": "\"it's gone\"" } } }
        """#.write(toFile: mappingFile, atomically: true, encoding: .utf8)

        // As the guide says: migrate as the jobs' role, the SQL once as the tables' owner.
        let migrate = try await Executables.run("pushctl", ["migrate", "--database", jobsURL])
        #expect(migrate.status == 0, "\(migrate.stderr)")
        let generated = try await Executables.run(
            "pushctl", ["integrate", "postgres", "--mapping", mappingFile, "--owner", functions])
        #expect(generated.status == 0, "\(generated.stderr)")
        let sqlFile = directory.appendingPathComponent("integration.sql").path
        try generated.stdout.write(toFile: sqlFile, atomically: true, encoding: .utf8)
        let psql = await Executables.finish(
            try Executables.start(
                executable: URL(fileURLWithPath: "/usr/bin/psql"),
                [ownerURL, "-q", "-v", "ON_ERROR_STOP=1", "-f", sqlFile]))
        #expect(psql.status == 0, "\(psql.stderr)")

        // The app: three members seen on 1 August, one of them with a flag that is no boolean (rejected, keyed).
        let seen = "2026-08-01T12:00:00Z"
        let upper = String(repeating: "AB", count: 32)
        _ = try await Self.session(
            asOwner,
            [
                """
                INSERT INTO app.members VALUES
                    (9000000001, 'Asia/Kolkata', '{"daily": {"time": "21:00", "on": true}}'),
                    (9000000002, 'America/St_Johns', '{"daily": {"time": "08:30", "on": true}}'),
                    (9000000003, 'Pacific/Chatham', '{"daily": {"time": "07:00", "on": "sometimes"}}')
                """,
                """
                INSERT INTO app.devices (member_id, push_token, kind, os, last_seen) VALUES
                    (9000000001, '\(upper)', 'APNS', 'iOS', '\(seen)'),
                    (9000000001, 'fcm-token-of-member-one:APA91b', 'fcm', 'android', '\(seen)'),
                    (9000000002, 'fcm-token-of-member-two:APA91b', 'fcm', 'android', '\(seen)')
                """,
            ])
        #expect(
            try await Self.session(
                location, ["SELECT string_agg(extract(epoch FROM last_seen)::bigint::text, ',') FROM push.user_devices"]
            )
                == ["\(instant(seen)),\(instant(seen)),\(instant(seen))"])

        // Every command of the guide, as the jobs' role: the backfill (nothing new), the check (the bad row, by its
        // key; the tokens masked), the reminder run (reading the entries' view), the janitor.
        let backfill = try await Executables.run("pushctl", ["integrate", "backfill", "--database", jobsURL])
        #expect(backfill.status == 0, "\(backfill.stdout) \(backfill.stderr)")
        let check = try await Executables.run("pushctl", ["integrate", "check", "--database", jobsURL])
        #expect(check.status == 1, "\(check.stdout) \(check.stderr)")
        #expect(
            check.stdout.contains(#"rejects "app.members INSERT 9000000003": invalid input syntax for type boolean"#),
            "\(check.stdout)")
        #expect(check.stdout.contains(#"rejects "app.members BACKFILL 9000000003""#), "\(check.stdout)")
        #expect(!check.stdout.contains("users 9000000001") && !check.stdout.contains("devices"), "\(check.stdout)")
        // Support asks about members the push schema does not know: explain says why, reading the app's row as
        // the jobs' role (a sign-up without a zone; the rejected row; an id of no row; an id no bigint can be).
        _ = try await Self.session(asOwner, ["INSERT INTO app.members (member_id) VALUES (9000000004)"])
        for (member, why) in [
            ("9000000004", "not a push user yet: their row in the app's users table has no time zone"),
            ("9000000003", #"has the time zone "Pacific/Chatham" but was not mirrored"#),
            ("9000000099", nil), ("member-x", nil),
        ] {
            let explain = try await Executables.run("diary-reminder", ["--database", jobsURL, "--explain", member])
            #expect(explain.status == 65 && explain.stderr.contains("unknown user"), "\(member): \(explain.stderr)")
            if let why {
                #expect(explain.stderr.contains(why), "\(member): \(explain.stderr)")
            } else {
                #expect(!explain.stderr.contains("push user"), "\(member): \(explain.stderr)")
            }
        }
        _ = try await Self.session(
            location,
            [
                "UPDATE push.user_devices SET is_active = false, deactivated_at = now(), deactivation_reason = 'logout' WHERE provider = 'fcm' AND user_id = '9000000002'"
            ])
        let drifted = try await Executables.run("pushctl", ["integrate", "check", "--database", jobsURL])
        #expect(
            drifted.stdout.contains(#"devices "9000000002 fcm-toke…(30)": active in the app, not in the push schema"#),
            "\(drifted.stdout)")
        for token in [upper, upper.lowercased(), "fcm-token-of-member-one:APA91b", "fcm-token-of-member-two:APA91b"] {
            #expect(!drifted.stdout.contains(token) && !drifted.stderr.contains(token), "\(drifted.stdout)")
        }
        _ = try await Self.session(
            location,
            ["UPDATE push.user_devices SET is_active = true, deactivated_at = NULL, deactivation_reason = NULL"])

        var asJobs = try PostgresLocation.parse(jobsURL)
        asJobs.database = location.database
        let store = try await PostgresStore.open(asJobs, mode: .readWrite, logger: quietLogger)
        defer { Task { await store.close() } }
        // The API refuses its own writes of what the app's tables hold (APIHandlers.refuseIfTheAppOwns).
        #expect(try await store.integratedKinds() == [.users, .devices])
        let harness = try await DeliveryHarness.start()
        defer { Task { await harness.stop() } }
        let sender = try await PushSender(configuration: harness.delivery(), credentials: store, logger: quietLogger)
        // 21:00 in Kolkata on 21 November: member one's two devices. Member one's post of that afternoon was
        // deleted (soft, `"it's gone"`): no write, so no reason to skip the reminder.
        _ = try await Self.session(
            asOwner,
            [#"INSERT INTO app."Diary Posts" VALUES (9000000001, '2026-11-21T10:00:00Z', '2026-11-21T10:05:00Z')"#])
        let summary = try await DiaryReminderRunner(store: store, sender: sender, logger: quietLogger).run(
            ReminderRunOptions(now: instant("2026-11-21T15:30:00Z")))
        await sender.shutdown()
        #expect(summary.claimed == 1 && summary.outcomes[.delivered] == 2, "\(summary.text)")
        #expect(
            Set(harness.simulator.accepted().map(\.token)) == [upper.lowercased(), "fcm-token-of-member-one:APA91b"])

        // A device of the jobs' own (registered through them, not in the app's table), last seen in August too.
        _ = try await store.register(
            try DeviceRegistration(
                userID: "9000000002", token: "api-registered-token", provider: .fcm, platform: .android),
            now: instant(seen))
        // 120 days on: the app never marked its devices seen again, yet still holds them active.
        let janitor = try await Executables.run(
            "token-janitor", ["run", "--database", jobsURL, "--now", "2026-11-29T03:00:00Z"])
        #expect(janitor.status == 0, "\(janitor.stdout) \(janitor.stderr)")
        #expect(janitor.stdout.contains("stale_deactivated=1 "), "\(janitor.stdout)")
        #expect(
            try await Self.session(asOwner, ["SELECT string_agg(enabled::text, ',') FROM app.devices"]) == [
                "true,true,true"
            ])
        #expect(
            try await Self.session(
                location,
                ["SELECT string_agg(token || '=' || is_active::text, ',' ORDER BY token) FROM push.user_devices"])
                == [
                    "\(upper.lowercased())=true,api-registered-token=false,fcm-token-of-member-one:APA91b=true,fcm-token-of-member-two:APA91b=true"
                ])
        let after = try await Executables.run("pushctl", ["integrate", "check", "--database", jobsURL])
        #expect(!after.stdout.contains("devices "), "\(after.stdout)")

        // An iOS row whose raw APNs token the app filed as FCM: the mirror refuses it, says why, names the row.
        _ = try await Self.session(
            asOwner,
            [
                "INSERT INTO app.devices (member_id, push_token, kind, os) VALUES (9000000002, '\(String(repeating: "cd", count: 32))', 'fcm', 'ios')"
            ])
        // A device the app revokes (`revoked_at`, its `enabled` untouched) is logged out.
        _ = try await Self.session(
            asOwner, ["UPDATE app.devices SET revoked_at = now() WHERE push_token = 'fcm-token-of-member-two:APA91b'"])
        #expect(
            try await Self.session(
                location,
                [
                    "SELECT is_active::text || ' ' || deactivation_reason FROM push.user_devices WHERE token = 'fcm-token-of-member-two:APA91b'"
                ]
            ) == ["false logout"])
        let refused = try await Executables.run("pushctl", ["integrate", "check", "--database", jobsURL])
        #expect(
            refused.stdout.contains(
                #"rejects "app.devices INSERT 9000000002 cdcdcdcd…(64)": this is an APNs device token"#),
            "\(refused.stdout)")
    }

    /// Captures every row change of `tables` into `public.captured` (`n`, `kind`, `schema_name`, `table_name`,
    /// `record`, `old_record`), as Supabase's Database Webhooks would send them.
    static func captureChanges(_ location: PostgresLocation, of tables: [String]) async throws {
        _ = try await session(
            location,
            [
                """
                CREATE TABLE public.captured (n bigserial PRIMARY KEY, kind text, schema_name text, table_name text,
                    record jsonb, old_record jsonb)
                """,
                """
                CREATE FUNCTION public.capture() RETURNS trigger LANGUAGE plpgsql SECURITY DEFINER AS $$ BEGIN
                    INSERT INTO public.captured (kind, schema_name, table_name, record, old_record)
                    VALUES (TG_OP, TG_TABLE_SCHEMA, TG_TABLE_NAME, CASE WHEN TG_OP <> 'DELETE' THEN to_jsonb(NEW) END,
                            CASE WHEN TG_OP <> 'INSERT' THEN to_jsonb(OLD) END);
                    RETURN NULL;
                END $$
                """,
            ]
                + tables.map {
                    "CREATE TRIGGER capture AFTER INSERT OR UPDATE OR DELETE ON \($0) FOR EACH ROW EXECUTE FUNCTION public.capture()"
                })
    }

    /// A deterministic generator (SplitMix64), so that a failing sequence can be replayed and shrunk.
    struct SplitMix: RandomNumberGenerator {
        var state: UInt64
        mutating func next() -> UInt64 {
            state &+= 0x9E37_79B9_7F4A_7C15
            var z = state
            z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
            z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
            return z ^ (z >> 31)
        }
    }

    /// `count` operations an app makes on its own tables, each valid for the app's schema at its point (a model of
    /// the rows decides what may come next): sign-ups (some without a time zone), settings and zone changes, devices
    /// added, logged out, back in, rotated, deleted, entries, account deletions.
    static func operations(_ count: Int, seed: UInt64, entriesBefore day: String? = nil) -> [String] {
        var random = SplitMix(state: seed)
        var users: [String] = []
        var devices: [(user: String, token: String)] = []
        var next = 0
        var statements: [String] = []
        let zones = ["Europe/Berlin", "Asia/Tokyo", "America/New_York", "UTC"]
        func fresh() -> Int {
            next += 1
            return next
        }
        while statements.count < count {
            switch Int.random(in: 0..<100, using: &random) {
            case 0..<15,
                _ where users.isEmpty:
                let id = String(format: "00000000-0000-4000-8000-%012d", fresh())
                // A sign-up without a zone (not a push user yet) now and then; never with a fixed day, whose twin is
                // written from webhook events, which bring no devices with a zone set later.
                let zone =
                    Int.random(in: 0..<10, using: &random) == 0 && day == nil
                    ? "NULL" : "'\(zones.randomElement(using: &random)!)'"
                let time = String(
                    format: "%02d:%02d", Int.random(in: 0..<24, using: &random),
                    [0, 15, 30, 45].randomElement(using: &random)!)
                statements.append(
                    "INSERT INTO profiles (id, timezone, preferences) VALUES ('\(id)', \(zone), '{\"reminder_time\": \"\(time)\", \"reminders\": \(Bool.random(using: &random))}')"
                )
                users.append(id)
            case 15..<25:
                let id = users.randomElement(using: &random)!
                // Now and then a zone taken away: the stored one stays (null keeps the stored value).
                let zone =
                    Int.random(in: 0..<8, using: &random) == 0 ? "NULL" : "'\(zones.randomElement(using: &random)!)'"
                statements.append("UPDATE profiles SET timezone = \(zone) WHERE id = '\(id)'")
            case 25..<35:
                let id = users.randomElement(using: &random)!
                let time = String(
                    format: "%02d:%02d", Int.random(in: 0..<24, using: &random), Int.random(in: 0..<60, using: &random))
                statements.append(
                    "UPDATE profiles SET preferences = preferences || '{\"reminder_time\": \"\(time)\", \"reminders\": \(Bool.random(using: &random))}' WHERE id = '\(id)'"
                )
            case 35..<55:
                let id = users.randomElement(using: &random)!
                let token = "t\(fresh()):APA91b"
                statements.append(
                    "INSERT INTO user_devices (user_id, fcm_token, platform) VALUES ('\(id)', '\(token)', 'android')")
                devices.append((id, token))
            case 55..<65 where !devices.isEmpty:
                let device = devices.randomElement(using: &random)!
                statements.append(
                    "UPDATE user_devices SET is_active = \(Bool.random(using: &random)) WHERE user_id = '\(device.user)' AND fcm_token = '\(device.token)'"
                )
            case 65..<72 where !devices.isEmpty:
                let index = Int.random(in: 0..<devices.count, using: &random)
                let token = "t\(fresh()):APA91b"
                statements.append(
                    "UPDATE user_devices SET fcm_token = '\(token)' WHERE user_id = '\(devices[index].user)' AND fcm_token = '\(devices[index].token)'"
                )
                devices[index].token = token
            case 72..<77 where !devices.isEmpty:
                let index = Int.random(in: 0..<devices.count, using: &random)
                statements.append(
                    "DELETE FROM user_devices WHERE user_id = '\(devices[index].user)' AND fcm_token = '\(devices[index].token)'"
                )
                devices.remove(at: index)
            case 77..<95:
                let id = users.randomElement(using: &random)!
                statements.append(
                    "INSERT INTO entries (user_id, created_at) VALUES ('\(id)', \(day.map { "'\($0)'::timestamptz" } ?? "now()") - interval '\(Int.random(in: 0..<48, using: &random)) hours')"
                )
            case 95..<100:
                let index = Int.random(in: 0..<users.count, using: &random)
                let id = users.remove(at: index)
                statements.append("DELETE FROM profiles WHERE id = '\(id)'")
                devices.removeAll { $0.user == id }
            default:
                continue
            }
        }
        return statements
    }

    /// What `pushctl integrate check` says after the app ran `statements` on a fresh integrated database; nil when
    /// in step.
    static func drift(after statements: [String]) async throws -> String? {
        let setup = try await integrated(supabase)
        defer { try? FileManager.default.removeItem(at: setup.directory) }
        var index = 0
        while index < statements.count {
            _ = try await asApp(setup.location, Array(statements[index..<min(index + 500, statements.count)]))
            index += 500
        }
        let check = try await Executables.run("pushctl", ["integrate", "check", "--database", setup.url])
        return check.status == 0 ? nil : check.stdout + check.stderr
    }

    /// 10,000 random operations of the app on its own tables leave the push schema in step (users, their mapped
    /// settings, active devices, no rejects). A failure is shrunk to a short sequence that still drifts: the
    /// shortest failing prefix, then each operation left out while it still fails.
    @Test func randomAppOperationsLeaveThePushSchemaInStep() async throws {
        let statements = Self.operations(10_000, seed: 67)
        guard let report = try await Self.drift(after: statements) else { return }
        // Shrink: the shortest failing prefix (bisection), then single operations removed while it still fails.
        var (good, bad) = (0, statements.count)
        while bad - good > 1 {
            let middle = (good + bad) / 2
            if try await Self.drift(after: Array(statements[..<middle])) != nil { bad = middle } else { good = middle }
        }
        var shrunk = Array(statements[..<bad])
        var index = shrunk.count - 2
        var attempts = 0
        while index >= 0 && attempts < 60 {
            var candidate = shrunk
            candidate.remove(at: index)
            attempts += 1
            if try await Self.drift(after: candidate) != nil { shrunk = candidate }
            index -= 1
        }
        let last = try await Self.drift(after: shrunk) ?? report
        Issue.record("drift after \(shrunk.count) operations:\n\(shrunk.joined(separator: ";\n"))\n\(last)")
    }

    /// The same app, written two ways: the integrated database's own tables (mirrored by the generated SQL), and a
    /// plain push schema written by the jobs' own store operations from what Supabase's Database Webhooks would send
    /// for each change (captured by a trigger as `to_jsonb` of the rows, applied by the webhook's rule). A day of
    /// reminder runs, one every 15 minutes, reaches the same devices of the same users, run by run.
    @Test func remindersAreAsForTheSameUsersWrittenNatively() async throws {
        let setup = try await Self.integrated(Self.supabase)
        defer { try? FileManager.default.removeItem(at: setup.directory) }
        try await Self.captureChanges(setup.location, of: Self.supabase.tables)
        let day = "2026-11-21"
        let statements = Self.operations(2_000, seed: 167, entriesBefore: "\(day)T23:00:00Z")
        var index = 0
        while index < statements.count {
            _ = try await Self.asApp(setup.location, Array(statements[index..<min(index + 500, statements.count)]))
            index += 500
        }

        // The twin: a database of its own, written change by change through the webhook's rule.
        let admin = try PostgresLocation.parse(try Backend.postgresAdminURL)
        var twin = admin
        twin.database = setup.location.database + "_twin"
        _ = try await Self.session(admin, ["CREATE DATABASE \(twin.database)"])
        _ = try await Self.session(
            twin, ["CREATE SCHEMA push", "ALTER ROLE \(twin.user) IN DATABASE \(twin.database) SET search_path = push"])
        let native = try await PostgresStore.open(twin, mode: .create, logger: quietLogger)
        defer { Task { await native.close() } }
        let mapping = try AppTableMapping(json: Self.supabase.mapping)
        let written = instant("\(day)T00:00:00Z") - 86_400
        let connection = try await PostgresConnection.connect(
            configuration: try setup.location.connectionConfiguration(applicationName: "tests"), id: 0,
            logger: quietLogger)
        let captured = try await connection.query(
            "SELECT kind, schema_name, table_name, coalesce(record::text, 'null'), coalesce(old_record::text, 'null') FROM public.captured ORDER BY n",
            logger: quietLogger
        ).collect()
        try await connection.close()
        var applied = 0
        for row in captured {
            let (kind, schema, table, record, old) = try row.decode((String, String, String, String, String).self)
            func json(_ text: String) throws -> JSONValue? { text == "null" ? nil : try JSONValue(parsing: text) }
            let change = DatabaseChange(
                kind: DatabaseChange.Kind(rawValue: kind)!, schema: schema, table: table, record: try json(record),
                oldRecord: try json(old))
            do throws(JobError) {
                switch try mapping.appChange(for: change) {
                case .setUser(let edit): _ = try await native.apply(edit, now: written)
                case .deleteUser(let id): _ = try await native.deleteUser(id: id)
                case .register(let registration): _ = try await native.register(registration, now: written)
                case .unregister(let token, let userID):
                    _ = try await native.unregister(token: token, userID: userID, reason: "logout", now: written)
                case .recordEntry(let userID, let at): try await native.recordEntry(userID: userID, at: at ?? written)
                case .nothing: continue
                }
                applied += 1
            } catch {
                // A device or an entry of a user deleted in the same cascade.
                guard error.isUnknownUser else { throw error }
            }
        }
        #expect(applied > 1_000, "\(applied) of \(captured.count) changes applied")

        // A day of runs on both.
        let integrated = try await PostgresStore.open(setup.location, mode: .readWrite, logger: quietLogger)
        defer { Task { await integrated.close() } }
        let (mirrored, twinSender) = (RecordingSender(), RecordingSender())
        var reminded = 0
        var wrote = 0
        for quarter in 0..<96 {
            let now = instant("\(day)T00:00:00Z") + Int64(quarter * 900)
            let before = (await mirrored.sent.count, await twinSender.sent.count)
            let first = try await DiaryReminderRunner(store: integrated, sender: mirrored, logger: quietLogger).run(
                ReminderRunOptions(now: now))
            let second = try await DiaryReminderRunner(store: native, sender: twinSender, logger: quietLogger).run(
                ReminderRunOptions(now: now))
            // The same users skipped for the same reasons (who wrote today: the app's entries through the view).
            #expect(first.skipped == second.skipped, "run at \(Timestamps.format(now))")
            wrote += first.skipped[.wroteToday] ?? 0
            let one = await mirrored.sent.dropFirst(before.0).map { "\($0.device.userID) \($0.device.token)" }.sorted()
            let other = await twinSender.sent.dropFirst(before.1).map { "\($0.device.userID) \($0.device.token)" }
                .sorted()
            #expect(one == other, "run at \(Timestamps.format(now)): integrated \(one), native \(other)")
            reminded += one.count
        }
        #expect(reminded >= 30 && wrote >= 10, "\(reminded) reminders, \(wrote) users who wrote, in the day")
    }
}

import Foundation
import GRDB
import JobKitTestSupport
import PostgresNIO
import Testing

@testable import JobKit
@testable import JobKitPostgres
@testable import JobKitSQLite

/// Issue 64: docs/SCHEMA.md is a contract a backend in any language follows word for word. Every statement of
/// its "Writing from a backend" section runs here as written, with bound parameters, on both stores, and does
/// what `pushctl` does; the schema refuses the mistakes a backend makes, whatever its connection's settings.
@Suite struct SchemaContractTests {
    /// The operations the section must state, each for both dialects.
    static let operations = [
        "upsert-user", "upsert-settings", "register-device", "retire-replaced", "logout", "entry", "delete-user",
    ]

    /// The section's statements: dialect → operation → SQL.
    static func statements() throws -> [String: [String: String]] {
        let text = try String(
            contentsOf: URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
                .deletingLastPathComponent().appendingPathComponent("docs/SCHEMA.md"), encoding: .utf8)
        var found: [String: [String: String]] = [:]
        var lines = text.split(separator: "\n", omittingEmptySubsequences: false)[...]
        while let line = lines.popFirst() {
            let words = line.split(separator: " ")
            guard words.count == 3, words[0] == "```sql", ["sqlite", "postgres"].contains(words[1]) else { continue }
            var body: [Substring] = []
            while let next = lines.popFirst(), next != "```" { body.append(next) }
            found[String(words[1]), default: [:]][String(words[2])] = body.joined(separator: "\n")
        }
        return found
    }

    /// The `:name` parameters of a statement, in order of first use.
    static func parameters(_ sql: String) -> [String] {
        var names: [String] = []
        var index = sql.startIndex
        while let colon = sql[index...].firstIndex(of: ":") {
            let start = sql.index(after: colon)
            let end = sql[start...].firstIndex { !($0.isLetter || $0.isNumber || $0 == "_") } ?? sql.endIndex
            // A name starts with a letter (`'20:00'` holds none); `::text` casts are not parameters.
            if end > start && sql[start].isLetter && (colon == sql.startIndex || sql[sql.index(before: colon)] != ":") {
                let name = String(sql[start..<end])
                if !names.contains(name) { names.append(name) }
            }
            index = end > start ? end : start
        }
        return names
    }

    /// A backend's connection: SQLite as a plain `sqlite3` connection opens it (foreign keys off, no busy
    /// timeout), then the section's connection settings unless `configured` is false; PostgreSQL as a client.
    final class BackendConnection: @unchecked Sendable {
        let backend: Backend
        let dialect: String
        let statements: [String: String]
        private var queue: DatabaseQueue?
        private let db: TemporaryDatabase

        init(_ db: TemporaryDatabase, configured: Bool = true) throws {
            backend = db.backend
            dialect = db.backend == .sqlite ? "sqlite" : "postgres"
            statements = try SchemaContractTests.statements()[dialect] ?? [:]
            self.db = db
            if db.backend == .sqlite {
                var configuration = Configuration()
                configuration.foreignKeysEnabled = false
                configuration.busyMode = .immediateError
                let queue = try DatabaseQueue(path: db.path, configuration: configuration)
                if configured, let connect = try SchemaContractTests.statements()["sqlite"]?["connect"] {
                    try queue.inDatabase { try $0.execute(sql: connect) }
                }
                self.queue = queue
            }
        }

        /// Runs operation `name` with `values` bound by name; every parameter must have a value.
        func run(_ name: String, _ values: [String: (any Sendable)?]) async throws {
            let sql = try #require(statements[name], "docs/SCHEMA.md states no \(dialect) \(name)")
            try await execute(sql, values)
        }

        func execute(_ sql: String, _ values: [String: (any Sendable)?]) async throws {
            let names = SchemaContractTests.parameters(sql)
            for name in names where values.index(forKey: name) == nil {
                Issue.record("no value for :\(name)")
            }
            if let queue {
                var arguments: [String: (any DatabaseValueConvertible)?] = [:]
                for name in names {
                    switch values[name] ?? nil {
                    case let value as Bool: arguments[name] = value ? 1 : 0
                    case let value as Int64: arguments[name] = value
                    case let value as Int: arguments[name] = value
                    case let value as Double: arguments[name] = value
                    case let value as String: arguments[name] = value
                    default: arguments.updateValue(nil, forKey: name)
                    }
                }
                let bound = StatementArguments(arguments)
                try queue.inDatabase { try $0.execute(sql: sql, arguments: bound) }
                return
            }
            var positional = sql
            var binds = PostgresBindings()
            for (n, name) in names.enumerated() {
                positional = positional.replacingOccurrences(
                    of: ":\(name)(?![A-Za-z0-9_])", with: "\\$\(n + 1)", options: .regularExpression)
                switch values[name] ?? nil {
                case let value as Bool: binds.append(value)
                case let value as Int64: binds.append(value)
                case let value as Int: binds.append(Int64(value))
                case let value as Double: binds.append(value)
                case let value as String: binds.append(value)
                default: binds.appendNull()
                }
            }
            _ = try await (db.store as! PostgresStore).write(
                "a backend's statement", PostgresQuery(unsafeSQL: positional, binds: binds))
        }
    }

    static let now: Int64 = 1_795_000_000  // 2026-11-18T…Z, whole seconds

    /// The scenario as a backend writes it, through the section's statements.
    static func writeWithTheContract(_ db: TemporaryDatabase) async throws {
        let backend = try BackendConnection(db)
        func user(_ id: String, _ zone: String, _ locale: String, _ plan: String) async throws {
            try await backend.run(
                "upsert-user", ["id": id, "timezone": zone, "locale": locale, "plan": plan, "now": now])
        }
        func settings(_ id: String, _ time: String, reminders: Bool = true, quiet: (String, String)? = nil)
            async throws
        {
            try await backend.run(
                "upsert-settings",
                [
                    "user_id": id, "diary_reminder_enabled": reminders, "reminder_time": time,
                    "content_limit_warnings_enabled": true, "quiet_hours_start": quiet?.0,
                    "quiet_hours_end": quiet?.1, "now": now,
                ])
        }
        func device(_ id: String, _ token: String, _ provider: String, kind: String = "token") async throws {
            try await backend.run(
                "register-device",
                [
                    "user_id": id, "token": token, "provider": provider,
                    "platform": provider == "apns" ? "ios" : "android",
                    "apns_environment": provider == "apns" ? "production" : nil, "token_kind": kind,
                    "app_version": "1.2", "now": now,
                ])
        }
        try await user("alice", "Europe/Berlin", "de", "free")
        try await settings("alice", "21:00")
        try await user("bob", "Asia/Tokyo", "ja", "pro")
        try await settings("bob", "20:00", quiet: ("22:00", "07:00"))
        try await user("alice", "America/New_York", "de", "free")  // a zone change
        try await device("alice", hexToken("ab", 1), "apns")
        try await device("bob", "bob-phone:APA91b", "fcm")
        try await device("alice", "bob-phone:APA91b", "fcm")  // the phone changes hands
        try await backend.run("logout", ["token": "bob-phone:APA91b", "user_id": "bob", "now": now])  // a late logout
        try await backend.run("entry", ["user_id": "alice", "created_at": now])
        try await user("carol", "UTC", "en", "free")
        try await settings("carol", "09:00", reminders: false)
        try await device("carol", "carol-phone:APA91b", "fcm")
        try await backend.run("delete-user", ["id": "carol"])
        try await user("dave", "UTC", "en", "free")
        try await settings("dave", "09:00")
        try await device("dave", "dave-old:APA91b", "fcm")
        try await device("dave", FCMInstallationIDTests.fid("cD", 1), "fcm", kind: "fid")
        try await backend.run(
            "retire-replaced", ["replaced_token": "dave-old:APA91b", "user_id": "dave", "now": now])
    }

    /// The same scenario through `pushctl`.
    static func writeWithPushctl(_ db: TemporaryDatabase) async throws {
        let database = ["--database", db.path]
        let calls: [[String]] = [
            [
                "user", "set", "--id", "alice", "--timezone", "Europe/Berlin", "--locale", "de", "--plan", "free",
                "--reminder-time", "21:00",
            ],
            [
                "user", "set", "--id", "bob", "--timezone", "Asia/Tokyo", "--locale", "ja", "--plan", "pro",
                "--reminder-time", "20:00", "--quiet-hours", "22:00-07:00",
            ],
            ["user", "set", "--id", "alice", "--timezone", "America/New_York"],
            [
                "device", "register", "--user", "alice", "--token", hexToken("ab", 1), "--provider", "apns",
                "--platform",
                "ios", "--app-version", "1.2",
            ],
            [
                "device", "register", "--user", "bob", "--token", "bob-phone:APA91b", "--provider", "fcm", "--platform",
                "android", "--app-version", "1.2",
            ],
            [
                "device", "register", "--user", "alice", "--token", "bob-phone:APA91b", "--provider", "fcm",
                "--platform", "android", "--app-version", "1.2",
            ],
            ["device", "unregister", "--token", "bob-phone:APA91b", "--user", "bob"],
            ["entry", "add", "--user", "alice", "--at", Timestamps.format(now)],
            ["user", "set", "--id", "carol", "--timezone", "UTC", "--reminder-time", "09:00", "--reminders", "off"],
            [
                "device", "register", "--user", "carol", "--token", "carol-phone:APA91b", "--provider", "fcm",
                "--platform", "android", "--app-version", "1.2",
            ],
            ["user", "delete", "--id", "carol"],
            ["user", "set", "--id", "dave", "--timezone", "UTC", "--reminder-time", "09:00"],
            [
                "device", "register", "--user", "dave", "--token", "dave-old:APA91b", "--provider", "fcm", "--platform",
                "android", "--app-version", "1.2",
            ],
            [
                "device", "register", "--user", "dave", "--fid", FCMInstallationIDTests.fid("cD", 1), "--platform",
                "android", "--app-version", "1.2", "--replaces", "dave-old:APA91b",
            ],
        ]
        for call in calls {
            let result = try await Executables.run("pushctl", call + database)
            #expect(result.status == 0, "\(call): \(result.stderr)")
        }
    }

    /// What the jobs read, without ids and instants.
    static func effects(_ db: TemporaryDatabase) async throws -> [String] {
        let active = db.backend == .sqlite ? "is_active" : "CASE WHEN is_active THEN 1 ELSE 0 END"
        let flag = { (column: String) in db.backend == .sqlite ? column : "CASE WHEN \(column) THEN 1 ELSE 0 END" }
        return try await db.strings(
            "SELECT 'user ' || id || ' ' || timezone || ' ' || locale || ' ' || plan FROM users ORDER BY id")
            + db.strings(
                """
                SELECT 'settings ' || user_id || ' ' || timezone || ' ' || \(flag("diary_reminder_enabled")) || ' ' ||
                       reminder_time || ' ' || \(flag("content_limit_warnings_enabled")) || ' ' ||
                       coalesce(quiet_hours_start, '-') || ' ' || coalesce(quiet_hours_end, '-')
                FROM notification_settings ORDER BY user_id
                """)
            + db.strings(
                """
                SELECT 'device ' || user_id || ' ' || token || ' ' || provider || ' ' || platform || ' ' ||
                       coalesce(apns_environment, '-') || ' ' || token_kind || ' ' || \(active) || ' ' ||
                       coalesce(deactivation_reason, '-') || ' ' || coalesce(app_version, '-')
                FROM user_devices ORDER BY token
                """)
            + db.strings(
                "SELECT 'entry ' || user_id || ' ' || \(db.epoch("created_at")) FROM diary_entries ORDER BY user_id")
    }

    @Test(arguments: Backend.allCases)
    func everyDocumentedStatementDoesWhatPushctlDoes(_ backend: Backend) async throws {
        let statements = try Self.statements()
        for dialect in ["sqlite", "postgres"] {
            let stated = Set((statements[dialect] ?? [:]).keys)
            let missing = Set(Self.operations).subtracting(stated)
            #expect(missing.isEmpty, "docs/SCHEMA.md lacks \(dialect) statements for \(missing.sorted())")
        }
        let written = try await TemporaryDatabase(backend)
        try await Self.writeWithTheContract(written)
        let reference = try await TemporaryDatabase(backend)
        try await Self.writeWithPushctl(reference)
        let effects = try await Self.effects(written)
        #expect(effects == (try await Self.effects(reference)))
        // What they both did, spelled out.
        #expect(effects.contains("settings alice America/New_York 1 21:00 1 - -"), "\(effects)")
        #expect(effects.contains("device alice bob-phone:APA91b fcm android - token 1 - 1.2"), "\(effects)")
        #expect(!effects.contains { $0.contains("carol") }, "\(effects)")
        #expect(effects.contains("device dave dave-old:APA91b fcm android - token 0 replaced 1.2"), "\(effects)")
        // And a reminder run reads them: alice (New York, 21:00) wrote today, bob is due at 20:00 Tokyo.
        let summary = try await DiaryReminderRunner(
            store: written.store, sender: RecordingSender(), logger: quietLogger
        )
        .run(ReminderRunOptions(now: instant("2026-11-21T11:00:00Z"), dryRun: true))
        #expect(summary.due == 0 && summary.candidates == 1, "\(summary.text)")  // bob's phone moved to alice
    }

    /// `Examples/sql-backend/walkthrough.py`: a Python backend (standard library only) that writes with the
    /// document's statements, then a reminder run at a fixed `--now` that reminds exactly the expected users.
    @Test(arguments: Backend.allCases)
    func thePythonWalkthroughRemindsExactlyTheExpectedUsers(_ backend: Backend) async throws {
        let db = try await TemporaryDatabase(backend)
        let script = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
            .deletingLastPathComponent().appendingPathComponent("Examples/sql-backend/walkthrough.py")
        let run = await Executables.finish(
            try Executables.start(
                executable: URL(fileURLWithPath: "/usr/bin/env"),
                ["python3", script.path, "--database", db.path, "--bin", Executables.directory.path]))
        #expect(run.status == 0, "\(run.stdout)\(run.stderr)")
        #expect(run.stdout.contains("5 reminded as expected, 0 failed checks"), "\(run.stdout)\(run.stderr)")
    }

    // MARK: The seven cases of the review, each refused or made safe

    /// User `id` in UTC, reminded at `time` (or not), through the document's statements.
    static func signUp(_ id: String, time: String = "20:00", reminders: Bool = true, on connection: BackendConnection)
        async throws
    {
        try await connection.run(
            "upsert-user", ["id": id, "timezone": "UTC", "locale": "en", "plan": "free", "now": now])
        try await connection.run(
            "upsert-settings",
            [
                "user_id": id, "diary_reminder_enabled": reminders, "reminder_time": time,
                "content_limit_warnings_enabled": true, "quiet_hours_start": nil, "quiet_hours_end": nil,
                "now": now,
            ])
    }

    /// 1. SQLite's foreign keys are off on a connection that does not turn them on: the user's rows went with
    /// nothing, a re-sign-up failed on the old settings row, and a device of nobody was accepted.
    @Test(arguments: Backend.allCases)
    func aUsersRowsGoWithThemEvenWithForeignKeysOff(_ backend: Backend) async throws {
        let db = try await TemporaryDatabase(backend)
        let plain = try BackendConnection(db, configured: false)
        try await Self.signUp("u", on: plain)
        try await plain.execute(
            "INSERT INTO user_devices (user_id, token, provider, platform, last_seen, created_at, updated_at) VALUES ('u', 'phone', 'fcm', 'android', \(db.ts(Self.now)), \(db.ts(Self.now)), \(db.ts(Self.now)))",
            [:])
        try await plain.run("entry", ["user_id": "u", "created_at": Self.now])
        try await plain.run("delete-user", ["id": "u"])
        for table in ["notification_settings", "user_devices", "diary_entries"] {
            #expect(try await db.count("SELECT count(*) FROM \(table)") == 0, "\(table) kept the deleted user's rows")
        }
        // The same id signs up again, with nothing of the old account.
        try await Self.signUp("u", time: "08:00", reminders: false, on: plain)
        #expect(try await db.count("SELECT count(*) FROM user_devices") == 0)
        // A device, settings or entry of nobody is refused, saying so.
        for (sql, table) in [
            (
                "INSERT INTO user_devices (user_id, token, provider, platform, last_seen, created_at, updated_at) VALUES ('ghost', 'x', 'fcm', 'android', \(db.ts(Self.now)), \(db.ts(Self.now)), \(db.ts(Self.now)))",
                "user_devices"
            ),
            (
                "INSERT INTO notification_settings (user_id, reminder_time) VALUES ('ghost', '20:00')",
                "notification_settings"
            ),
            ("INSERT INTO diary_entries (user_id, created_at) VALUES ('ghost', \(db.ts(Self.now)))", "diary_entries"),
        ] {
            do {
                try await plain.execute(sql, [:])
                Issue.record("\(table): a row of a user who does not exist was accepted")
            } catch {
                if backend == .sqlite { #expect("\(error)".contains("\(table).user_id: no such user"), "\(error)") }
            }
        }
    }

    /// 2. `INSERT OR REPLACE INTO users` (SQLite, foreign keys off) left the settings' zone copy stale: the run
    /// and `--explain` disagreed about the user's hour.
    @Test func theZoneCopyHoldsHoweverTheUserRowIsWritten() async throws {
        let db = try await TemporaryDatabase(.sqlite)
        let plain = try BackendConnection(db, configured: false)
        try await Self.signUp("u", on: plain)
        try await plain.execute(
            "INSERT OR REPLACE INTO users (id, timezone, locale, plan, created_at, updated_at) VALUES ('u', 'Asia/Tokyo', 'en', 'free', :now, :now)",
            ["now": Self.now])
        #expect(try await db.strings("SELECT timezone FROM notification_settings") == ["Asia/Tokyo"])
        try await plain.run(
            "upsert-user", ["id": "u", "timezone": "Europe/Paris", "locale": "en", "plan": "free", "now": Self.now])
        #expect(try await db.strings("SELECT timezone FROM notification_settings") == ["Europe/Paris"])
    }

    /// 4. Milliseconds (JavaScript's `Date.now()`) passed as seconds: an entry written today counted as none.
    /// A float (Python's `time.time()`) failed with a CHECK message the document never mentioned.
    @Test(arguments: Backend.allCases)
    func millisecondsAndFractionsAreRefusedSayingSo(_ backend: Backend) async throws {
        let db = try await TemporaryDatabase(backend)
        let connection = try BackendConnection(db)
        try await connection.run(
            "upsert-user", ["id": "u", "timezone": "UTC", "locale": "en", "plan": "free", "now": Self.now])
        var attempts: [(String, [String: (any Sendable)?])] = [
            ("entry", ["user_id": "u", "created_at": Self.now * 1000]),
            (
                "register-device",
                [
                    "user_id": "u", "token": "phone", "provider": "fcm", "platform": "android",
                    "apns_environment": nil, "token_kind": "token", "app_version": nil, "now": Self.now * 1000,
                ]
            ),
        ]
        if backend == .sqlite { attempts.append(("entry", ["user_id": "u", "created_at": Double(Self.now) + 0.25])) }
        for (operation, values) in attempts {
            do {
                try await connection.run(operation, values)
                Issue.record("\(operation) \(values): accepted")
            } catch {
                let text = backend == .sqlite ? "\(error)" : String(reflecting: error)
                #expect(text.contains("seconds, not milliseconds"), "\(operation): \(text)")
            }
        }
        #expect(try await db.count("SELECT count(*) FROM diary_entries") == 0)
        #expect(try await db.count("SELECT count(*) FROM user_devices") == 0)
        try await connection.run("entry", ["user_id": "u", "created_at": Self.now])
        #expect(try await db.count("SELECT count(*) FROM diary_entries") == 1)
    }

    /// 5. A late logout by a user whose token had moved to another user deactivated the new owner's device.
    @Test(arguments: Backend.allCases)
    func aLogoutDeactivatesOnlyItsOwnUsersDevice(_ backend: Backend) async throws {
        let db = try await TemporaryDatabase(backend)
        try await db.store.addUser("old", tokens: [])
        try await db.store.addUser("new", tokens: [])
        let token = "shared-phone:APA91b"
        for user in ["old", "new"] {
            _ = try await db.store.register(
                DeviceRegistration(userID: user, token: token, provider: .fcm, platform: .android), now: Self.now)
        }
        #expect(try await db.store.unregister(token: token, userID: "old", reason: "logout", now: Self.now) == false)
        #expect(
            try await db.strings(
                "SELECT user_id FROM user_devices WHERE \(db.backend == .sqlite ? "is_active = 1" : "is_active")") == [
                    "new"
                ])
        #expect(try await db.store.unregister(token: token, userID: "new", reason: "logout", now: Self.now))
        let logout = try await Executables.run(
            "pushctl", ["device", "unregister", "--token", token, "--user", "old", "--database", db.path])
        #expect(logout.status == 0 && logout.stdout.contains("no active device with that token of that user"))
    }

    /// 7. Nothing said to set `busy_timeout`: a connection waiting 0 ms (the sqlite3 shell's default) failed with
    /// `database is locked` while a run wrote. With the documented settings it waits for the write.
    @Test func theDocumentedSettingsWaitForARunsWrite() async throws {
        let db = try await TemporaryDatabase(.sqlite)
        try await db.store.addUser("u", tokens: [])
        // A run's write transaction, held until released (returns once it holds the lock).
        let lock = try await SQLiteWriteLock(path: db.path)
        let unconfigured = try BackendConnection(db, configured: false)
        await #expect(throws: (any Error).self) {
            try await unconfigured.run("entry", ["user_id": "u", "created_at": Self.now])
        }
        let configured = try BackendConnection(db)
        let waiting = Task { try await configured.run("entry", ["user_id": "u", "created_at": Self.now]) }
        try await Task.sleep(for: .milliseconds(200))
        await lock.release()
        try await waiting.value  // it waited for the lock (up to busy_timeout, 5 s) instead of failing
        #expect(try await db.count("SELECT count(*) FROM diary_entries") == 1)
    }

    /// What the schema cannot refuse (rows written before migration 014) is counted by the report and named by
    /// `--explain`.
    @Test(arguments: Backend.allCases)
    func orphanedRowsAreCountedAndNamed(_ backend: Backend) async throws {
        let db = try await TemporaryDatabase(backend)
        try await db.store.addUser("gone", tokens: [])
        _ = try await db.store.register(
            DeviceRegistration(userID: "gone", token: "gone-phone", provider: .fcm, platform: .android), now: Self.now)
        // As a connection with foreign keys off wrote it before the guards.
        if backend == .sqlite {
            try await db.execute("DROP TRIGGER users_delete_their_rows")
            try await db.sqlite.pool.writeWithoutTransaction { db in
                try db.execute(sql: "PRAGMA foreign_keys = OFF")
                try db.execute(sql: "DELETE FROM users WHERE id = 'gone'")
                try db.execute(sql: "PRAGMA foreign_keys = ON")
            }
        } else {
            try await db.execute("ALTER TABLE notification_settings DROP CONSTRAINT notification_settings_user_id_fkey")
            try await db.execute("ALTER TABLE user_devices DROP CONSTRAINT user_devices_user_id_fkey")
            try await db.execute("DELETE FROM users WHERE id = 'gone'")
        }
        #expect(try await db.store.orphanedRows(userID: nil) == OrphanedRows(settings: 1, activeDevices: 1))
        let end = Self.now + 86_400
        let report = try await db.store.healthReport(from: Self.now, to: end)
        #expect(report.orphans == OrphanedRows(settings: 1, activeDevices: 1))
        #expect(report.text.contains("1 notification_settings row and 1 active device"), "\(report.text)")
        let runner = DiaryReminderRunner(store: db.store, sender: RecordingSender(), logger: quietLogger)
        let failure = await #expect(throws: JobError.self) {
            _ = try await runner.explain(userID: "gone", options: ReminderRunOptions(now: end))
        }
        #expect(failure?.exitCode == 65)
        #expect(
            failure?.message.contains("1 notification_settings row and 1 active device") == true,
            "\(failure?.message ?? "")")
    }
}

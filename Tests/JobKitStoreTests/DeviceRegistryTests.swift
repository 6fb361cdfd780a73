import Foundation
import GRDB
import JobKitTestSupport
import JobKitWiring
import NIOConcurrencyHelpers
import NIOCore
import NIOPosix
import PostgresNIO
import PushSimulator
import Testing

@testable import JobKit
@testable import JobKitPostgres
@testable import JobKitSQLite

@Suite struct DeviceRegistryTests {
    @Test(arguments: Backend.allCases) func registrationIsAnIdempotentUpsert(_ backend: Backend) async throws {
        let db = try await TemporaryDatabase(backend)
        try await db.store.addUser("alice", tokens: [])
        let registration = try DeviceRegistration(userID: "alice", token: "AB12cd", provider: .apns, platform: .ios)
        let first = try await db.store.register(registration, now: 100)
        let again = try await db.store.register(registration, now: 200)
        #expect(first.change == .created)
        #expect(again.change == .refreshed)
        #expect(again.deviceID == first.deviceID)
        #expect(try await db.count("SELECT count(*) FROM user_devices") == 1)
        #expect(try await db.count("SELECT \(db.epoch("last_seen")) FROM user_devices") == 200)
        // APNs tokens are stored lower-case, with the production environment by default.
        #expect(
            try await db.strings("SELECT token || ' ' || apns_environment FROM user_devices") == ["ab12cd production"])
    }

    @Test(arguments: Backend.allCases) func aTokenBelongsToOneUserAtATime(_ backend: Backend) async throws {
        let db = try await TemporaryDatabase(backend)
        try await db.store.addUser("alice", tokens: ["shared-phone"])
        try await db.store.addUser("bob", tokens: [])
        let moved = try await db.store.register(
            DeviceRegistration(userID: "bob", token: "shared-phone", provider: .fcm, platform: .android), now: 50)
        #expect(moved.change == .movedFromAnotherUser)
        #expect(try await db.count("SELECT count(*) FROM user_devices WHERE user_id = 'alice'") == 0)
        #expect(try await db.count("SELECT count(*) FROM user_devices WHERE user_id = 'bob' AND is_active") == 1)
        // Alice's reminders no longer reach that phone.
        let devices = try await db.store.activeDevices(userIDs: ["alice", "bob"])
        #expect(devices["alice"] == nil)
        #expect(devices["bob"]?.map(\.token) == ["shared-phone"])
    }

    @Test(arguments: Backend.allCases) func logoutDeactivatesAndReRegistrationReactivates(_ backend: Backend)
        async throws
    {
        let db = try await TemporaryDatabase(backend)
        try await db.store.addUser("alice", tokens: ["phone"])
        #expect(try await db.store.unregister(token: "phone", reason: "logout", now: 10))
        #expect(try await db.store.unregister(token: "phone", reason: "logout", now: 11) == false)
        #expect(
            try await db.count(
                "SELECT count(*) FROM user_devices WHERE NOT is_active AND deactivation_reason = 'logout' AND \(db.epoch("deactivated_at")) = 10"
            ) == 1)
        #expect(try await db.store.activeDevices(userIDs: ["alice"]).isEmpty)
        let back = try await db.store.register(
            DeviceRegistration(userID: "alice", token: "phone", provider: .fcm, platform: .android), now: 20)
        #expect(back.change == .reactivated)
        #expect(
            try await db.count(
                "SELECT count(*) FROM user_devices WHERE is_active AND deactivated_at IS NULL AND deactivation_reason IS NULL"
            ) == 1)
    }

    @Test(arguments: Backend.allCases) func concurrentRegistrationsOfOneTokenLeaveOneRow(_ backend: Backend)
        async throws
    {
        let db = try await TemporaryDatabase(backend)
        for user in ["u1", "u2", "u3", "u4"] { try await db.store.addUser(user, tokens: []) }
        try await withThrowingTaskGroup(of: Void.self) { group in
            for i in 0..<40 {
                group.addTask {
                    _ = try await db.store.register(
                        DeviceRegistration(
                            userID: "u\(i % 4 + 1)", token: "race-token", provider: .fcm, platform: .ios),
                        now: Int64(i))
                }
            }
            try await group.waitForAll()
        }
        #expect(try await db.count("SELECT count(*) FROM user_devices WHERE token = 'race-token' AND is_active") == 1)
    }

    @Test(arguments: Backend.allCases) func badRegistrationsAreRejectedAndWriteNothing(_ backend: Backend) async throws
    {
        let db = try await TemporaryDatabase(backend)
        #expect(throws: JobError.self) {
            try DeviceRegistration(userID: "a", token: "xyz", provider: .apns, platform: .ios)
        }
        #expect(throws: JobError.self) {
            try DeviceRegistration(userID: "a", token: "abc", provider: .apns, platform: .android)
        }
        #expect(throws: JobError.self) {
            try DeviceRegistration(userID: "a", token: " ", provider: .fcm, platform: .ios)
        }
        // A user id no user can have says so (a 129-character one was looked up and reported as unknown).
        for (id, count) in [("", 0), (String(repeating: "u", count: 129), 129)] {
            #expect(
                throws: JobError.dataError(
                    "device registration: a user id is 1 to 128 characters, got \(count)")
            ) {
                try DeviceRegistration(userID: id, token: "t", provider: .fcm, platform: .android)
            }
        }
        let unknown = try DeviceRegistration(userID: "ghost", token: "t", provider: .fcm, platform: .android)
        await #expect(throws: JobError.dataError("unknown user ghost")) { try await db.store.register(unknown, now: 1) }
        #expect(try await db.count("SELECT count(*) FROM user_devices") == 0)
    }

    /// A diary entry of an unknown user is refused as one, on both stores. Before, `pushctl entry add --user ghost`
    /// said "recording a diary entry: FOREIGN KEY constraint failed" (SQLite) or the server's violation (PostgreSQL).
    @Test(arguments: Backend.allCases) func anEntryOfAnUnknownUserIsRefusedAsOne(_ backend: Backend) async throws {
        let db = try await TemporaryDatabase(backend)
        await #expect(throws: JobError.dataError("unknown user ghost")) {
            try await db.store.recordEntry(userID: "ghost", at: instant("2026-11-21T10:00:00Z"))
        }
        try await db.store.addUser("alice")
        try await db.store.recordEntry(userID: "alice", at: instant("2026-11-21T10:00:00Z"))
        #expect(try await db.count("SELECT count(*) FROM diary_entries") == 1)
    }

    @Test(arguments: Backend.allCases) func theSchemaRejectsWhatTheRulesCannotUse(_ backend: Backend) async throws {
        let db = try await TemporaryDatabase(backend)
        try await db.store.addUser("alice")
        let zero = db.ts(0)
        for statement in [
            "INSERT INTO user_devices (user_id, token, provider, platform, last_seen, created_at, updated_at) VALUES ('alice', 't2', 'webpush', 'ios', \(zero), \(zero), \(zero))",
            "INSERT INTO notification_logs (user_id, notification_type, period_key, status, run_id, claimed_at, updated_at) VALUES ('alice', 'diary_reminder', '2026-11-21', 'maybe', 'r', \(zero), \(zero))",
            "INSERT INTO diary_entries (user_id, created_at) VALUES ('nobody', \(db.ts(5)))",
            "INSERT INTO notification_settings (user_id, reminder_time) VALUES ('nobody', '20:00')",
            // SQLite stores whatever type it is given: a CHECK keeps text out of the instants. PostgreSQL's
            // timestamptz would parse this text, so the case is SQLite's only.
        ]
            + (backend == .sqlite
                ? ["INSERT INTO diary_entries (user_id, created_at) VALUES ('alice', '2026-11-21 10:00:00')"] : [])
        {
            await #expect(throws: (any Error).self, "\(statement)") { try await db.execute(statement) }
        }
        #expect(try await db.count("SELECT count(*) FROM user_devices WHERE token = 't2'") == 0)
    }

    @Test(arguments: Backend.allCases) func theZoneCopyFollowsTheUserRow(_ backend: Backend) async throws {
        let db = try await TemporaryDatabase(backend)
        try await db.store.addUser("alice", zone: "Asia/Tokyo")
        #expect(try await db.store.reminderZones() == ["Asia/Tokyo"])
        try await db.execute("UPDATE users SET timezone = 'Europe/Paris' WHERE id = 'alice'")
        #expect(try await db.store.reminderZones() == ["Europe/Paris"])
        // A direct write to the copy is put back.
        try await db.execute("UPDATE notification_settings SET timezone = 'UTC'")
        #expect(try await db.store.reminderZones() == ["Europe/Paris"])
    }

    @Test func theDueSelectionIsIndexDrivenOnSQLite() async throws {
        let db = try await TemporaryDatabase(.sqlite)
        let keysPlan = try await db.sqlite.pool.read { db in
            try Row.fetchAll(db, sql: "EXPLAIN QUERY PLAN " + SQLiteStore.dueKeysSQL, arguments: ["UTC", 10, 20])
                .map { $0["detail"] as String }
        }
        #expect(
            keysPlan.count == 1 && keysPlan[0].hasPrefix("SEARCH notification_settings USING")
                && keysPlan[0].hasSuffix(
                    "COVERING INDEX notification_settings_due (timezone=? AND due_minute>? AND due_minute<?)"),
            "\(keysPlan)")
        // A page's candidates: the keys drive, and every table is probed by user id.
        let plan = try await db.sqlite.pool.read { db in
            try Row.fetchAll(
                db, sql: "EXPLAIN QUERY PLAN " + SQLiteStore.dueCandidatesSQL(rows: 2),
                arguments: StatementArguments(
                    [
                        0, "a", "UTC", 10, 20, 0, 86_400, "1970-01-01", "diary_reminder", "1969-12-25", "1969-12-18",
                        0, "b", "UTC", 10, 20, 0, 86_400, "1970-01-01", "diary_reminder", "1969-12-25", "1969-12-18",
                    ] as [any DatabaseValueConvertible])
            )
            .map { $0["detail"] as String }
        }
        #expect(plan.contains { $0.hasPrefix("SEARCH s USING PRIMARY KEY (user_id=?)") }, "\(plan)")
        #expect(plan.contains { $0.hasPrefix("SEARCH u USING PRIMARY KEY (id=?)") }, "\(plan)")
        // The pause rule's history: the pause by user, the latest entry and the reminders by index.
        #expect(plan.contains { $0.hasPrefix("SEARCH r USING PRIMARY KEY (user_id=?)") }, "\(plan)")
        #expect(plan.contains { $0.hasPrefix("SEARCH h USING INDEX") }, "\(plan)")
        #expect(
            !plan.contains { $0.hasPrefix("SCAN") && !$0.hasPrefix("SCAN p") && !$0.contains("CONSTANT ROW") },
            "\(plan)")
        #expect(!plan.contains { $0.contains("TEMP B-TREE") }, "\(plan)")
        // The count of malformed reminder times seeks per zone too: no scan of every enabled user.
        let countPlan = try await db.sqlite.pool.read { db in
            try Row.fetchAll(db, sql: "EXPLAIN QUERY PLAN " + SQLiteStore.malformedCountSQL).map {
                $0["detail"] as String
            }
        }
        #expect(
            !countPlan.contains { $0.hasPrefix("SCAN notification_settings") || $0.hasPrefix("SCAN s") }, "\(countPlan)"
        )
        #expect(countPlan.contains { $0.contains("due_minute=?") }, "\(countPlan)")
    }

    @Test func theDueMinuteCopyFollowsTheReminderTime() async throws {
        let db = try await TemporaryDatabase(.sqlite)
        func dueMinute() async throws -> Int? {
            try await db.sqlite.pool.read {
                try Int.fetchOne($0, sql: "SELECT due_minute FROM notification_settings WHERE user_id = 'alice'")
            }
        }
        try await db.store.addUser("alice", zone: "Asia/Tokyo", time: "07:30")
        #expect(try await dueMinute() == 450)
        // Through the backend's upsert, a plain update, a malformed time, and a direct write to the copy.
        try await db.store.upsertUser(UserProfile(id: "alice", timezone: "Asia/Tokyo", reminderTime: "21:15"), now: 0)
        #expect(try await dueMinute() == 1_275)
        try await db.execute("UPDATE notification_settings SET reminder_time = '00:05' WHERE user_id = 'alice'")
        #expect(try await dueMinute() == 5)
        try await db.execute("UPDATE notification_settings SET reminder_time = '25:00' WHERE user_id = 'alice'")
        #expect(try await dueMinute() == nil)
        try await db.execute("UPDATE notification_settings SET reminder_time = '08:00' WHERE user_id = 'alice'")
        try await db.execute("UPDATE notification_settings SET due_minute = 1 WHERE user_id = 'alice'")
        #expect(try await dueMinute() == 480)
        try await db.execute("INSERT INTO users (id, timezone) VALUES ('bob', 'UTC')")
        try await db.execute(
            "INSERT INTO notification_settings (user_id, reminder_time, due_minute) VALUES ('bob', '09:45', 3)")
        #expect(try await db.count("SELECT due_minute FROM notification_settings WHERE user_id = 'bob'") == 585)
        #expect(try await db.count("SELECT count(*) FROM notification_settings WHERE timezone = 'UTC'") == 1)
    }

    @Test func migratingFillsTheDueMinuteOfExistingRows() async throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("jobkit-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: directory) }
        let path = directory.appendingPathComponent("push.sqlite").path
        let queue = try DatabaseQueue(path: path)
        try SQLiteSchema.migrator.migrate(queue, upTo: "005_drop_unused_status_index")
        try await queue.write { db in
            try db.execute(
                sql: """
                    INSERT INTO users (id, timezone) VALUES ('a', 'UTC'), ('b', 'Asia/Tokyo'), ('c', 'UTC');
                    INSERT INTO notification_settings (user_id, reminder_time) VALUES ('a', '20:00'), ('b', '06:15'), ('c', 'soon');
                    """)
        }
        try queue.close()
        let store = try SQLiteStore.open(path: path, mode: .readWrite)
        let minutes = try await store.pool.read { db in
            try Row.fetchAll(db, sql: "SELECT user_id, due_minute FROM notification_settings ORDER BY user_id")
                .map { "\($0[0] as String)=\(($0[1] as Int?).map(String.init) ?? "null")" }
        }
        #expect(minutes == ["a=1200", "b=375", "c=null"])
        let keys = try await store.dueKeys([
            DueQuery(
                zone: "Asia/Tokyo", period: "2026-11-21", minutes: 375...375,
                day: 0..<86_400, type: .diaryReminder)
        ])
        #expect(keys.map(\.userID) == ["b"])
        #expect(try await store.malformedReminderTimeCount() == 1)
        await store.close()
    }
}

@Suite struct SeederTests {
    /// A prefix that makes an id longer than the schema's 128 characters crashed the seeder at its first device
    /// ("generated an invalid device"); it is a usage error before anything is written. 121 characters and 7 digits
    /// fit; 10,000,000 users need 8 digits.
    @Test func idsTheSchemaCannotHoldAreRefusedBeforeAnyWrite() async throws {
        let db = try await TemporaryDatabase(.sqlite)
        for (prefix, users) in [
            (String(repeating: "x", count: 122), 3), (String(repeating: "x", count: 121), 10_000_000),
        ] {
            var options = SeedOptions(users: users, now: 0)
            options.idPrefix = prefix
            let error = await #expect(throws: JobError.self) { try await Seeder().seed(options, into: db.store) }
            #expect(error?.exitCode == 64, "\(String(describing: error))")
            #expect(Seeder.idProblem(prefix: prefix, users: users)?.contains("got 129") == true)
        }
        #expect(try await db.count("SELECT count(*) FROM users") == 0)
        var options = SeedOptions(users: 3, now: instant("2026-11-21T20:00:00Z"))
        options.idPrefix = String(repeating: "x", count: 121)
        #expect(try await Seeder().seed(options, into: db.store).users == 3)
        #expect(try await db.count("SELECT max(length(id)) FROM users") == 128)
    }
}

@Suite struct DeliveryHistoryReferenceTests {
    /// Deleting a log row deletes its delivery rows, deleting a device leaves its delivery rows without a device,
    /// and deleting a user deletes all of theirs: foreign keys on SQLite, statement triggers on PostgreSQL.
    @Test(arguments: Backend.allCases) func deletionsReachTheDeliveryRows(_ backend: Backend) async throws {
        let db = try await TemporaryDatabase(backend)
        for user in ["ann", "bob"] { try await db.store.upsertUser(UserProfile(id: user, timezone: "UTC"), now: 0) }
        for (user, token) in [("ann", "aa"), ("ann", "bb"), ("bob", "cc")] {
            _ = try await db.store.register(
                DeviceRegistration(userID: user, token: token, provider: .apns, platform: .ios), now: 0)
        }
        let now: Int64 = 1_000
        for (user, period) in [("ann", "2026-11-01"), ("ann", "2026-11-02"), ("bob", "2026-11-01")] {
            _ = try await db.store.claim(
                [ClaimRequest(userID: user, type: .diaryReminder, period: period, messageIndex: 0, locale: "en")],
                runID: "run", now: now, staleBefore: 0)
        }
        try await db.execute(
            """
            INSERT INTO notification_deliveries (log_id, device_id, provider, outcome, run_id, created_at)
            SELECT l.id, d.id, 'apns', 'delivered', 'run', \(backend == .sqlite ? "1000" : "to_timestamp(1000)")
            FROM notification_logs l JOIN user_devices d ON d.user_id = l.user_id
            """)
        #expect(try await db.count("SELECT count(*) FROM notification_deliveries") == 5)
        try await db.execute("DELETE FROM notification_logs WHERE user_id = 'ann' AND period_key = '2026-11-01'")
        #expect(try await db.count("SELECT count(*) FROM notification_deliveries") == 3)
        try await db.execute("DELETE FROM user_devices WHERE token = 'aa'")
        #expect(try await db.count("SELECT count(*) FROM notification_deliveries") == 3)
        #expect(try await db.count("SELECT count(*) FROM notification_deliveries WHERE device_id IS NULL") == 1)
        try await db.execute("DELETE FROM users WHERE id = 'ann'")
        #expect(try await db.count("SELECT count(*) FROM notification_deliveries") == 1)
        #expect(try await db.count("SELECT count(*) FROM notification_logs") == 1)
    }

    /// A user or a device deleted while a run sends (an account closed, a device row removed by the app's
    /// backend) fails nothing for the others. On SQLite, whose foreign keys check every row, a page's answers
    /// to a deleted claim go with it, those to a deleted device are kept without it (as the delete would have
    /// left them, had it come after). It was "FOREIGN KEY constraint failed" for the page: the run failed, and
    /// the page's other claims, sent but not recorded, were sent again by the run that took them over. On
    /// PostgreSQL the references are kept by delete triggers, with no check of each answer written
    /// (BENCHMARKS.md): such answers are written as they are. On both, a deleted user is not claimed.
    @Test(arguments: Backend.allCases) func whatWasDeletedMeanwhileFailsNothingForTheOthers(_ backend: Backend)
        async throws
    {
        let db = try await TemporaryDatabase(backend)
        // 250 users: the pages' statements run in chunks of 100 rows; the deleted ones are in the second.
        let users = (0..<250).map { String(format: "u%03d", $0) }
        for user in users + ["late"] { try await db.store.addUser(user, tokens: ["t-\(user)"]) }
        let claims = try await db.store.claim(
            users.map {
                ClaimRequest(userID: $0, type: .diaryReminder, period: "2026-11-26", messageIndex: 0, locale: "en")
            },
            runID: "run", now: 1_000, staleBefore: 0)
        #expect(claims.count == 250)
        let devices = try await db.store.activeDevices(userIDs: users)
        try await db.execute("DELETE FROM users WHERE id IN ('u120', 'late')")
        try await db.execute("DELETE FROM user_devices WHERE token = 't-u130'")

        let deliveries = claims.map { claim in
            DeliveryRecord(
                logID: claim.logID, deviceID: devices[claim.userID]![0].id,
                report: DeliveryReport(channel: .fcm, outcome: .delivered))
        }
        try await db.store.record(
            deliveries,
            resolutions: claims.map { ClaimResolution(logID: $0.logID, period: $0.period, status: .sent, detail: nil) },
            runID: "run", now: 1_001)
        #expect(try await db.count("SELECT count(*) FROM notification_logs WHERE status = 'sent'") == 249)
        #expect(try await db.count("SELECT count(*) FROM notification_logs WHERE status = 'claimed'") == 0)
        #expect(
            try await db.count("SELECT count(*) FROM notification_deliveries")
                == (backend == .sqlite ? 249 : 250))
        #expect(
            try await db.count("SELECT count(DISTINCT log_id) FROM notification_deliveries WHERE device_id IS NULL")
                == (backend == .sqlite ? 1 : 0))

        // A page's claims that name a deleted user: the others are claimed.
        let later = try await db.store.claim(
            ["u001", "late", "u002"].map {
                ClaimRequest(userID: $0, type: .diaryReminder, period: "2026-11-27", messageIndex: 0, locale: "en")
            }, runID: "run-2", now: 2_000, staleBefore: 0)
        #expect(later.map(\.userID) == ["u001", "u002"])
    }
}

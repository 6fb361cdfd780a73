import GRDB
import Testing
@testable import JobKit

@Suite struct DeviceRegistryTests {
    @Test func registrationIsAnIdempotentUpsert() async throws {
        let db = try TemporaryDatabase()
        try await db.store.addUser("alice", tokens: [])
        let registration = try DeviceRegistration(userID: "alice", token: "AB12cd", provider: .apns, platform: "ios")
        let first = try await db.store.register(registration, now: 100)
        let again = try await db.store.register(registration, now: 200)
        #expect(first.change == .created)
        #expect(again.change == .refreshed)
        #expect(again.deviceID == first.deviceID)
        #expect(try db.count("SELECT count(*) FROM user_devices") == 1)
        #expect(try db.count("SELECT last_seen FROM user_devices") == 200)
        // APNs tokens are stored lower-case, with the production environment by default.
        #expect(try db.strings("SELECT token || ' ' || apns_environment FROM user_devices") == ["ab12cd production"])
    }

    @Test func aTokenBelongsToOneUserAtATime() async throws {
        let db = try TemporaryDatabase()
        try await db.store.addUser("alice", tokens: ["shared-phone"])
        try await db.store.addUser("bob", tokens: [])
        let moved = try await db.store.register(
            DeviceRegistration(userID: "bob", token: "shared-phone", provider: .fcm, platform: "android"), now: 50)
        #expect(moved.change == .movedFromAnotherUser)
        #expect(try db.count("SELECT count(*) FROM user_devices WHERE user_id = 'alice'") == 0)
        #expect(try db.count("SELECT count(*) FROM user_devices WHERE user_id = 'bob' AND is_active = 1") == 1)
        // Alice's reminders no longer reach that phone.
        let devices = try await db.store.activeDevices(userIDs: ["alice", "bob"])
        #expect(devices["alice"] == nil)
        #expect(devices["bob"]?.map(\.token) == ["shared-phone"])
    }

    @Test func logoutDeactivatesAndReRegistrationReactivates() async throws {
        let db = try TemporaryDatabase()
        try await db.store.addUser("alice", tokens: ["phone"])
        #expect(try await db.store.unregister(token: "phone", reason: "logout", now: 10))
        #expect(try await db.store.unregister(token: "phone", reason: "logout", now: 11) == false)
        #expect(try db.count("SELECT count(*) FROM user_devices WHERE is_active = 0 AND deactivation_reason = 'logout' AND deactivated_at = 10") == 1)
        #expect(try await db.store.activeDevices(userIDs: ["alice"]).isEmpty)
        let back = try await db.store.register(
            DeviceRegistration(userID: "alice", token: "phone", provider: .fcm, platform: "android"), now: 20)
        #expect(back.change == .reactivated)
        #expect(try db.count("SELECT count(*) FROM user_devices WHERE is_active = 1 AND deactivated_at IS NULL AND deactivation_reason IS NULL") == 1)
    }

    @Test func concurrentRegistrationsOfOneTokenLeaveOneRow() async throws {
        let db = try TemporaryDatabase()
        for user in ["u1", "u2", "u3", "u4"] { try await db.store.addUser(user, tokens: []) }
        try await withThrowingTaskGroup(of: Void.self) { group in
            for i in 0..<40 {
                group.addTask {
                    _ = try await db.store.register(
                        DeviceRegistration(userID: "u\(i % 4 + 1)", token: "race-token", provider: .fcm, platform: "ios"),
                        now: Int64(i))
                }
            }
            try await group.waitForAll()
        }
        #expect(try db.count("SELECT count(*) FROM user_devices WHERE token = 'race-token' AND is_active = 1") == 1)
    }

    @Test func badRegistrationsAreRejectedAndWriteNothing() async throws {
        let db = try TemporaryDatabase()
        #expect(throws: JobError.self) { try DeviceRegistration(userID: "a", token: "xyz", provider: .apns, platform: "ios") }
        #expect(throws: JobError.self) { try DeviceRegistration(userID: "a", token: "abc", provider: .apns, platform: "android") }
        #expect(throws: JobError.self) { try DeviceRegistration(userID: "a", token: " ", provider: .fcm, platform: "ios") }
        #expect(throws: JobError.self) { try DeviceRegistration(userID: "a", token: "ab", provider: .apns, platform: "ios", apnsEnvironment: "staging") }
        let unknown = try DeviceRegistration(userID: "ghost", token: "t", provider: .fcm, platform: "android")
        await #expect(throws: JobError.dataError("unknown user ghost")) { try await db.store.register(unknown, now: 1) }
        #expect(try db.count("SELECT count(*) FROM user_devices") == 0)
    }

    @Test func theSchemaRejectsWhatTheRulesCannotUse() async throws {
        let db = try TemporaryDatabase()
        try await db.store.addUser("alice")
        try await db.store.pool.write { db in
            #expect(throws: DatabaseError.self) {
                try db.execute(sql: "INSERT INTO user_devices (user_id, token, provider, platform, last_seen, created_at, updated_at) VALUES ('alice', 't2', 'webpush', 'ios', 0, 0, 0)")
            }
            #expect(throws: DatabaseError.self) {
                try db.execute(sql: "INSERT INTO diary_entries (user_id, created_at) VALUES ('alice', '2026-11-21 10:00:00')")
            }
            #expect(throws: DatabaseError.self) {
                try db.execute(sql: "INSERT INTO notification_logs (user_id, notification_type, period_key, status, run_id, claimed_at, updated_at) VALUES ('alice', 'diary_reminder', '2026-11-21', 'maybe', 'r', 0, 0)")
            }
            #expect(throws: DatabaseError.self) {
                try db.execute(sql: "INSERT INTO diary_entries (user_id, created_at) VALUES ('nobody', 5)")
            }
        }
    }

    @Test func theZoneCopyFollowsTheUserRow() async throws {
        let db = try TemporaryDatabase()
        try await db.store.addUser("alice", zone: "Asia/Tokyo")
        #expect(try await db.store.reminderZones() == ["Asia/Tokyo"])
        try await db.store.pool.write { try $0.execute(sql: "UPDATE users SET timezone = 'Europe/Paris' WHERE id = 'alice'") }
        #expect(try await db.store.reminderZones() == ["Europe/Paris"])
        // A direct write to the copy is put back.
        try await db.store.pool.write { try $0.execute(sql: "UPDATE notification_settings SET timezone = 'UTC'") }
        #expect(try await db.store.reminderZones() == ["Europe/Paris"])
    }

    @Test func theDueSelectionIsIndexDriven() throws {
        let db = try TemporaryDatabase()
        let plan = try db.store.pool.read { db in
            try Row.fetchAll(db, sql: "EXPLAIN QUERY PLAN " + SQLiteStore.dueCandidatesSQL, arguments: [
                "dayStart": 0, "dayEnd": 86_400, "type": "diary_reminder", "period": "1970-01-01", "zone": "UTC",
                "low": 10, "high": 20, "afterMinute": 9, "afterUser": "", "limit": 500,
            ]).map { $0["detail"] as String }
        }
        #expect(plan.contains { $0.contains("notification_settings_due") }, "\(plan)")
        #expect(!plan.contains { $0.contains("TEMP B-TREE") }, "\(plan)")
    }
}

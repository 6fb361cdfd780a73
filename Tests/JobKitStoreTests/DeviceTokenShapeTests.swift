import Foundation
import JobKitTestSupport
import Testing

@testable import JobKit

/// Issue 21, item 3: a malformed device token is refused where it is written (registration, and the schema for
/// rows written by plain SQL) and, when one is stored anyway, never sent but deactivated and counted.
@Suite struct DeviceTokenShapeTests {
    /// The tokens the bad-input run put on the wire, by provider.
    static let malformed: [(token: String, provider: Provider)] = [
        ("ab cd ef", .fcm), ("tok\nabc", .fcm), ("ab/../..", .fcm), ("tok%2Fabc?#", .fcm), ("été-abc", .fcm),
        ("abc", .apns), (String(repeating: "z", count: 64), .apns), ("ab cd", .apns),
        ("ab\n" + String(repeating: "c", count: 62), .apns),
        (String(repeating: "ab", count: 101), .apns), (String(repeating: "a", count: 2001), .fcm), ("", .fcm),
    ]

    @Test func registrationRefusesAMalformedToken() throws {
        for (token, provider) in Self.malformed {
            #expect(throws: JobError.self, "\(provider) \(token.debugDescription) was accepted") {
                try DeviceRegistration(userID: "u", token: token, provider: provider, platform: .ios)
            }
        }
        // Upper-case hex as apps often print it is stored lower-case; the FCM alphabet is accepted as it is.
        #expect(
            try DeviceRegistration(userID: "u", token: "AB12cd", provider: .apns, platform: .ios).token == "ab12cd")
        let fcm = "cXyZ_09-ab:APA91bHk_-Qq"
        #expect(try DeviceRegistration(userID: "u", token: fcm, provider: .fcm, platform: .android).token == fcm)
    }

    /// The schema's check (migration 007) and ``DeviceToken`` are one rule: generated tokens, good and bad,
    /// are accepted by a plain SQL insert exactly when the rule accepts them, on both stores.
    @Test(arguments: Backend.allCases)
    func theSchemaAndTheRuleAgree(_ backend: Backend) async throws {
        let db = try await TemporaryDatabase(backend)
        try await db.store.upsertUser(UserProfile(id: "u", timezone: "UTC", reminderTime: "20:00"), now: 0)
        var random = SplitMix64(seed: 21)
        let alphabet = Array("0123456789abcdefABCDEF-_:./ %?#\n\té\u{0}zZ")
        var cases = Self.malformed
        cases += [
            ("ab", .apns), (String(repeating: "0f", count: 100), .apns), ("a", .fcm),
            (String(repeating: "Az09-_:", count: 285), .fcm),
        ]
        for _ in 0..<300 {
            let length = Int(random.next() % 12) + 1
            let token = String((0..<length).map { _ in alphabet[Int(random.next() % UInt64(alphabet.count))] })
            cases.append((token, random.next() % 2 == 0 ? .apns : .fcm))
        }
        var checked = Set<String>()
        for (index, (token, provider)) in cases.enumerated() where checked.insert("\(provider):\(token)").inserted {
            let literal = "'" + token.replacingOccurrences(of: "'", with: "''") + "'"
            let environment = provider == .apns ? "'production'" : "NULL"
            let platform = provider == .apns ? "ios" : "android"
            var stored = true
            do {
                try await db.execute(
                    """
                    INSERT INTO user_devices (user_id, token, provider, platform, apns_environment, last_seen, created_at, updated_at)
                    VALUES ('u', \(literal), '\(provider)', '\(platform)', \(environment), \(db.ts(0)), \(db.ts(0)), \(db.ts(0)))
                    """)
                try await db.execute("DELETE FROM user_devices")
            } catch {
                stored = false
            }
            // PostgreSQL refuses a NUL in text before any check: nothing to compare there.
            if backend == .postgres && token.contains("\u{0}") { continue }
            #expect(
                stored == (DeviceToken.problem(token, provider: provider) == nil),
                "case \(index): \(provider) \(token.debugDescription): stored=\(stored)")
        }
        // An update that changes the token is checked too.
        _ = try await db.store.register(
            DeviceRegistration(userID: "u", token: "ab12", provider: .apns, platform: .ios), now: 0)
        await #expect(throws: (any Error).self) { try await db.execute("UPDATE user_devices SET token = 'ab 12'") }
    }

    /// Rows stored before the check (or around it) are never sent: deactivated with `invalid_token`, counted,
    /// while the user's good device gets the reminder.
    @Test(arguments: Backend.allCases)
    func aMalformedStoredTokenIsNeverSentButDeactivated(_ backend: Backend) async throws {
        let harness = try await DeliveryHarness.start(backend)
        defer { Task { await harness.stop() } }
        let db = harness.db
        let good = hexToken("aa", 1)
        try await harness.addUser("u1", devices: [(good, .apns, .ios)])
        // As a database written before migration 007 would hold them.
        if backend == .sqlite {
            try await db.execute("DROP TRIGGER user_devices_token_shape_on_insert")
        } else {
            try await db.execute("ALTER TABLE user_devices DROP CONSTRAINT user_devices_token_shape")
        }
        // Those the table's own checks (non-empty, at most 2,000 characters) have always refused aside.
        let stored = Self.malformed.filter { !$0.token.isEmpty && $0.token.count <= 2000 }
        for (n, (token, provider)) in stored.enumerated() {
            let literal = "'" + token.replacingOccurrences(of: "'", with: "''") + "'"
            try await db.execute(
                """
                INSERT INTO user_devices (user_id, token, provider, platform, apns_environment, last_seen, created_at, updated_at)
                VALUES ('u1', \(literal), '\(provider)', '\(provider == .apns ? "ios" : "android")',
                        \(provider == .apns ? "'production'" : "NULL"), \(db.ts(Int64(n))), \(db.ts(0)), \(db.ts(0)))
                """)
        }
        let bad = stored.count
        let summary = try await harness.run(at: "2026-11-23T20:00:00Z", sender: try await harness.sender())
        #expect(harness.simulator.accepted().map(\.token) == [good])
        #expect(harness.simulator.stats.requests == 1, "a malformed token went on the wire")
        #expect(summary.sent == 0 && summary.partial == 1 && summary.retry == 0, "\(summary.text)")
        #expect(summary.invalidTokens == bad)
        #expect(summary.text.contains("invalid_tokens=\(bad)"))
        #expect(
            try await db.count(
                "SELECT count(*) FROM user_devices WHERE NOT \(backend == .sqlite ? "is_active = 1" : "is_active") AND deactivation_reason = 'invalid_token'"
            ) == bad)
        #expect(
            try await db.count(
                "SELECT count(*) FROM user_devices WHERE \(backend == .sqlite ? "is_active = 1" : "is_active")") == 1)
        // The next run in the window has nothing left to send.
        let again = try await harness.run(at: "2026-11-23T20:15:00Z", sender: try await harness.sender())
        #expect(again.claimed == 0 && harness.simulator.stats.requests == 1)
    }
}

import Foundation
import JobKitTestSupport
import NIOCore
import NIOHPACK
import PushSimulator
import Testing

@testable import JobKit
@testable import JobKitDelivery
@testable import JobKitSchema

/// Issue 62: Firebase Installation IDs (FIDs), the successor of FCM registration tokens, are registered as their
/// own kind, sent in `message.fid` (never in `message.token`, where FCM answers that the registration token is
/// invalid and the device would be retired while alive), retired when FCM says they are dead, and replace the
/// phone's old token on the switch day.
@Suite struct FCMInstallationIDTests {
    /// A FID of the documented shape: `c d e f`, then 21 of `A-Z a-z 0-9 - _`.
    static func fid(_ prefix: String, _ n: Int) -> String {
        let digits = String(format: "%021d", n)
        return prefix + String(digits.suffix(DeviceToken.fidLength - prefix.count))
    }

    /// A user due at 20:00 UTC whose one device is the FID `value`.
    static func addUser(_ harness: DeliveryHarness, _ user: String, fid value: String, platform: Platform = .android)
        async throws
    {
        try await harness.addUser(user, devices: [])
        _ = try await harness.db.store.register(
            DeviceRegistration(userID: user, token: value, provider: .fcm, platform: platform, kind: .fid), now: 0)
    }

    // MARK: Registration and the schema

    @Test func registrationRefusesAFIDAsATokenAndAnythingElseAsAFID() throws {
        let value = Self.fid("cA", 1)
        // A FID offered as an FCM token: refused, and the message says what to do.
        let asToken = #expect(throws: JobError.self) {
            try DeviceRegistration(userID: "u", token: value, provider: .fcm, platform: .android)
        }
        #expect(asToken?.message.contains("--fid") == true, "\(String(describing: asToken))")
        #expect(asToken?.exitCode == 65)
        // The same value as a FID is accepted, for Android and for iOS through FCM.
        for platform in Platform.allCases {
            let registration = try DeviceRegistration(
                userID: "u", token: value, provider: .fcm, platform: platform, kind: .fid)
            #expect(registration.kind == .fid && registration.token == value)
        }
        // Not of a FID's shape, or not for FCM.
        for bad in ["aA" + String(repeating: "0", count: 20), value + "x", String(value.dropLast()), "cA:" + "0"] {
            #expect(throws: JobError.self, "\(bad)") {
                try DeviceRegistration(userID: "u", token: bad, provider: .fcm, platform: .android, kind: .fid)
            }
        }
        #expect(throws: JobError.self) {
            try DeviceRegistration(userID: "u", token: value, provider: .apns, platform: .ios, kind: .fid)
        }
        // A registration token (long, with a `:`) is no FID.
        let registrationToken = "cXyZ_09-ab:APA91bHk_-Qq" + String(repeating: "x", count: 130)
        #expect(throws: JobError.self) {
            try DeviceRegistration(
                userID: "u", token: registrationToken, provider: .fcm, platform: .android, kind: .fid)
        }
        #expect(
            try DeviceRegistration(userID: "u", token: registrationToken, provider: .fcm, platform: .android).kind
                == .token)
        // A registration cannot replace itself.
        #expect(throws: JobError.self) {
            try DeviceRegistration(
                userID: "u", token: value, provider: .fcm, platform: .android, kind: .fid, replaces: value)
        }
    }

    /// The schema's check (migration 013) and ``DeviceToken`` are one rule for both kinds: generated values near
    /// a FID's shape, stored by plain SQL with each kind and provider, are accepted exactly when the rule accepts
    /// them, on both stores.
    @Test(arguments: Backend.allCases)
    func theSchemaAndTheRuleAgreeOnBothKinds(_ backend: Backend) async throws {
        let db = try await TemporaryDatabase(backend)
        try await db.store.upsertUser(UserProfile(id: "u", timezone: "UTC"), now: 0)
        var random = SplitMix64(seed: 62)
        let first = Array("abcdefgCDEF0_-:")
        let rest = Array("AZaz09-_:cdef.")
        var cases: [String] = [Self.fid("c", 0), Self.fid("f", 9), "ab12", "cXyZ_09-ab:APA91bHk_-Qq"]
        for _ in 0..<160 {
            let length = [21, 22, 22, 22, 23][Int(random.next() % 5)]
            var value = String(first[Int(random.next() % UInt64(first.count))])
            for _ in 1..<length { value.append(rest[Int(random.next() % UInt64(rest.count))]) }
            cases.append(value)
        }
        var checked = 0
        for value in Set(cases).sorted() {
            for (provider, kind) in [(Provider.fcm, TokenKind.token), (.fcm, .fid), (.apns, .token), (.apns, .fid)] {
                let platform = provider == .apns ? "ios" : "android"
                let environment = provider == .apns ? "'production'" : "NULL"
                var stored = true
                do {
                    try await db.execute(
                        """
                        INSERT INTO user_devices (user_id, token, provider, platform, apns_environment, token_kind,
                                                  last_seen, created_at, updated_at)
                        VALUES ('u', '\(value)', '\(provider)', '\(platform)', \(environment), '\(kind)',
                                \(db.ts(0)), \(db.ts(0)), \(db.ts(0)))
                        """)
                    try await db.execute("DELETE FROM user_devices")
                } catch {
                    stored = false
                }
                #expect(
                    stored == (DeviceToken.problem(value, provider: provider, kind: kind) == nil),
                    "\(provider) \(kind) \(value): stored=\(stored)")
                checked += 1
            }
        }
        #expect(checked > 500)
        // A FID stored as a token is refused on update too.
        _ = try await db.store.register(
            DeviceRegistration(userID: "u", token: Self.fid("d", 1), provider: .fcm, platform: .android, kind: .fid),
            now: 0)
        await #expect(throws: (any Error).self) { try await db.execute("UPDATE user_devices SET token_kind = 'token'") }
        #expect(try await db.strings("SELECT token_kind FROM user_devices") == ["fid"])
    }

    @Test(arguments: Backend.allCases)
    func registeringAFIDStoresItsKindAndReadsItBack(_ backend: Backend) async throws {
        let db = try await TemporaryDatabase(backend)
        try await db.store.upsertUser(UserProfile(id: "u", timezone: "UTC"), now: 0)
        let value = Self.fid("eQ", 7)
        let result = try await db.store.register(
            DeviceRegistration(userID: "u", token: value, provider: .fcm, platform: .ios, kind: .fid), now: 5)
        #expect(result.change == .created && !result.retiredReplaced)
        let snapshot = try #require(try await db.store.userSnapshot(userID: "u"))
        #expect(snapshot.activeDevices.map(\.kind) == [.fid])
        #expect(snapshot.activeDevices.map(\.token) == [value])
        let devices = try await db.store.activeDevices(userIDs: ["u"])
        #expect(devices["u"]?.map(\.kind) == [.fid])
        #expect(try await db.store.activeDeviceCounts() == ["fcm/fid": 1])
    }

    /// An app that turned FIDs on before this version registered its FIDs as FCM tokens (they fit the old shape
    /// check). Migration 013 makes those rows FIDs, so that they are sent in `message.fid`; real registration
    /// tokens stay tokens.
    @Test(arguments: Backend.allCases)
    func fidsRegisteredAsTokensBeforeTheMigrationBecomeFIDs(_ backend: Backend) async throws {
        let db = try await TemporaryDatabase(backend)
        try await db.store.upsertUser(UserProfile(id: "u", timezone: "UTC"), now: 0)
        // The table as migration 012 left it: no token_kind, 007's shape check.
        if backend == .sqlite {
            try await db.execute(
                """
                DROP TRIGGER user_devices_token_shape_on_insert; DROP TRIGGER user_devices_token_shape_on_update;
                ALTER TABLE user_devices DROP COLUMN token_kind;
                \(SchemaMigrations.m007.sqlite)
                DELETE FROM grdb_migrations WHERE identifier = '013_device_token_kind';
                """)
        } else {
            for statement in [
                "ALTER TABLE user_devices DROP CONSTRAINT user_devices_token_shape",
                "ALTER TABLE user_devices DROP COLUMN token_kind", SchemaMigrations.m007.postgres,
                "DELETE FROM schema_migrations WHERE id = '013_device_token_kind'",
            ] {
                try await db.execute(statement)
            }
        }
        let value = Self.fid("cM", 1)
        for token in [value, "a-registration-token:APA91b", hexToken("ab", 1)] {
            let apns = token.hasPrefix("ab")
            try await db.execute(
                """
                INSERT INTO user_devices (user_id, token, provider, platform, apns_environment, last_seen, created_at, updated_at)
                VALUES ('u', '\(token)', '\(apns ? "apns" : "fcm")', '\(apns ? "ios" : "android")',
                        \(apns ? "'production'" : "NULL"), \(db.ts(0)), \(db.ts(0)), \(db.ts(0)))
                """)
        }
        let reopened = try await db.reopen(.readWrite)
        #expect(try await reopened.appliedMigrations() == SchemaMigrations.all.map(\.id))
        await reopened.close()
        #expect(
            try await db.strings("SELECT token || ' ' || token_kind FROM user_devices ORDER BY id") == [
                "\(value) fid", "a-registration-token:APA91b token", "\(hexToken("ab", 1)) token",
            ])
    }

    // MARK: Sending

    /// Whatever the value and its stored kind, a FID-shaped value never goes in `message.token`, and a FID
    /// device's value always goes in `message.fid`: generated values, through the real message writer.
    @Test func noFIDShapedValueIsEverSentAsAToken() throws {
        var random = SplitMix64(seed: 6_200)
        let alphabet = Array("abcdefABCDEFxyzXYZ0123456789-_:")
        var fidsSent = 0
        for n in 0..<2_000 {
            let length = n % 3 == 0 ? DeviceToken.fidLength : Int(random.next() % 40) + 1
            let value = String((0..<length).map { _ in alphabet[Int(random.next() % UInt64(alphabet.count))] })
            for kind in TokenKind.allCases {
                let device = Device(
                    id: Int64(n), userID: "u", token: value, provider: .fcm,
                    platform: n % 2 == 0 ? .android : .ios, apnsEnvironment: nil, kind: kind)
                let body = FCM.message(
                    for: notification(device), configuration: FCMConfiguration(serviceAccountFile: "unused"),
                    links: DeepLinks(), badge: .unchanged, now: 0)
                let message = try #require(try JSONValue(parsing: ByteBuffer(bytes: body))["message"])
                if let token = message["token"]?.string {
                    #expect(!DeviceToken.isFIDShaped(token), "\(value) went in message.token")
                    #expect(kind == .token)
                    #expect(message["fid"] == nil)
                } else {
                    let fid = try #require(message["fid"]?.string, "\(value): neither token nor fid")
                    #expect(fid == value)
                    #expect(kind == .fid || DeviceToken.isFIDShaped(value))
                    fidsSent += 1
                }
            }
        }
        #expect(fidsSent > 2_000)
    }

    func notification(_ device: Device) -> OutgoingNotification {
        OutgoingNotification(
            logID: nil, device: device, type: .diaryReminder, period: "2026-11-28", locale: "en", messageIndex: 0,
            title: "Time to write", body: "How was your day?", expiresAt: 3_600)
    }

    /// A run sends `fid` to FID devices and `token` to the others, for Android and for iOS through FCM, and
    /// records each delivery against the device.
    @Test(arguments: Backend.allCases)
    func aRunSendsFIDsInFidAndTokensInToken(_ backend: Backend) async throws {
        let harness = try await DeliveryHarness.start(backend)
        defer { Task { await harness.stop() } }
        let store = harness.db.store
        let androidFID = Self.fid("cB", 1)
        let iosFID = Self.fid("fB", 2)
        let token = "fcm-registration-token-3"
        let apns = hexToken("ab", 4)
        try await Self.addUser(harness, "fid-android", fid: androidFID)
        try await Self.addUser(harness, "fid-ios", fid: iosFID, platform: .ios)
        try await harness.addUser("tokens", devices: [(token, .fcm, .android), (apns, .apns, .ios)])
        let summary = try await harness.run(at: "2026-11-23T20:00:00Z", sender: try await harness.sender())
        #expect(summary.sent == 3 && summary.retry == 0 && summary.failed == 0, "\(summary.text)")
        let accepted = harness.simulator.accepted()
        #expect(Set(accepted.map(\.token)) == [androidFID, iosFID, token, apns])
        for notification in accepted {
            let isFID = notification.token == androidFID || notification.token == iosFID
            #expect(notification.target == (isFID ? "fid" : nil), "\(notification.token)")
            if isFID {
                #expect(notification.payload.contains(#""fid":"\#(notification.token)""#))
                #expect(!notification.payload.contains(#""token":"#))
            }
        }
        #expect(harness.simulator.stats.errors.isEmpty, "\(harness.simulator.stats.errors)")
        // The explanation names each device's kind.
        let explanation = try await DiaryReminderRunner(store: store, sender: RecordingSender(), logger: quietLogger)
            .explain(userID: "fid-ios", options: ReminderRunOptions(now: instant("2026-11-23T20:05:00Z")))
        #expect(explanation.text.contains("fcm/ios fid "), "\(explanation.text)")
    }

    /// FCM's answers about a FID: dead ones retire the device with their reason; a transient one leaves it.
    @Test(arguments: Backend.allCases)
    func aDeadFIDIsDeactivated(_ backend: Backend) async throws {
        let harness = try await DeliveryHarness.start(backend)
        defer { Task { await harness.stop() } }
        let dead = Self.fid("dead", 1)
        let live = Self.fid("c0", 2)
        try await Self.addUser(harness, "gone", fid: dead)
        try await Self.addUser(harness, "here", fid: live)
        let summary = try await harness.run(at: "2026-11-23T20:00:00Z", sender: try await harness.sender())
        #expect(summary.sent == 1 && summary.failed == 1, "\(summary.text)")
        #expect(
            try await harness.db.strings(
                "SELECT token || ' ' || coalesce(deactivation_reason, 'active') FROM user_devices ORDER BY token")
                == ["\(live) active", "\(dead) UNREGISTERED"])
    }

    /// The classification table's rows for installation ids; the rows for tokens are unchanged.
    @Test func fcmAnswersAboutAFIDAreClassified() {
        func verdict(_ status: Int, _ googleStatus: String, _ message: String, _ code: String?) -> ProviderVerdict {
            var error = #"{"error":{"code":\#(status),"message":"\#(message)","status":"\#(googleStatus)""#
            if let code {
                error +=
                    #","details":[{"@type":"type.googleapis.com/google.firebase.fcm.v1.FcmError","errorCode":"\#(code)"}]"#
            }
            return FCM.classify(status: status, headers: [:], body: ByteBuffer(string: error + "}}"))
        }
        let rows: [(Int, String, String, String?, DeliveryOutcome, String?)] = [
            (404, "NOT_FOUND", "Requested entity was not found.", "UNREGISTERED", .tokenDead, "UNREGISTERED"),
            (403, "PERMISSION_DENIED", "SenderId mismatch", "SENDER_ID_MISMATCH", .tokenDead, "SENDER_ID_MISMATCH"),
            (404, "NOT_FOUND", "Firebase installation ID not found", nil, .tokenDead, "NOT_FOUND (fid)"),
            (
                404, "NOT_FOUND", "Requested entity message.fid was not found", "NOT_FOUND", .tokenDead,
                "NOT_FOUND (fid)"
            ),
            (
                400, "INVALID_ARGUMENT", "Invalid value at 'message.fid': not a valid Firebase installation ID",
                "INVALID_ARGUMENT", .tokenDead, "INVALID_ARGUMENT (fid)"
            ),
            // A NOT_FOUND that names no installation id (a wrong project id) is no verdict on a device.
            (404, "NOT_FOUND", "Requested entity was not found.", nil, .rejected, "NOT_FOUND"),
            (503, "UNAVAILABLE", "The service is currently unavailable.", "UNAVAILABLE", .retryLater, "UNAVAILABLE"),
            // Tokens, as before.
            (
                400, "INVALID_ARGUMENT", "The registration token is not a valid FCM registration token",
                "INVALID_ARGUMENT", .tokenDead, "INVALID_ARGUMENT (token)"
            ),
            (
                400, "INVALID_ARGUMENT", "Invalid JSON payload received.", "INVALID_ARGUMENT", .rejected,
                "INVALID_ARGUMENT"
            ),
        ]
        for (status, googleStatus, message, code, outcome, reason) in rows {
            let answer = verdict(status, googleStatus, message, code)
            #expect(answer.outcome == outcome, "\(googleStatus) \(message)")
            if let reason { #expect(answer.reason == reason, "\(googleStatus) \(message): \(answer.reason ?? "-")") }
        }
    }

    // MARK: The switch day

    /// An app's first launch with FIDs registers the FID and names the token it replaces: the token is retired in
    /// the same transaction, and the phone gets one reminder, through its FID. A token of another user is not
    /// touched by naming it.
    @Test(arguments: Backend.allCases)
    func aReplacedTokenIsRetiredWithTheRegistrationAndThePhoneIsRemindedOnce(_ backend: Backend) async throws {
        let harness = try await DeliveryHarness.start(backend)
        defer { Task { await harness.stop() } }
        let store = harness.db.store
        let oldToken = "old-registration-token:APA91b"
        let othersToken = "someone-elses-token:APA91b"
        let value = Self.fid("cS", 1)
        try await harness.addUser("switcher", devices: [(oldToken, .fcm, .android)])
        try await harness.addUser("other", devices: [(othersToken, .fcm, .android)])
        let switched = try await store.register(
            DeviceRegistration(
                userID: "switcher", token: value, provider: .fcm, platform: .android, kind: .fid, replaces: oldToken),
            now: 100)
        #expect(switched.change == .created && switched.retiredReplaced)
        let notMine = try await store.register(
            DeviceRegistration(
                userID: "switcher", token: Self.fid("cS", 2), provider: .fcm, platform: .android, kind: .fid,
                replaces: othersToken),
            now: 100)
        #expect(!notMine.retiredReplaced)
        #expect(
            try await harness.db.strings(
                "SELECT token || ' ' || token_kind || ' ' || coalesce(deactivation_reason, 'active') FROM user_devices WHERE user_id = 'switcher' ORDER BY id"
            ) == [
                "\(oldToken) token replaced", "\(value) fid active", "\(Self.fid("cS", 2)) fid active",
            ])
        #expect(
            try await harness.db.strings(
                "SELECT coalesce(deactivation_reason, 'active') FROM user_devices WHERE user_id = 'other'")
                == ["active"])
        // The replaced row and the new one are one transaction: a registration that fails (an unknown user)
        // retires nothing.
        await #expect(throws: JobError.self) {
            _ = try await store.register(
                DeviceRegistration(
                    userID: "ghost", token: Self.fid("cS", 3), provider: .fcm, platform: .android, kind: .fid,
                    replaces: othersToken),
                now: 100)
        }
        let summary = try await harness.run(at: "2026-11-23T20:00:00Z", sender: try await harness.sender())
        #expect(summary.failed == 0, "\(summary.text)")
        let tokens = harness.simulator.accepted().map(\.token)
        #expect(!tokens.contains(oldToken), "the replaced token was reminded too")
        #expect(tokens.filter { $0 == othersToken }.count == 1)
    }

    // MARK: The janitor's probes

    /// `--probe` asks FCM about long-unseen FIDs with `validate_only`, in `message.fid`; a dead one is retired.
    @Test func theValidateOnlyProbeAsksAboutFIDsInFid() async throws {
        let harness = try await DeliveryHarness.start()
        defer { Task { await harness.stop() } }
        let db = harness.db
        let now = instant("2026-12-30T12:00:00Z")
        let dead = Self.fid("dead", 5)
        let live = Self.fid("e0", 6)
        for (user, value) in [("a", dead), ("b", live)] {
            try await db.store.upsertUser(UserProfile(id: user, timezone: "UTC"), now: 0)
            _ = try await db.store.register(
                DeviceRegistration(userID: user, token: value, provider: .fcm, platform: .android, kind: .fid),
                now: now - 45 * 86_400)
        }
        var delivery = harness.delivery(apns: false)
        delivery.fcm?.validateOnly = true
        let probeDelivery = delivery
        let store = db.store
        var options = JanitorOptions(now: now)
        options.probe = true
        let janitor = TokenJanitor(store: store, logger: quietLogger) { () async throws(JobError) -> any Sender in
            try await PushSender(configuration: probeDelivery, credentials: store, logger: quietLogger)
        }
        let summary = try await janitor.run(options)
        #expect(summary.probed == 2 && summary.probeUnregistered == 1, "\(summary.text)")
        #expect(harness.simulator.stats.validated == 1)
        #expect(harness.simulator.stats.accepted == 0)
        #expect(harness.simulator.stats.errors["INVALID_ARGUMENT"] == nil, "a FID went in message.token")
        #expect(try await db.strings("SELECT token FROM user_devices WHERE NOT is_active") == [dead])
        #expect(summary.activeDevices == ["fcm/fid": 1])
        #expect(summary.text.contains("active_devices=fcm/fid:1"), "\(summary.text)")
    }

    // MARK: pushctl

    /// `pushctl device register --fid` registers an installation id (FCM implied) and can name the token it
    /// replaces; a FID given as `--token` is refused (65) with a message that names `--fid`, and nothing is written.
    @Test(arguments: Backend.allCases)
    func pushctlRegistersAFIDAndRefusesOneGivenAsAToken(_ backend: Backend) async throws {
        let db = try await TemporaryDatabase(backend)
        let database = ["--database", db.path]
        let value = Self.fid("fP", 1)
        #expect(
            try await Executables.run("pushctl", ["user", "set", "--id", "u1", "--timezone", "UTC"] + database).status
                == 0)
        let old = try await Executables.run(
            "pushctl",
            [
                "device", "register", "--user", "u1", "--token", "old-token:APA91b", "--provider", "fcm", "--platform",
                "android",
            ]
                + database)
        #expect(old.status == 0, "\(old.stderr)")
        let asToken = try await Executables.run(
            "pushctl",
            ["device", "register", "--user", "u1", "--token", value, "--provider", "fcm", "--platform", "android"]
                + database)
        #expect(asToken.status == 65, "\(asToken.status) \(asToken.stderr)")
        #expect(asToken.stderr.contains("--fid"), "\(asToken.stderr)")
        #expect(try await db.count("SELECT count(*) FROM user_devices") == 1)
        for (arguments, words) in [
            (["--token", "t", "--fid", value, "--platform", "android"], "exactly one of --token and --fid"),
            (["--platform", "android"], "exactly one of --token and --fid"),
            (["--fid", value, "--provider", "apns", "--platform", "ios"], "--fid"),
            (["--token", "abcd", "--platform", "ios"], "--provider"),
        ] {
            let refused = try await Executables.run(
                "pushctl", ["device", "register", "--user", "u1"] + arguments + database)
            #expect(refused.status == 64, "\(arguments): \(refused.status) \(refused.stderr)")
            #expect(refused.stderr.contains(words), "\(arguments): \(refused.stderr)")
        }
        let registered = try await Executables.run(
            "pushctl",
            [
                "device", "register", "--user", "u1", "--fid", value, "--platform", "android", "--replaces",
                "old-token:APA91b",
            ]
                + database)
        #expect(registered.status == 0, "\(registered.stderr)")
        #expect(registered.stdout.contains(" fid ") && registered.stdout.contains("created"), "\(registered.stdout)")
        #expect(registered.stdout.contains("replaced"), "\(registered.stdout)")
        #expect(!registered.stdout.contains(value), "the FID was printed whole: \(registered.stdout)")
        #expect(
            try await db.strings(
                "SELECT token_kind || ' ' || provider || ' ' || coalesce(deactivation_reason, 'active') FROM user_devices ORDER BY id"
            ) == ["token fcm replaced", "fid fcm active"])
    }
}

import Foundation
import JobKitTestSupport
import NIOCore
import NIOHPACK
import PushSimulator
import Testing

@testable import JobKit
@testable import JobKitDelivery

/// Issue 77: a misconfiguration costs no device. Dead-token answers that also mean "this sender is set up wrong"
/// (a topic of another app, sandbox tokens sent to production, a service account of another Firebase project)
/// deactivate nothing when they are most of a provider's answers: the devices are kept, held, and the run exits 78
/// with the setting to check. Among healthy answers each is still a dead token.
@Suite struct MisconfigurationTests {
    // MARK: The rules

    /// Every status and reason of PROVIDERS.md's APNs and FCM tables, with what it means for the device.
    @Test func everyDocumentedReasonIsClassified() {
        enum Class: Equatable {
            case delivered, dead, deadUnlessMisconfigured, retry, credentials, rejected
        }
        func kind(_ verdict: ProviderVerdict) -> Class {
            switch verdict.outcome {
            case .delivered: .delivered
            case .tokenDead: verdict.mayBeSendersMistake ? .deadUnlessMisconfigured : .dead
            case .retryLater: .retry
            case .credentials: .credentials
            case .rejected: .rejected
            }
        }
        let apns: [(Int, String, Class)] = [
            (200, "", .delivered),
            (410, "Unregistered", .dead), (410, "ExpiredToken", .dead),
            (400, "BadDeviceToken", .deadUnlessMisconfigured),
            (400, "DeviceTokenNotForTopic", .deadUnlessMisconfigured),
            (429, "TooManyRequests", .retry), (500, "InternalServerError", .retry),
            (503, "ServiceUnavailable", .retry), (503, "Shutdown", .retry),
            (403, "ExpiredProviderToken", .credentials), (403, "InvalidProviderToken", .credentials),
            (403, "MissingProviderToken", .credentials), (403, "BadEnvironmentKeyIdInToken", .credentials),
            (403, "UnrelatedKeyIdInToken", .credentials), (429, "TooManyProviderTokenUpdates", .credentials),
            (403, "Forbidden", .rejected), (413, "PayloadTooLarge", .rejected), (400, "BadCollapseId", .rejected),
            (400, "BadExpirationDate", .rejected), (400, "BadPriority", .rejected), (400, "BadTopic", .rejected),
            (400, "MissingTopic", .rejected), (400, "TopicDisallowed", .rejected), (400, "PayloadEmpty", .rejected),
        ]
        for (status, reason, expected) in apns {
            let body = status == 200 ? "" : #"{"reason":"\#(reason)"}"#
            let verdict = APNs.classify(status: status, headers: [:], body: ByteBuffer(string: body))
            #expect(kind(verdict) == expected, "APNs \(status) \(reason)")
        }
        let fcm: [(Int, String, String, String, Class)] = [
            (200, "", "", "", .delivered),
            (404, "NOT_FOUND", "UNREGISTERED", "Requested entity was not found.", .dead),
            (403, "PERMISSION_DENIED", "SENDER_ID_MISMATCH", "SenderId mismatch", .deadUnlessMisconfigured),
            (
                400, "INVALID_ARGUMENT", "INVALID_ARGUMENT",
                "The registration token is not a valid FCM registration token", .deadUnlessMisconfigured
            ),
            (
                400, "INVALID_ARGUMENT", "INVALID_ARGUMENT", "Invalid value at 'message.fid'",
                .deadUnlessMisconfigured
            ),
            (400, "INVALID_ARGUMENT", "INVALID_ARGUMENT", "Invalid value at 'message.data'", .rejected),
            (429, "RESOURCE_EXHAUSTED", "QUOTA_EXCEEDED", "Quota exceeded.", .retry),
            (503, "UNAVAILABLE", "UNAVAILABLE", "The service is currently unavailable.", .retry),
            (500, "INTERNAL", "INTERNAL", "Internal error.", .retry),
            (
                401, "UNAUTHENTICATED", "THIRD_PARTY_AUTH_ERROR", "Auth error from APNS or Web Push Service",
                .credentials
            ),
            (401, "UNAUTHENTICATED", "", "Request had invalid authentication credentials.", .credentials),
            (403, "PERMISSION_DENIED", "", "The caller does not have permission", .credentials),
            // A project id that does not exist: no verdict on any device.
            (404, "NOT_FOUND", "", "Requested entity was not found.", .rejected),
        ]
        for (status, google, code, message, expected) in fcm {
            let details =
                code.isEmpty
                ? ""
                : #","details":[{"@type":"type.googleapis.com/google.firebase.fcm.v1.FcmError","errorCode":"\#(code)"}]"#
            let body =
                status == 200
                ? #"{"name":"projects/p/messages/1"}"#
                : #"{"error":{"code":\#(status),"message":"\#(message)","status":"\#(google)"\#(details)}}"#
            let verdict = FCM.classify(status: status, headers: [:], body: ByteBuffer(string: body))
            #expect(kind(verdict) == expected, "FCM \(status) \(code.isEmpty ? google : code): \(message)")
        }
    }

    @Test func theGuardNeedsAHealthyProvider() {
        let rule = DeadTokenGuard.default
        #expect(!rule.believes(suspect: 40, delivered: 0))  // every answer: a misconfiguration
        #expect(!rule.believes(suspect: 1, delivered: 0))  // nothing delivered: nothing shows the setting works
        #expect(rule.believes(suspect: 1, delivered: 3))  // 25 %: one delivery on the same setting shows it works
        #expect(!rule.believes(suspect: 1, delivered: 2))
        #expect(rule.believes(suspect: 25, delivered: 75))
        #expect(!rule.believes(suspect: 26, delivered: 75))  // a quarter of the fleet: a partial mix-up
        #expect(DeadTokenGuard(sharePercent: 100, minDelivered: 0).believes(suspect: 40, delivered: 0))
    }

    @Test func aSmallFleetsTotalOutageIsAnOutage() {
        let rule = OutageThreshold.default
        #expect(rule.isOutage(devices: 6, attempts: 6))
        #expect(rule.isOutage(devices: 1, attempts: 1))
        #expect(!rule.isOutage(devices: 5, attempts: 6))
        #expect(!rule.isOutage(devices: 0, attempts: 0))
    }

    // MARK: Runs

    static let at = "2026-11-21T20:00:00Z"
    static let later = "2026-11-21T20:15:00Z"

    func deactivated(_ harness: DeliveryHarness) async throws -> Int {
        try await harness.db.count("SELECT count(*) FROM user_devices WHERE deactivated_at IS NOT NULL")
    }

    func held(_ harness: DeliveryHarness) async throws -> [String] {
        try await harness.db.store.heldDevices(userID: nil).map { "\($0.provider) \($0.reason)" }
    }

    enum Mistake: String, CaseIterable {
        case topicOfAnotherApp, sandboxTokensToProduction, serviceAccountOfAnotherProject
    }

    /// Each mistake, 40 users: no token deactivated, every device held with its reason, exit 78 naming the setting;
    /// the first run after the fix delivers every device and releases the marks.
    @Test(arguments: Backend.allCases, Mistake.allCases)
    func aMisconfigurationDeactivatesNothing(_ backend: Backend, _ mistake: Mistake) async throws {
        let harness = try await DeliveryHarness.start(backend)
        defer { Task { await harness.stop() } }
        let provider: Provider = mistake == .serviceAccountOfAnotherProject ? .fcm : .apns
        for n in 0..<40 {
            try await harness.addUser(
                "u\(n)",
                devices: [
                    (
                        provider == .apns ? hexToken("aa", n) : "phone-\(n)", provider,
                        provider == .apns ? .ios : .android
                    )
                ])
        }
        var wrong = harness.delivery()
        switch mistake {
        case .topicOfAnotherApp: wrong.apns?.topic = SimulatorCredentials.otherTopicsOfTheTeam[0]
        case .sandboxTokensToProduction: harness.simulator.setRules([SimulatorRule(prefix: "", kind: .bad)])
        case .serviceAccountOfAnotherProject:
            wrong.fcm?.serviceAccountFile = harness.simulator.credentials.otherProjectServiceAccountFile
        }
        let logs = CapturedLogs()
        let first = try await harness.run(at: Self.at, sender: try await harness.sender(wrong), logger: logs.logger)
        #expect(first.failure?.exitCode == 78, "\(first.text)")
        let setting =
            switch mistake {
            case .topicOfAnotherApp: "PUSH_APNS_TOPIC"
            case .sandboxTokensToProduction: "apns_environment"
            case .serviceAccountOfAnotherProject: "PUSH_FCM_SERVICE_ACCOUNT_FILE"
            }
        #expect(first.failure?.message.contains(setting) == true, "\(first.failure?.message ?? "")")
        #expect(try await deactivated(harness) == 0)
        #expect(first.devicesHeld == 40 && first.retry == 40 && first.sent == 0, "\(first.text)")
        #expect(first.text.contains("devices_held=40") && first.text.contains("misconfigured=40"), "\(first.text)")
        let reason =
            switch mistake {
            case .topicOfAnotherApp: "apns DeviceTokenNotForTopic"
            case .sandboxTokensToProduction: "apns BadDeviceToken"
            case .serviceAccountOfAnotherProject: "fcm SENDER_ID_MISMATCH"
            }
        #expect(try await held(harness) == Array(repeating: reason, count: 40))
        #expect(logs.lines.contains { $0.hasPrefix("error") && $0.contains(setting) }, "\(logs.lines)")
        // Explain says so, with the reason.
        let explained = try await DiaryReminderRunner(
            store: harness.db.store, sender: try await harness.sender(wrong), logger: quietLogger
        ).explain(userID: "u0", options: ReminderRunOptions(now: instant(Self.later)))
        #expect(
            explained.steps.contains {
                $0.rule == "1. held devices" && $0.value.contains(reason.split(separator: " ")[1])
            },
            "\(explained.text)")
        let metrics = MetricsFile.text(
            first, job: "diary-reminder", now: 0, exitCode: 78, durationSeconds: 1, previousLastSuccess: nil)
        #expect(
            metrics.contains(
                #"diary_push_run_devices_left{job="diary-reminder",provider="\#(provider)",cause="misconfigured"} 40"#),
            "\(metrics)")

        // Fixed: the next run delivers what was held, and the marks go.
        harness.simulator.setRules([])
        let fixed = try await harness.run(at: Self.later, sender: try await harness.sender())
        #expect(fixed.failure == nil && fixed.sent == 40 && fixed.takenOver == 40, "\(fixed.text)")
        #expect(try await held(harness).isEmpty)
        #expect(try await deactivated(harness) == 0)
    }

    /// A held device that gets the same answer once the provider is otherwise healthy is a dead token after all:
    /// deactivated by that run, and no mark is left.
    @Test(arguments: Backend.allCases)
    func aHeldDeviceStillAnsweredSoWhenHealthyIsDeactivated(_ backend: Backend) async throws {
        let harness = try await DeliveryHarness.start(backend) {
            $0.rules = [SimulatorRule(prefix: "0ea0", kind: .otherApp)]
        }
        defer { Task { await harness.stop() } }
        for n in 0..<30 { try await harness.addUser("u\(n)", devices: [(hexToken("aa", n), .apns, .ios)]) }
        try await harness.addUser("other", devices: [(hexToken("0ea0", 99), .apns, .ios)])
        var wrong = harness.delivery()
        wrong.apns?.topic = SimulatorCredentials.otherTopicsOfTheTeam[1]
        let first = try await harness.run(at: Self.at, sender: try await harness.sender(wrong))
        #expect(first.failure?.exitCode == 78 && first.devicesHeld == 31, "\(first.text)")
        let fixed = try await harness.run(at: Self.later, sender: try await harness.sender())
        #expect(fixed.failure == nil && fixed.sent == 30 && fixed.failed == 1, "\(fixed.text)")
        #expect(
            try await harness.db.strings(
                "SELECT user_id || ' ' || deactivation_reason FROM user_devices WHERE deactivated_at IS NOT NULL")
                == ["other DeviceTokenNotForTopic"])
        #expect(try await held(harness).isEmpty)
    }

    /// Among healthy answers, one truly dead token of each such reason is deactivated in the same run, and so is a
    /// mass of `Unregistered`: those no setting can cause.
    @Test(arguments: Backend.allCases)
    func amongHealthyAnswersTheyAreDeadTokens(_ backend: Backend) async throws {
        let harness = try await DeliveryHarness.start(backend) {
            $0.rules = [
                SimulatorRule(prefix: "bad0", kind: .bad), SimulatorRule(prefix: "0ea0", kind: .otherApp),
                SimulatorRule(prefix: "dead", kind: .dead),
            ]
        }
        defer { Task { await harness.stop() } }
        for n in 0..<30 {
            try await harness.addUser(
                "u\(n)", devices: [(hexToken("aa", n), .apns, .ios), ("phone-\(n)", .fcm, .android)])
        }
        try await harness.addUser("a1", devices: [(hexToken("bad0", 1), .apns, .ios)])
        try await harness.addUser("a2", devices: [(hexToken("0ea0", 2), .apns, .ios)])
        try await harness.addUser("f1", devices: [("bad0-phone", .fcm, .android)])
        try await harness.addUser("f2", devices: [("0ea0-phone", .fcm, .android)])
        let summary = try await harness.run(at: Self.at, sender: try await harness.sender())
        #expect(summary.failure == nil && summary.devicesHeld == 0, "\(summary.text)")
        #expect(summary.sent == 30 && summary.failed == 4, "\(summary.text)")
        #expect(
            try await harness.db.strings(
                "SELECT user_id || ' ' || deactivation_reason FROM user_devices WHERE deactivated_at IS NOT NULL ORDER BY user_id"
            ) == [
                "a1 BadDeviceToken", "a2 DeviceTokenNotForTopic", "f1 INVALID_ARGUMENT (token)",
                "f2 SENDER_ID_MISMATCH",
            ])

        let mass = try await DeliveryHarness.start(backend) { $0.rules = [SimulatorRule(prefix: "dead", kind: .dead)] }
        defer { Task { await mass.stop() } }
        for n in 0..<40 { try await mass.addUser("d\(n)", devices: [(hexToken("dead", n), .apns, .ios)]) }
        let gone = try await mass.run(at: Self.at, sender: try await mass.sender())
        #expect(gone.failure == nil && gone.failed == 40 && gone.devicesHeld == 0, "\(gone.text)")
        #expect(try await deactivated(mass) == 40)
    }

    /// Six of six devices answered 503: an outage, whatever the count (it took ten).
    @Test(arguments: Backend.allCases)
    func aSmallFleetsOutageExits69(_ backend: Backend) async throws {
        let harness = try await DeliveryHarness.start(backend) { $0.faultRate = 1 }
        defer { Task { await harness.stop() } }
        for n in 0..<6 { try await harness.addUser("u\(n)", devices: [(hexToken("aa", n), .apns, .ios)]) }
        var delivery = harness.delivery()
        delivery.retry.budget = .milliseconds(300)
        let summary = try await harness.run(at: Self.at, sender: try await harness.sender(delivery))
        #expect(summary.failure?.exitCode == 69 && summary.retry == 6, "\(summary.text)")
        #expect(try await deactivated(harness) == 0)
    }

    /// A key outside its scope (Feb 2025's topic-specific keys): a credentials failure, no device's fault.
    @Test(arguments: Backend.allCases)
    func aKeyOutsideItsScopeIsACredentialsFailure(_ backend: Backend) async throws {
        let harness = try await DeliveryHarness.start(backend)
        defer { Task { await harness.stop() } }
        for n in 0..<6 { try await harness.addUser("u\(n)", devices: [(hexToken("aa", n), .apns, .ios)]) }
        var delivery = harness.delivery()
        delivery.apns?.topic = SimulatorCredentials.topicOutsideTheKeysScope
        let summary = try await harness.run(at: Self.at, sender: try await harness.sender(delivery))
        #expect(summary.failure?.exitCode == 77, "\(summary.text)")
        #expect(summary.troubles.first?.reasons == ["UnrelatedKeyIdInToken"], "\(summary.troubles)")
        #expect(try await deactivated(harness) == 0)
        #expect(try await held(harness).isEmpty)
    }

    /// The hook, the janitor's probes and a `--validate-only` dry run draw the same line.
    @Test(arguments: Backend.allCases)
    func theHookTheProbesAndValidationHoldToo(_ backend: Backend) async throws {
        let harness = try await DeliveryHarness.start(backend)
        defer { Task { await harness.stop() } }
        let store = harness.db.store
        var wrong = harness.delivery()
        wrong.fcm?.serviceAccountFile = harness.simulator.credentials.otherProjectServiceAccountFile
        try await harness.addUser(
            "writer", devices: [("phone-1", .fcm, .android), ("tablet-1", .fcm, .android)],
            registeredAt: instant("2026-11-15T00:00:00Z"))
        let configuration = wrong
        let hook = ContentLimitHook(store: store, logger: quietLogger) { () async throws(JobError) -> any Sender in
            try await PushSender(configuration: configuration, credentials: store, logger: quietLogger)
        }
        let warned = try await hook.handle(
            try ContentLimitEvent(userID: "writer", used: 30, limit: 30, period: .monthly),
            options: .init(now: instant("2026-11-21T12:00:00Z")))
        #expect(warned.failure?.exitCode == 78, "\(warned.text)")
        #expect(try await deactivated(harness) == 0)
        #expect(try await held(harness).count == 2)

        var validating = wrong
        validating.fcm?.validateOnly = true
        let dry = try await harness.run(at: Self.at, sender: try await harness.sender(validating), dryRun: true)
        #expect(dry.failure?.exitCode == 78, "\(dry.text)")

        var options = JanitorOptions(now: instant("2027-01-30T12:00:00Z"))
        options.probe = true
        let probes = validating
        let janitor = TokenJanitor(store: store, logger: quietLogger) { () async throws(JobError) -> any Sender in
            try await PushSender(configuration: probes, credentials: store, logger: quietLogger)
        }
        let probed = try await janitor.run(options)
        #expect(probed.probed == 2 && probed.probeUnregistered == 0, "\(probed.text)")
        #expect(probed.failure?.exitCode == 78, "\(probed.text)")
        #expect(try await deactivated(harness) == 0)
    }
}

import Foundation
import JobKitTestSupport
import Testing

@testable import JobKit
@testable import JobKitDelivery

/// `DeliveryConfiguration.sender(for:)`: the one place that turns a delivery mode into a sender, for the
/// command line, the Lambda loop and a Swift backend alike.
@Suite struct DeliveryModeTests {
    final class Lines: LineSink, @unchecked Sendable {
        private let lock = NSLock()
        private var written: [String] = []
        func write(_ line: String) { lock.withLock { written.append(line) } }
        var all: [String] { lock.withLock { written } }
    }

    /// Only APNs configured (its key is never read by a dry run).
    static var apnsOnly: DeliveryConfiguration {
        var configuration = DeliveryConfiguration()
        configuration.apns = APNsConfiguration(keyFile: "/nonexistent.p8", keyID: "K", teamID: "T", topic: "app")
        return configuration
    }

    @Test func aDryRunSkipsWhatTheRealRunCannotDeliverAndPrintsTheRest() async throws {
        let db = try await TemporaryDatabase(.sqlite)
        let lines = Lines()
        let sender = try await Self.apnsOnly.sender(
            for: .dryRun(outbox: nil, sink: lines, json: false), credentials: db.store, logger: quietLogger)
        #expect(sender is DryRunSender)
        #expect(sender.canDeliver(to: .apns) && !sender.canDeliver(to: .fcm))
        // Into an outbox, every provider is deliverable.
        let outbox = try await Self.apnsOnly.sender(
            for: .dryRun(outbox: "/tmp/unused", sink: lines, json: false), credentials: db.store, logger: quietLogger)
        #expect(outbox.canDeliver(to: .apns) && outbox.canDeliver(to: .fcm))
    }

    /// The line a dry run prints and an outbox holds for one notification, to the letter: what a consumer of the
    /// outbox parses. The token is masked except in the outbox; `apns_environment` is left out for FCM.
    @Test func aNotificationsLineHasEveryFieldUnderItsSnakeCaseName() {
        let apns = DeliveryTests.reminder(to: "ab12cd34ef56ab12cd34", .apns)
        #expect(
            NotificationLine(apns, event: "would_send").json
                == #"{"apns_environment":"production","body":"b","collapse_id":"\#(apns.collapseID)","#
                + #""device":"ab12cd…(20)","device_id":1,"event":"would_send","expires_at":"2096-10-02T07:06:40Z","#
                + #""locale":"en","message_index":0,"period":"2026-11-21","platform":"ios","provider":"apns","#
                + #""title":"t","type":"diary_reminder","user_id":"u1"}"#)
        let fcm = DeliveryTests.reminder(to: "fcm-token-1234567890", .fcm)
        #expect(
            NotificationLine(fcm, event: "outbox", fullToken: true).json
                == #"{"body":"b","collapse_id":"\#(fcm.collapseID)","device":"fcm-token-1234567890","device_id":1,"#
                + #""event":"outbox","expires_at":"2096-10-02T07:06:40Z","locale":"en","message_index":0,"#
                + #""period":"2026-11-21","platform":"android","provider":"fcm","title":"t","type":"diary_reminder","#
                + #""user_id":"u1"}"#)
    }

    @Test func validationNeedsFCM() async throws {
        let db = try await TemporaryDatabase(.sqlite)
        await #expect(throws: JobError.config("--validate-only needs FCM (PUSH_FCM_SERVICE_ACCOUNT_FILE)")) {
            _ = try await Self.apnsOnly.sender(
                for: .validateOnly(sink: Lines(), json: false), credentials: db.store, logger: quietLogger)
        }
    }

    @Test func anOutboxNamedIsWhereARunDelivers() async throws {
        let db = try await TemporaryDatabase(.sqlite)
        let path = db.directory.appendingPathComponent("outbox.jsonl").path
        let sender = try await DeliveryConfiguration().sender(
            for: .deliver(outbox: path), credentials: db.store, logger: quietLogger)
        #expect(sender is OutboxSender)
        await sender.shutdown()
    }

    /// The flags' choice, in order of precedence, and what each mode asks of the run: a question (dry run,
    /// `--explain`, `--validate-only`) writes no metrics; only a preview opens the store read-only.
    @Test(
        arguments: [
            // (dry run, explain, validate only, outbox) → (mode, question, read-only store)
            (false, false, false, nil, "deliver", false, false),
            (false, false, false, "/o", "deliver", false, false),
            (true, false, false, nil, "dryRun", true, true),
            (false, true, false, nil, "dryRun", true, true),
            (true, true, false, "/o", "dryRun", true, true),
            (false, false, true, nil, "validateOnly", true, false),
            (true, true, true, nil, "validateOnly", true, false),
        ] as [(Bool, Bool, Bool, String?, String, Bool, Bool)])
    func theFlagsChooseTheMode(
        dryRun: Bool, explain: Bool, validateOnly: Bool, outbox: String?, expected: String, question: Bool,
        readOnly: Bool
    ) {
        let mode = DeliveryMode.chosen(
            dryRun: dryRun, explain: explain, validateOnly: validateOnly, outbox: outbox, sink: Lines(), json: false)
        let name =
            switch mode {
            case .deliver(let into): into == outbox ? "deliver" : "deliver elsewhere"
            case .dryRun(let into, _, _): into == outbox ? "dryRun" : "dryRun elsewhere"
            case .validateOnly: "validateOnly"
            }
        #expect(name == expected)
        #expect(mode.isQuestion == question)
        #expect((mode.storeMode == .readOnly) == readOnly)
    }

    /// Before the store is opened: a delivering run needs a provider or an outbox and readable keys, validation
    /// needs FCM, a preview needs nothing (its keys are never read).
    @Test func eachModeChecksWhatItNeedsBeforeTheStoreOpens() async throws {
        await #expect(throws: JobError.self) {
            try await DeliveryMode.deliver(outbox: nil).check(DeliveryConfiguration())
        }
        try await DeliveryMode.deliver(outbox: "/tmp/outbox").check(DeliveryConfiguration())
        await #expect(throws: JobError.self) { try await DeliveryMode.deliver(outbox: nil).check(Self.apnsOnly) }
        await #expect(throws: JobError.config("--validate-only needs FCM (PUSH_FCM_SERVICE_ACCOUNT_FILE)")) {
            try await DeliveryMode.validateOnly(sink: Lines(), json: false).check(Self.apnsOnly)
        }
        try await DeliveryMode.dryRun(outbox: nil, sink: Lines(), json: false).check(Self.apnsOnly)
        try await DeliveryMode.dryRun(outbox: nil, sink: Lines(), json: false).check(DeliveryConfiguration())
    }
}

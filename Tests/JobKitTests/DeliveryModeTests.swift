import Foundation
import Testing

@testable import JobKit

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
}

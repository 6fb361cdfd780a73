import Foundation
import Logging
import NIOConcurrencyHelpers
import PushSimulator

@testable import JobKit
@testable import JobKitDelivery

/// Generating RSA keys is slow: generate one set per process and copy it into each test's directory.
package let credentialTemplate: URL = {
    let directory = FileManager.default.temporaryDirectory.appendingPathComponent(
        "sim-template-\(ProcessInfo.processInfo.processIdentifier)")
    _ = try! SimulatorCredentials.prepare(in: directory)
    return directory
}()

/// A simulator and a database for one test.
package struct DeliveryHarness {
    package let db: TemporaryDatabase
    package let simulator: PushSimulator

    package static func start(
        _ backend: Backend = .sqlite,
        _ configure: (inout SimulatorConfiguration) -> Void = { _ in }
    ) async throws -> DeliveryHarness {
        let db = try await TemporaryDatabase(backend)
        let directory = db.directory.appendingPathComponent("sim")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        for name in ["ca.pem", "server.pem", "server-key.pem", "apns-key.p8", "service-account-key.pem"] {
            try FileManager.default.copyItem(
                at: credentialTemplate.appendingPathComponent(name),
                to: directory.appendingPathComponent(name))
        }
        var configuration = SimulatorConfiguration(credentials: try SimulatorCredentials.prepare(in: directory))
        configure(&configuration)
        return DeliveryHarness(db: db, simulator: try await PushSimulator.start(configuration))
    }

    package func delivery(apns: Bool = true, fcm: Bool = true) -> DeliveryConfiguration {
        var delivery = DeliveryConfiguration()
        let endpoint = Endpoint(host: "127.0.0.1", port: simulator.port)
        let credentials = simulator.credentials
        if apns {
            var configuration = APNsConfiguration(
                keyFile: credentials.apnsKeyFile, keyID: SimulatorCredentials.keyID,
                teamID: SimulatorCredentials.teamID, topic: SimulatorCredentials.topic)
            configuration.productionEndpoint = endpoint
            configuration.sandboxEndpoint = endpoint
            delivery.apns = configuration
        }
        if fcm {
            var configuration = FCMConfiguration(serviceAccountFile: credentials.serviceAccountFile)
            configuration.endpoint = endpoint
            delivery.fcm = configuration
        }
        delivery.tls.additionalCAFile = credentials.caFile
        delivery.retry.baseDelay = .milliseconds(10)
        // The retry budget stays the default 60 s: it is wall-clock time from the sender's creation, and with
        // the whole suite sharing 2 cores a run can take well over 5 s, which cut retries short in CI.
        return delivery
    }

    package func sender(_ delivery: DeliveryConfiguration? = nil, logger: Logger = quietLogger) async throws
        -> PushSender
    {
        try await PushSender(configuration: delivery ?? self.delivery(), credentials: db.store, logger: logger)
    }

    @discardableResult
    package func run(at now: String, sender: PushSender, dryRun: Bool = false, logger: Logger = quietLogger)
        async throws
        -> RunSummary
    {
        let summary = try await DiaryReminderRunner(store: db.store, sender: sender, logger: logger)
            .run(ReminderRunOptions(now: instant(now), dryRun: dryRun))
        await sender.shutdown()
        return summary
    }

    package func addUser(
        _ id: String, devices: [(token: String, provider: Provider, platform: Platform)], zone: String = "UTC",
        time: String = "20:00", registeredAt: Int64 = 0
    ) async throws {
        try await db.store.upsertUser(UserProfile(id: id, timezone: zone, reminderTime: time), now: registeredAt)
        for device in devices {
            _ = try await db.store.register(
                DeviceRegistration(
                    userID: id, token: device.token, provider: device.provider,
                    platform: device.platform), now: registeredAt)
        }
    }

    package func stop() async { await simulator.stop() }
}

package func hexToken(_ prefix: String, _ n: Int) -> String {
    let suffix = String(format: "%060x", n)
    return prefix + String(suffix.suffix(64 - prefix.count))
}

/// Keeps every log line (message and metadata) for inspection.
package final class CapturedLogs: @unchecked Sendable {
    private let lock = NIOLock()
    private var stored: [String] = []
    package init() {}
    package var lines: [String] { lock.withLock { stored } }
    package func append(_ line: String) { lock.withLock { stored.append(line) } }

    package var logger: Logger {
        var logger = Logger(label: "captured") { _ in CapturingHandler(sink: self) }
        logger.logLevel = .trace
        return logger
    }

    struct CapturingHandler: LogHandler {
        let sink: CapturedLogs
        var metadata: Logger.Metadata = [:]
        var logLevel: Logger.Level = .trace
        subscript(metadataKey key: String) -> Logger.Metadata.Value? {
            get { metadata[key] }
            set { metadata[key] = newValue }
        }
        func log(event: LogEvent) {
            let merged = metadata.merging(event.metadata ?? [:]) { $1 }
            sink.append("\(event.level) \(event.message) \(merged) \(event.error.map { "\($0)" } ?? "")")
        }
    }
}

/// A retry clock for tests: it starts at the process's current instant and moves only when the code under
/// test waits, by exactly the wait, which it records, or when the test moves it (``advance(by:)``, a slow
/// provider). Nothing sleeps. `onWait` runs after each wait with the number of waits so far: what another
/// process does meanwhile.
package final class ManualRetryClock: RetryClock, @unchecked Sendable {
    private let lock = NSLock()
    private let start = ContinuousClock.now
    private var elapsed: Duration = .zero
    private var recorded: [Duration] = []
    private let onWait: @Sendable (Int) async -> Void

    package init(onWait: @escaping @Sendable (Int) async -> Void = { _ in }) {
        self.onWait = onWait
    }

    package var now: ContinuousClock.Instant { lock.withLock { start + elapsed } }
    /// Every wait the code under test asked for, in order.
    package var waits: [Duration] { lock.withLock { recorded } }
    /// How far the clock has moved.
    package var moved: Duration { lock.withLock { elapsed } }

    package func sleep(for duration: Duration) async {
        let count = lock.withLock {
            elapsed += duration
            recorded.append(duration)
            return recorded.count
        }
        await onWait(count)
        await Task.yield()
    }

    package func advance(by duration: Duration) {
        lock.withLock { elapsed += duration }
    }
}

/// Accepts every notification, each batch taking `takes` of `clock`'s time: a slow provider.
package actor ClockAdvancingSender: Sender {
    package let clock: ManualRetryClock
    package let takes: Duration
    package private(set) var sent: [OutgoingNotification] = []

    package init(clock: ManualRetryClock, takes: Duration) {
        self.clock = clock
        self.takes = takes
    }

    package func send(_ batch: [OutgoingNotification]) async -> [DeliveryReport] {
        sent += batch
        clock.advance(by: takes)
        return batch.map { DeliveryReport(channel: DeliveryChannel($0.device.provider), outcome: .delivered) }
    }
}

import ArgumentParser
import BuildVersion
import Dispatch
import Foundation
import JobKit
import JobKitDelivery
import PushSimulator

@main
struct PushSimulatorCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "push-simulator",
        abstract: "A local APNs + FCM + OAuth server over HTTP/2 and TLS, for demos, tests and benchmarks.",
        discussion: """
            Writes (or reuses) test credentials in --credentials DIR: ca.pem (trust it with PUSH_CA_FILE), apns-key.p8, \
            service-account.json (token_uri on this server). Prints one JSON line when ready, serves until SIGINT or \
            SIGTERM, then prints its counters as one JSON line on stderr.
            Default token rules: dead… → unregistered, bad0… → bad token, 7407… → throttled, fa11… → fails twice, \
            5104… → slow, a0th… → FCM third-party auth error.
            """,
        version: BuildVersion.text)

    @Option(help: "Port on 127.0.0.1 (0 picks a free one).") var port = 0
    @Option(help: ArgumentHelp("Directory of test credentials (generated if missing).", valueName: "dir"))
    var credentials = "push-simulator-credentials"
    @Option(
        help: ArgumentHelp(
            "JSON file: an array of {prefix, kind, times?, retryAfter?, delayMs?, timestampMs?}.", valueName: "file"))
    var rules: String?
    @Option(help: "SETTINGS_MAX_CONCURRENT_STREAMS announced.") var maxConcurrentStreams = 1000
    @Option(help: "Send GOAWAY after this many streams per connection.") var goAwayAfter: Int?
    @Option(help: "Share of requests answered 503 at random (0–1).") var faultRate = 0.0
    @Option(help: "FCM quota: sends per --fcm-quota-window, beyond which 429 QUOTA_EXCEEDED with Retry-After.")
    var fcmQuota: Int?
    @Option(help: "Seconds of an FCM quota window (default 60).") var fcmQuotaWindow = 60
    @Option(help: ArgumentHelp("Append accepted notifications to this file as JSON lines.", valueName: "file"))
    var record: String?
    @Option(help: ArgumentHelp("Also write the ready line to this file (for scripts to wait on).", valueName: "file"))
    var readyFile: String?

    func validate() throws {
        guard (0...1).contains(faultRate) else { throw ValidationError("--fault-rate must be within 0…1") }
        guard maxConcurrentStreams >= 1 else { throw ValidationError("--max-concurrent-streams must be at least 1") }
        if let goAwayAfter, goAwayAfter < 1 { throw ValidationError("--go-away-after must be at least 1") }
        if let fcmQuota, fcmQuota < 1 { throw ValidationError("--fcm-quota must be at least 1") }
        guard fcmQuotaWindow >= 1 else { throw ValidationError("--fcm-quota-window must be at least 1") }
    }

    func run() async throws {
        let credentials = try SimulatorCredentials.prepare(in: URL(fileURLWithPath: self.credentials))
        var configuration = SimulatorConfiguration(credentials: credentials)
        configuration.port = port
        configuration.maxConcurrentStreams = maxConcurrentStreams
        configuration.goAwayAfterStreams = goAwayAfter
        configuration.faultRate = faultRate
        configuration.fcmQuota = fcmQuota.map { SimulatorQuota(messages: $0, window: .seconds(fcmQuotaWindow)) }
        configuration.recordFile = record
        configuration.recordInMemory = false
        if let rules {
            do {
                configuration.rules = try JSONDecoder().decode(
                    [SimulatorRule].self, from: Data(contentsOf: URL(fileURLWithPath: rules)))
            } catch {
                FileHandle.standardError.write(
                    Data("push-simulator: error: \(rules) is not a rules file: \(error)\n".utf8))
                throw ExitCode(65)
            }
        }
        let simulator = try await PushSimulator.start(configuration)
        let ready: [String: String] = [
            "base_url": simulator.baseURL, "port": String(simulator.port), "ca_file": credentials.caFile,
            "apns_key_file": credentials.apnsKeyFile, "apns_key_id": SimulatorCredentials.keyID,
            "apns_team_id": SimulatorCredentials.teamID, "apns_topic": SimulatorCredentials.topic,
            "fcm_service_account_file": credentials.serviceAccountFile,
            // What an operator may get wrong: another app of the team, a service account of another project.
            "apns_other_topic": SimulatorCredentials.otherTopicsOfTheTeam[0],
            "apns_topic_outside_key_scope": SimulatorCredentials.topicOutsideTheKeysScope,
            "fcm_other_project_service_account_file": credentials.otherProjectServiceAccountFile,
        ]
        let line = String(
            decoding: try JSONSerialization.data(
                withJSONObject: ready, options: [.sortedKeys, .withoutEscapingSlashes]),
            as: UTF8.self)
        FileHandle.standardOutput.write(Data((line + "\n").utf8))
        if let readyFile { try (line + "\n").write(toFile: readyFile, atomically: true, encoding: .utf8) }

        await Self.waitForTermination()
        await simulator.stop()
        let stats = try JSONEncoder().encode(simulator.stats)
        FileHandle.standardError.write(stats + Data("\n".utf8))
    }

    static func waitForTermination() async {
        await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
            let queue = DispatchQueue(label: "signals")
            var sources: [DispatchSourceSignal] = []
            let once = OnceFlag()
            for signalNumber in [SIGINT, SIGTERM] {
                signal(signalNumber, SIG_IGN)
                let source = DispatchSource.makeSignalSource(signal: signalNumber, queue: queue)
                source.setEventHandler {
                    if once.take() { continuation.resume() }
                }
                source.resume()
                sources.append(source)
            }
            withExtendedLifetime(sources) {}
            SignalSources.keep(sources)
        }
    }
}

/// Keeps the signal sources alive for the life of the process.
enum SignalSources {
    nonisolated(unsafe) static var sources: [DispatchSourceSignal] = []
    static func keep(_ new: [DispatchSourceSignal]) { sources += new }
}

final class OnceFlag: @unchecked Sendable {
    private let lock = NSLock()
    private var taken = false
    func take() -> Bool {
        lock.withLock {
            defer { taken = true }
            return !taken
        }
    }
}

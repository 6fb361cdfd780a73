import ArgumentParser
import Foundation
import JobKit
import JobKitCore

/// The facts the generated reference pages are made from (`scripts/reference`): every setting and every exit
/// code, as JSON. Hidden: a tool of the repository's, not an operator's command.
struct ReferenceCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "reference", abstract: "Print the settings and exit codes as JSON (for scripts/reference).",
        shouldDisplay: false)

    func run() throws {
        let settings: [[String: String]] = ConfigKey.allCases.map { key in
            var row = ["variable": key.rawValue, "flag": key.flag, "value": key.valueName, "help": key.help]
            if let number = key.number {
                row["default"] = String(number.default)
                row["range"] = "\(number.range.lowerBound)–\(number.range.upperBound)"
            } else if let value = key.defaultValue {
                row["default"] = value
            }
            return row
        }
        let exitCodes: [[String: String]] = JobError.exitCodes.map {
            ["code": String($0.code), "kind": $0.kind, "meaning": $0.meaning]
        }
        let data = try JSONSerialization.data(
            withJSONObject: ["settings": settings, "exit_codes": exitCodes, "metrics": Self.metricsFiles()],
            options: [.sortedKeys, .prettyPrinted])
        print(String(decoding: data, as: UTF8.self))
    }

    /// The metrics files the jobs write (`--metrics-file`), made by the jobs' own writer from summaries in which
    /// every series appears: each metric's name, type, help and labels come from the code that writes them.
    static func metricsFiles() -> [String: String] {
        var run = RunSummary(job: "diary-reminder", runID: "r", now: 0, dryRun: false)
        run.bucketsLeased = 1
        run.buckets = 4
        run.skipped = [.wroteToday: 1]
        run.outcomesByProvider = [.apns: [.delivered: 1]]
        run.troubles = [ProviderTrouble(provider: .fcm, cause: .unavailable, devices: 1)]
        run.pendingRetry = [PendingDevices(provider: .apns, reason: "TooManyRequests", scope: .device, devices: 1)]
        run.credentialMints = [.apns: 1]
        run.devicesMissed = [MissedDevices(provider: "apns", reason: "TooManyRequests", devices: 1)]
        var janitor = JanitorSummary(runID: "j", now: "1970-01-01T00:00:00Z", dryRun: false)
        janitor.activeDevices = ["ios/apns/token": 1]
        return [
            "diary-reminder": MetricsFile.text(
                run, job: "diary-reminder", now: 0, exitCode: 0, durationSeconds: 1, previousLastSuccess: nil),
            "token-janitor": MetricsFile.text(
                janitor, job: "token-janitor", now: 0, exitCode: 0, durationSeconds: 1, previousLastSuccess: nil),
        ]
    }
}

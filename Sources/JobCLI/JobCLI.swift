import ArgumentParser
import Foundation
import JobKit
import JobKitDelivery
import JobKitSQLite
import JobKitWiring
import Logging

/// Output formats of every job.
package enum OutputFormat: String, ExpressibleByArgument, CaseIterable, Sendable {
    case text, json
}

/// Where the store is.
package struct StoreOptions: ParsableArguments {
    @Option(name: .setting(.databaseURL), help: .setting(.databaseURL))
    package var database: String?

    @Option(name: .setting(.databasePasswordFile), help: .setting(.databasePasswordFile))
    package var databasePasswordFile: String?

    package init() {}

    /// `pushctl backup`: copies the SQLite database these options name to `path`.
    package func backup(to path: String) throws(JobError) -> (source: String, copy: SQLiteBackup) {
        try DatabaseBackup.copy(
            ConfigResolver(environment: ProcessInfo.processInfo.environment),
            flags: (database, databasePasswordFile), to: path)
    }

    /// The shared options of a command that takes only these and `--now`.
    package func common(now: String?) -> CommonOptions {
        var common = CommonOptions.environmentOnly
        common.store = self
        common.now = now
        common.format = .text
        return common
    }
}

/// Options every job shares.
package struct CommonOptions: ParsableArguments {
    @OptionGroup package var store: StoreOptions
    package var database: String? {
        get { store.database }
        set { store.database = newValue }
    }
    package var databasePasswordFile: String? {
        get { store.databasePasswordFile }
        set { store.databasePasswordFile = newValue }
    }

    @Option(
        name: .long,
        help: ArgumentHelp(
            "The instant to evaluate, ISO 8601 (default: the system clock).",
            valueName: "iso8601"))
    package var now: String?

    @Option(name: .long, help: "Output format of results and the summary.")
    package var format: OutputFormat = .text

    @Option(name: .setting(.logLevel), help: .setting(.logLevel))
    package var logLevel: String?

    @Option(name: .setting(.logFormat), help: .setting(.logFormat))
    package var logFormat: String?

    package init() {}

    /// The options with no flag given: every setting from the environment (a Lambda execution environment).
    package static var environmentOnly: CommonOptions {
        var options = CommonOptions()
        options.store = StoreOptions()
        options.database = nil
        options.databasePasswordFile = nil
        options.now = nil
        options.format = .json
        options.logLevel = nil
        options.logFormat = nil
        return options
    }

    /// The run's instant: `--now` (or the flag named `flag` that holds it), or the system clock read once here,
    /// at the edge.
    package func resolvedNow(flag: String = "--now") throws(JobError) -> Int64 {
        guard let now else { return Int64(Date().timeIntervalSince1970) }
        guard let instant = Timestamps.parse(now) else {
            throw .usage("\(flag): not an ISO 8601 instant with a zone (e.g. 2026-11-21T20:00:00Z): \(now)")
        }
        guard Timestamps.supportedRange.contains(instant) else {
            throw .usage("\(flag): \(now) is outside the supported range, \(Timestamps.supportedRangeText)")
        }
        return instant
    }

    /// Opens the store (a SQLite file or a PostgreSQL database, `postgres://…`), runs `body` with it and
    /// closes it, also when `body` fails.
    package func withStore<T>(
        _ config: ConfigResolver, mode: StoreOpenMode, job: String,
        _ body: (any JobStore) async throws(JobError) -> T
    ) async throws(JobError) -> T {
        try await StoreOpener.sqliteOrPostgres.with(
            config, flags: (database, databasePasswordFile), mode: mode, applicationName: job, body)
    }

    package func makeLogger(_ label: String, _ config: ConfigResolver) throws(JobError) -> Logger {
        var logger = Logger(label: label)
        if let raw = try config.raw(.logLevel, flag: logLevel) {
            guard let name = LogLevelName.parse(raw.value), let level = Logger.Level(rawValue: name) else {
                let message =
                    "\(raw.source): unknown log level \(raw.value) (\(LogLevelName.all.joined(separator: ", ")))"
                throw raw.source.hasPrefix("--") ? .usage(message) : .config(message)
            }
            logger.logLevel = level
        } else {
            logger.logLevel = Logger.Level(rawValue: ConfigKey.logLevel.defaultValue!)!
        }
        return logger
    }
}

/// Runs a job body, turning a ``JobError`` into a message on stderr and its sysexits code.
package func withExitCode(_ command: String, _ body: () async throws(JobError) -> Void) async throws {
    do {
        try await body()
    } catch {
        FileHandle.standardError.write(Data((JobLogging.errorLine(job: command, error) + "\n").utf8))
        throw ExitCode(error.exitCode)
    }
}

extension CommonOptions {
    /// Sets up logging to stderr (stdout carries results only) in the format asked for: text, or JSON lines.
    package func bootstrapLogging(_ config: ConfigResolver) throws(JobError) {
        var format = LogFormat(rawValue: ConfigKey.logFormat.defaultValue!)!
        if let raw = try config.raw(.logFormat, flag: logFormat) {
            guard let name = LogFormatName.parse(raw.value), let parsed = LogFormat(rawValue: name) else {
                let message = "\(raw.source): unknown log format \(raw.value) (text or json)"
                throw raw.source.hasPrefix("--") ? .usage(message) : .config(message)
            }
            format = parsed
        }
        JobLogging.bootstrap(format)
    }
}

/// How a scheduled job is watched: its metrics file and its heartbeat.
package struct ObservabilityOptions: ParsableArguments {
    @Option(name: .setting(.metricsFile), help: .setting(.metricsFile))
    package var metricsFile: String?
    @Option(name: .setting(.pingURL), help: .setting(.pingURL))
    package var pingURL: String?

    package init() {}
}

/// Provider flags shared by every job that delivers.
package struct DeliveryOptions: ParsableArguments {
    @Option(name: .setting(.apnsKeyFile), help: .setting(.apnsKeyFile))
    package var apnsKeyFile: String?
    @Option(name: .setting(.apnsKeyID), help: .setting(.apnsKeyID))
    package var apnsKeyID: String?
    @Option(name: .setting(.apnsTeamID), help: .setting(.apnsTeamID))
    package var apnsTeamID: String?
    @Option(name: .setting(.apnsTopic), help: .setting(.apnsTopic))
    package var apnsTopic: String?
    @Option(name: .setting(.apnsEndpoint), help: .setting(.apnsEndpoint))
    package var apnsEndpoint: String?
    @Option(name: .setting(.apnsSandboxEndpoint), help: .setting(.apnsSandboxEndpoint))
    package var apnsSandboxEndpoint: String?
    @Option(name: .setting(.fcmServiceAccountFile), help: .setting(.fcmServiceAccountFile))
    package var fcmServiceAccountFile: String?
    @Option(name: .setting(.fcmEndpoint), help: .setting(.fcmEndpoint))
    package var fcmEndpoint: String?
    @Option(name: .setting(.fcmAndroidChannelID), help: .setting(.fcmAndroidChannelID))
    package var fcmAndroidChannelID: String?
    @Option(name: .setting(.fcmAndroidWarningChannelID), help: .setting(.fcmAndroidWarningChannelID))
    package var fcmAndroidWarningChannelID: String?
    @Option(name: .setting(.caFile), help: .setting(.caFile))
    package var caFile: String?
    @Option(name: .setting(.retryBudgetSeconds), parsing: .unconditional, help: .setting(.retryBudgetSeconds))
    package var retryBudgetSeconds: Int?
    @Option(name: .setting(.deepLinkBase), help: .setting(.deepLinkBase))
    package var deepLinkBase: String?
    @Option(name: .setting(.iosBadge), help: .setting(.iosBadge))
    package var iosBadge: String?
    @Option(name: .setting(.apnsRate), parsing: .unconditional, help: .setting(.apnsRate))
    package var apnsRate: Int?
    @Option(name: .setting(.fcmRate), parsing: .unconditional, help: .setting(.fcmRate))
    package var fcmRate: Int?
    @Option(name: .setting(.outageShare), parsing: .unconditional, help: .setting(.outageShare))
    package var outageShare: Int?
    @Option(name: .setting(.outageMinDevices), parsing: .unconditional, help: .setting(.outageMinDevices))
    package var outageMinDevices: Int?
    @Option(name: .setting(.deadGuardShare), parsing: .unconditional, help: .setting(.deadGuardShare))
    package var deadGuardShare: Int?
    @Option(
        name: .setting(.deadGuardMinDelivered), parsing: .unconditional, help: .setting(.deadGuardMinDelivered))
    package var deadGuardMinDelivered: Int?

    package init() {}

    package func flags(validateOnly: Bool = false) -> DeliveryFlags {
        var flags = DeliveryFlags()
        flags.apnsKeyFile = apnsKeyFile
        flags.apnsKeyID = apnsKeyID
        flags.apnsTeamID = apnsTeamID
        flags.apnsTopic = apnsTopic
        flags.apnsEndpoint = apnsEndpoint
        flags.apnsSandboxEndpoint = apnsSandboxEndpoint
        flags.fcmServiceAccountFile = fcmServiceAccountFile
        flags.fcmEndpoint = fcmEndpoint
        flags.fcmAndroidChannelID = fcmAndroidChannelID
        flags.fcmAndroidWarningChannelID = fcmAndroidWarningChannelID
        flags.caFile = caFile
        flags.retryBudgetSeconds = retryBudgetSeconds
        flags.deepLinkBase = deepLinkBase
        flags.iosBadge = iosBadge
        flags.apnsRate = apnsRate
        flags.fcmRate = fcmRate
        flags.outageShare = outageShare
        flags.outageMinDevices = outageMinDevices
        flags.deadGuardShare = deadGuardShare
        flags.deadGuardMinDelivered = deadGuardMinDelivered
        flags.validateOnly = validateOnly
        return flags
    }
}

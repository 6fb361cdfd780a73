import ArgumentParser
import Foundation
import JobKit
import JobKitSQLite
import JobKitWiring
import Logging

/// Output formats of every job.
public enum OutputFormat: String, ExpressibleByArgument, CaseIterable, Sendable {
    case text, json
}

/// Where the store is.
public struct StoreOptions: ParsableArguments {
    @Option(
        name: .long,
        help: ArgumentHelp(
            "SQLite database file (or sqlite:///path), or a postgres:// URL; env PUSH_DATABASE_URL.",
            valueName: "path|url"))
    public var database: String?

    @Option(
        name: .long,
        help: ArgumentHelp(
            "File holding the PostgreSQL password; env PUSH_DATABASE_PASSWORD_FILE.",
            valueName: "path"))
    public var databasePasswordFile: String?

    public init() {}

    /// `pushctl backup`: copies the SQLite database these options name to `path`.
    public func backup(to path: String) throws(JobError) -> (source: String, copy: SQLiteBackup) {
        try JobStores.backup(
            ConfigResolver(environment: ProcessInfo.processInfo.environment),
            flags: (database, databasePasswordFile), to: path)
    }

    /// The shared options of a command that takes only these and `--now`.
    public func common(now: String?) -> CommonOptions {
        var common = CommonOptions.environmentOnly
        common.store = self
        common.now = now
        common.format = .text
        return common
    }
}

/// Options every job shares.
public struct CommonOptions: ParsableArguments {
    @OptionGroup public var store: StoreOptions
    public var database: String? {
        get { store.database }
        set { store.database = newValue }
    }
    public var databasePasswordFile: String? {
        get { store.databasePasswordFile }
        set { store.databasePasswordFile = newValue }
    }

    @Option(
        name: .long,
        help: ArgumentHelp(
            "The instant to evaluate, ISO 8601 (default: the system clock).",
            valueName: "iso8601"))
    public var now: String?

    @Option(name: .long, help: "Output format of results and the summary.")
    public var format: OutputFormat = .text

    @Option(name: .long, help: ArgumentHelp("Log level on stderr (default info).", valueName: "level"))
    public var logLevel: String?

    @Option(
        name: .long,
        help: ArgumentHelp(
            "Log format on stderr: text (default) or json (one object per line); env PUSH_LOG_FORMAT.",
            valueName: "format"))
    public var logFormat: String?

    public init() {}

    /// The options with no flag given: every setting from the environment (a Lambda execution environment).
    public static var environmentOnly: CommonOptions {
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
    public func resolvedNow(flag: String = "--now") throws(JobError) -> Int64 {
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
    public func withStore<T>(
        _ config: ConfigResolver, mode: StoreOpenMode, job: String,
        _ body: (any JobStore) async throws(JobError) -> T
    ) async throws(JobError) -> T {
        try await JobStores().with(
            config, flags: (database, databasePasswordFile), mode: mode, applicationName: job, body)
    }

    public func makeLogger(_ label: String, _ config: ConfigResolver) throws(JobError) -> Logger {
        var logger = Logger(label: label)
        if let raw = try config.raw(.logLevel, flag: logLevel) {
            guard let name = LogLevelName.parse(raw.value), let level = Logger.Level(rawValue: name) else {
                let message =
                    "\(raw.source): unknown log level \(raw.value) (\(LogLevelName.all.joined(separator: ", ")))"
                throw raw.source.hasPrefix("--") ? .usage(message) : .config(message)
            }
            logger.logLevel = level
        } else {
            logger.logLevel = .info
        }
        return logger
    }
}

/// Runs a job body, turning a ``JobError`` into a message on stderr and its sysexits code.
public func withExitCode(_ command: String, _ body: () async throws(JobError) -> Void) async throws {
    do {
        try await body()
    } catch {
        FileHandle.standardError.write(Data((JobLogging.errorLine(job: command, error) + "\n").utf8))
        throw ExitCode(error.exitCode)
    }
}

extension CommonOptions {
    /// Sets up logging to stderr (stdout carries results only) in the format asked for: text, or JSON lines.
    public func bootstrapLogging(_ config: ConfigResolver) throws(JobError) {
        var format = LogFormat.text
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
public struct ObservabilityOptions: ParsableArguments {
    @Option(
        help: ArgumentHelp(
            "Write the run's metrics to this file (Prometheus text format, replaced atomically; env PUSH_METRICS_FILE).",
            valueName: "path"))
    public var metricsFile: String?
    @Option(
        help: ArgumentHelp(
            "Heartbeat URL: POST URL/start, then URL on success or URL/fail, with the JSON summary (env PUSH_PING_URL).",
            valueName: "url"))
    public var pingURL: String?

    public init() {}
}

/// Provider flags shared by every job that delivers.
public struct DeliveryOptions: ParsableArguments {
    @Option(help: ArgumentHelp("APNs .p8 signing key (env PUSH_APNS_KEY_FILE).", valueName: "path")) public
        var apnsKeyFile: String?
    @Option(help: ArgumentHelp("APNs key id (env PUSH_APNS_KEY_ID).", valueName: "id")) public var apnsKeyID: String?
    @Option(help: ArgumentHelp("Apple team id (env PUSH_APNS_TEAM_ID).", valueName: "id")) public var apnsTeamID:
        String?
    @Option(help: ArgumentHelp("App bundle id, the apns-topic (env PUSH_APNS_TOPIC).", valueName: "topic")) public
        var apnsTopic: String?
    @Option(help: ArgumentHelp("APNs production endpoint override.", valueName: "url")) public var apnsEndpoint: String?
    @Option(help: ArgumentHelp("APNs sandbox endpoint override.", valueName: "url")) public var apnsSandboxEndpoint:
        String?
    @Option(help: ArgumentHelp("FCM service-account JSON (env PUSH_FCM_SERVICE_ACCOUNT_FILE).", valueName: "path"))
    public var fcmServiceAccountFile: String?
    @Option(help: ArgumentHelp("FCM endpoint override.", valueName: "url")) public var fcmEndpoint: String?
    @Option(
        help: ArgumentHelp(
            "Android notification channel id of the reminders (env PUSH_FCM_ANDROID_CHANNEL_ID; default diary_reminders).",
            valueName: "id"))
    public var fcmAndroidChannelID: String?
    @Option(
        help: ArgumentHelp(
            "Android notification channel id of the quota warnings (env PUSH_FCM_ANDROID_WARNING_CHANNEL_ID; default: the reminders' channel).",
            valueName: "id"))
    public var fcmAndroidWarningChannelID: String?
    @Option(help: ArgumentHelp("Extra trusted CA certificates, PEM (env PUSH_CA_FILE).", valueName: "path")) public
        var caFile: String?
    @Option(parsing: .unconditional, help: "Seconds a run may spend retrying transient provider errors (default 60).")
    public var retryBudgetSeconds: Int?
    @Option(help: ArgumentHelp("Base of deep links (default diary://).", valueName: "url")) public var deepLinkBase:
        String?
    @Option(
        help: ArgumentHelp(
            "The app icon's badge an iOS notification sets: a number (0 clears it) or none to leave it (env PUSH_IOS_BADGE; default 1).",
            valueName: "n|none"))
    public var iosBadge: String?
    @Option(
        parsing: .unconditional,
        help: ArgumentHelp("APNs requests per second at most (env PUSH_APNS_RATE; default 0: unpaced).", valueName: "n")
    )
    public var apnsRate: Int?
    @Option(
        parsing: .unconditional,
        help: ArgumentHelp(
            "FCM requests per second at most (env PUSH_FCM_RATE; default 9000; 0: unpaced).", valueName: "n"))
    public var fcmRate: Int?
    @Option(
        parsing: .unconditional,
        help: ArgumentHelp(
            "A provider is down (exit 69) when its transient answers leave more than this percent of its attempts pending (env PUSH_OUTAGE_SHARE; default 1).",
            valueName: "percent"))
    public var outageShare: Int?
    @Option(
        parsing: .unconditional,
        help: ArgumentHelp(
            "…and at least this many devices (env PUSH_OUTAGE_MIN_DEVICES; default 10).", valueName: "n"))
    public var outageMinDevices: Int?

    public init() {}

    public func flags(validateOnly: Bool = false) -> DeliveryFlags {
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
        flags.validateOnly = validateOnly
        return flags
    }
}

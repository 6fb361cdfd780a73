import ArgumentParser
import Foundation
import JobCLI
import JobKit
import Logging

struct TokenJanitorCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "token-janitor",
        abstract: "Keep device tokens truthful and the log tables bounded; report delivery health.",
        discussion:
            "Exit codes: 0 ok, 64 usage, 66 no database, 69 unavailable, 73 cannot write the report, 75 database locked (retry), 78 configuration.",
        version: JobKitVersion.current,
        subcommands: [Run.self, Report.self],
        defaultSubcommand: Run.self)
}

struct Run: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Deactivate stale tokens, probe FCM, apply retention (daily).")

    @OptionGroup(title: "Observability") var observability: ObservabilityOptions
    @OptionGroup var common: CommonOptions
    @OptionGroup(title: "Delivery (for --probe)") var delivery: DeliveryOptions
    @Flag(help: "Print what would change, with counts; change nothing.") var dryRun = false
    @Option(help: "Deactivate devices not seen for this many days (reason stale).") var staleDays = 90
    @Flag(
        help:
            "Ask FCM (validate_only) whether long-unseen FCM tokens are still registered; deactivate those that are not."
    )
    var probe = false
    @Option(help: "Probe FCM devices not seen for this many days.") var probeAfterDays = 30
    @Option(help: "At most this many probes per run.") var probeMax = 1_000
    @Option(help: "At most this many probes per second.") var probeRate = 50
    @Option(help: "Delete delivery records older than this many days.") var deliveryRetentionDays = 30
    @Option(help: "Delete notification log rows older than this many days whose period has ended (≥ 35).")
    var logRetentionDays = 400
    @Flag(
        help:
            "Apply retention row by row only: never drop a whole history partition (PostgreSQL; e.g. while an archive job still reads it)."
    )
    var keepPartitions = false
    @Flag(help: "Also delete device rows inactive for --purge-after-days (off by default: they are history).")
    var purge = false
    @Option(help: "Days a device must have been inactive before --purge deletes it.") var purgeAfterDays = 365
    @Option(help: "Rows per batch; each batch is one short transaction.") var batchSize = 1_000
    @Option(
        help: ArgumentHelp("Probe only this slice of the users' devices, e.g. 2/4 (env PUSH_SHARD).", valueName: "K/N"))
    var shard: String?

    /// The settings as JobKit knows them (``JanitorSetting``), by key: their ranges and their place in
    /// ``JanitorOptions`` are declared there, once for the command line and scheduled events alike.
    var settings: [String: JanitorSetting.Value] {
        [
            "dry_run": .flag(dryRun), "stale_days": .number(staleDays), "probe": .flag(probe),
            "probe_after_days": .number(probeAfterDays), "probe_max": .number(probeMax),
            "probe_rate": .number(probeRate), "delivery_retention_days": .number(deliveryRetentionDays),
            "log_retention_days": .number(logRetentionDays), "keep_partitions": .flag(keepPartitions),
            "purge": .flag(purge), "purge_after_days": .number(purgeAfterDays), "batch_size": .number(batchSize),
        ]
    }

    func options(now: Int64) throws(JobError) -> JanitorOptions {
        var options = JanitorOptions(now: now)
        try JanitorSetting.apply(settings, to: &options, name: \.flag)
        return options
    }

    func validate() throws {
        do {
            _ = try options(now: 0)
        } catch {
            throw ValidationError(error.message)
        }
    }

    func run() async throws {
        try await withExitCode("token-janitor") { () async throws(JobError) in
            let config = ConfigResolver(environment: ProcessInfo.processInfo.environment)
            try common.bootstrapLogging(config)
            let logger = try common.makeLogger("token-janitor", config)
            let now = try common.resolvedNow()
            let shard =
                try config.raw(.shard, flag: self.shard).map { raw throws(JobError) in
                    try Shard.parse(raw.value, source: raw.source)
                } ?? .all
            var providers = try DeliveryConfiguration.resolve(config, flags: delivery.flags(validateOnly: true))
            providers.apns = nil
            if probe && !dryRun {
                guard providers.fcm != nil else { throw .config("--probe needs FCM (PUSH_FCM_SERVICE_ACCOUNT_FILE)") }
                try await providers.checkFiles()
            }
            // A dry run is an operator's question: it neither pings nor replaces the scheduled run's metrics.
            let observers = dryRun ? RunObservers() : try observability.observers(config, logger: logger)
            _ = try await observers.observe(
                job: "token-janitor", now: now, logger: logger,
                metricsText: { summary, code, seconds, previous in
                    MetricsFile.janitorText(
                        summary, job: "token-janitor", now: now, exitCode: code, durationSeconds: seconds,
                        previousLastSuccess: previous)
                }
            ) { () async throws(JobError) -> JanitorSummary? in
                try await common.withStore(config, mode: dryRun ? .readOnly : .readWrite, job: "token-janitor") {
                    store throws(JobError) -> JanitorSummary in
                    var options = try options(now: now)
                    options.shard = shard
                    let handler = TokenJanitorHandler.make(providers, store: store, logger: logger, base: options)
                    let summary = try await handler.handleOnce(
                        ScheduledEvent(time: now), context: InvocationContext(now: now))
                    print(common.format == .json ? summary.json : summary.text)
                    return summary
                }
            }
        }
    }
}

struct Report: AsyncParsableCommand {
    static let configuration = CommandConfiguration(abstract: "The delivery-health report of the last days.")

    enum Format: String, ExpressibleByArgument { case text, json, html }

    @Option(
        name: .long,
        help: ArgumentHelp("SQLite database file or postgres:// URL (env PUSH_DATABASE_URL).", valueName: "path|url"))
    var database: String?
    @Option(
        name: .long,
        help: ArgumentHelp("File holding the PostgreSQL password (env PUSH_DATABASE_PASSWORD_FILE).", valueName: "path")
    )
    var databasePasswordFile: String?
    @Option(help: ArgumentHelp("The report's end instant, ISO 8601 (default: the clock).", valueName: "iso8601"))
    var now: String?
    @Option(help: "How many days back.") var days = 30
    @Option(help: "text, json or html (one self-contained file with charts).") var format: Format = .text
    @Option(help: ArgumentHelp("Write to this file instead of stdout.", valueName: "path")) var output: String?

    func validate() throws {
        guard (1...400).contains(days) else { throw ValidationError("--days must be within 1…400") }
    }

    func run() async throws {
        try await withExitCode("token-janitor report") { () async throws(JobError) in
            var common = CommonOptions()
            common.database = database
            common.databasePasswordFile = databasePasswordFile
            common.now = now
            let config = ConfigResolver(environment: ProcessInfo.processInfo.environment)
            let end = try common.resolvedNow()
            try await common.withStore(config, mode: .readOnly, job: "token-janitor") { store throws(JobError) in
                let catalog =
                    try config.string(.copyCatalog, flag: nil).map { path throws(JobError) in
                        try CopyCatalog.load(path: path)
                    } ?? .builtIn
                let report = try await store.fullHealthReport(
                    from: end - Int64(days) * 86_400, to: end, catalog: catalog)
                let text =
                    switch format {
                    case .text: report.text
                    case .json: report.json
                    case .html: report.html
                    }
                if let output {
                    guard FileManager.default.createFile(atPath: output, contents: Data((text + "\n").utf8)) else {
                        throw .cantCreate("cannot write the report to \(output)")
                    }
                } else {
                    print(text)
                }
            }
        }
    }
}

/// The executable: the daily cron job and the report from the command line, or a Lambda custom runtime
/// (the daily run) when the platform says so.
@main
enum TokenJanitorMain {
    static func main() async {
        guard LambdaAdapter.runtimeAPI != nil else { return await TokenJanitorCommand.main() }
        await LambdaAdapter.serve(job: TokenJanitor.jobName) { config, store, logger throws(JobError) in
            try await TokenJanitorHandler.make(config, store: store, logger: logger)
        }
    }
}

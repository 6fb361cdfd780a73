import ArgumentParser
import Foundation
import JobKit
import JobKitDelivery
import JobKitWiring

extension CommonOptions {
    /// Runs one invocation of `job`: logging set up as asked, the settings (the environment, these flags on
    /// top) and the instant resolved, then `body`; a ``JobError`` ends the process with its message and
    /// sysexits code.
    package func run(
        _ job: String, observability: ObservabilityOptions? = nil, delivery: DeliveryOptions? = nil,
        _ body: (JobInvocation) async throws(JobError) -> Void
    ) async throws {
        try await withExitCode(job) { () async throws(JobError) in
            let config = ConfigResolver(environment: ProcessInfo.processInfo.environment)
            try bootstrapLogging(config)
            var invocation = JobInvocation(
                job: job, config: config, logger: try makeLogger(job, config), now: try resolvedNow())
            invocation.database = database
            invocation.databasePasswordFile = databasePasswordFile
            invocation.json = format == .json
            invocation.metricsFile = observability?.metricsFile
            invocation.pingURL = observability?.pingURL
            invocation.delivery = delivery?.flags() ?? DeliveryFlags()
            invocation.stopOnSignals = true
            try await body(invocation)
        }
    }
}

/// What each scheduled job's run takes besides its own flags (`diary-reminder`, `token-janitor run`): how it is
/// watched, the options every job shares, and delivery; declared once, in the order its help lists them.
package struct ScheduledJobOptions: ParsableArguments {
    @OptionGroup(title: "Observability") package var observability: ObservabilityOptions
    @OptionGroup package var common: CommonOptions
    @OptionGroup(title: "Delivery") package var delivery: DeliveryOptions

    package init() {}

    /// ``CommonOptions/run(_:observability:delivery:_:)`` with these options.
    package func run(_ job: String, _ body: (JobInvocation) async throws(JobError) -> Void) async throws {
        try await common.run(job, observability: observability, delivery: delivery, body)
    }
}

/// `diary-reminder`'s own flags. Its numbers, like every job's, are parsed `.unconditional`: `--early-minutes -1`
/// is then checked against the range, as `--early-minutes=-1` is, instead of being a "missing value".
package struct ReminderOptions: ParsableArguments {
    @Flag(name: .long, help: "Decide and print what would be sent; claim, send and write nothing.")
    package var dryRun = false
    @Option(
        name: .long,
        help: ArgumentHelp("Explain each rule for this user at --now, and the verdict.", valueName: "user-id"))
    package var explain: String?
    @Option(
        name: .long,
        help: ArgumentHelp(
            "With --explain: explain that local date's reminder, at the user's slot that day (their zone and time), instead of at --now.",
            valueName: "YYYY-MM-DD"))
    package var localDate: String?
    @Option(name: .setting(.earlyMinutes), parsing: .unconditional, help: .setting(.earlyMinutes))
    package var earlyMinutes: Int?
    @Option(name: .setting(.catchUpMinutes), parsing: .unconditional, help: .setting(.catchUpMinutes))
    package var catchUpMinutes: Int?
    @Option(name: .setting(.claimLeaseMinutes), parsing: .unconditional, help: .setting(.claimLeaseMinutes))
    package var claimLeaseMinutes: Int?
    @Option(name: .setting(.pauseAfterIgnored), parsing: .unconditional, help: .setting(.pauseAfterIgnored))
    package var pauseAfterIgnored: Int?
    @Option(name: .setting(.copyCatalog), help: .setting(.copyCatalog))
    package var copyCatalog: String?
    @Option(name: .setting(.outbox), help: .setting(.outbox))
    package var outbox: String?
    @Option(name: .setting(.shard), help: .setting(.shard))
    package var shard: String?
    @Flag(
        name: .long,
        help:
            "A dry run that asks FCM to validate every token and payload (validate_only); nothing is delivered or claimed."
    )
    package var validateOnly = false

    package init() {}

    package var request: DiaryReminderRequest {
        var request = DiaryReminderRequest()
        request.explain = explain
        request.localDate = localDate
        request.dryRun = dryRun
        request.validateOnly = validateOnly
        request.outbox = outbox
        request.earlyMinutes = earlyMinutes
        request.catchUpMinutes = catchUpMinutes
        request.claimLeaseMinutes = claimLeaseMinutes
        request.pauseAfterIgnored = pauseAfterIgnored
        request.shard = shard
        request.copyCatalog = copyCatalog
        return request
    }
}

/// `content-limit-hook`'s own flags: the event, and what to do with it.
package struct HookOptions: ParsableArguments {
    @Option(help: "User id.") package var user: String?
    // `.unconditional`: `--used -3` is a negative count (65, as `--used=-3`), not a missing value (64), and
    // `--limit -1` the documented "unlimited".
    @Option(parsing: .unconditional, help: "Items used in the current period, this write included.")
    package var used: Int?
    @Option(parsing: .unconditional, help: "The plan's limit (missing or ≤ 0: unlimited, nothing to do).")
    package var limit: Int?
    @Option(help: "The quota's period (default monthly).") public var period: LimitPeriod?
    @Option(
        help: ArgumentHelp("Read one JSON event from this file (- for stdin) instead of the flags.", valueName: "file"))
    package var event: String?
    @Flag(help: "Decide and print; write and send nothing.") package var dryRun = false
    @Flag(help: "Print each decision step (implies --dry-run).") public var explain = false
    @Option(name: .setting(.outbox), help: .setting(.outbox))
    package var outbox: String?

    package init() {}

    package func validate() throws {
        if event != nil {
            guard user == nil && used == nil && limit == nil && period == nil else {
                throw ValidationError("give either --event or --user/--used/--limit/--period, not both")
            }
        } else {
            guard user != nil, used != nil else {
                throw ValidationError("--user and --used are required (or --event FILE)")
            }
        }
    }

    /// The request, with the event read from the flags or from `--event`.
    package func request() throws(JobError) -> ContentLimitHookRequest {
        let input =
            if let event { try ContentLimitEvent.read(path: event) } else {
                try ContentLimitEvent(userID: user ?? "", used: used ?? 0, limit: limit, period: period ?? .monthly)
            }
        var request = ContentLimitHookRequest(event: input)
        request.dryRun = dryRun
        request.explain = explain
        request.outbox = outbox
        return request
    }
}

extension LimitPeriod: ExpressibleByArgument {}
extension Platform: ExpressibleByArgument {}
extension APNsEnvironment: ExpressibleByArgument {}
extension Provider: ExpressibleByArgument {
    public static var allValueStrings: [String] { all.map(\.rawValue) }
}
extension HealthReport.Format: ExpressibleByArgument {}

/// `token-janitor run`'s own flags; their defaults are ``JanitorOptions``' and their ranges ``JanitorSetting``'s.
package struct JanitorRunOptions: ParsableArguments {
    private static let defaults = JanitorOptions(now: 0)

    @Flag(help: "Print what would change, with counts; change nothing.") package var dryRun = false
    @Option(parsing: .unconditional, help: "Deactivate devices not seen for this many days (reason stale).")
    package var staleDays = defaults.staleDays
    @Flag(
        help:
            "Ask FCM (validate_only, with the Delivery options' FCM settings) whether long-unseen FCM tokens are still registered; deactivate those that are not."
    )
    package var probe = false
    @Option(parsing: .unconditional, help: "Probe FCM devices not seen for this many days.")
    package var probeAfterDays = defaults.probeAfterDays
    @Option(parsing: .unconditional, help: "At most this many probes per run.")
    package var probeMax = defaults.probeMax
    @Option(parsing: .unconditional, help: "At most this many probes per second.")
    package var probeRate = defaults.probeRate
    @Option(parsing: .unconditional, help: "Delete delivery records older than this many days.")
    package var deliveryRetentionDays = defaults.deliveryRetentionDays
    @Option(
        parsing: .unconditional,
        help: "Delete notification log rows older than this many days whose period has ended (≥ 35).")
    package var logRetentionDays = defaults.logRetentionDays
    @Option(
        parsing: .unconditional,
        help: "Delete run records (job_runs) older than this many days, except each job's last run.")
    package var runRetentionDays = defaults.runRetentionDays
    @Flag(
        help:
            "Apply retention row by row only: never drop a whole history partition (PostgreSQL; e.g. while an archive job still reads it)."
    )
    package var keepPartitions = false
    @Flag(help: "Also delete device rows inactive for --purge-after-days (off by default: they are history).")
    package var purge = false
    @Option(parsing: .unconditional, help: "Days a device must have been inactive before --purge deletes it.")
    package var purgeAfterDays = defaults.purgeAfterDays
    @Option(parsing: .unconditional, help: "Rows per batch; each batch is one short transaction.")
    package var batchSize = defaults.batchSize
    @Option(name: .setting(.shard), help: .setting(.shard))
    package var shard: String?

    package init() {}

    /// The settings by ``JanitorSetting`` key, checked and applied by JobKit for flags and scheduled events alike.
    package var settings: [String: JanitorSetting.Value] {
        [
            "dry_run": .flag(dryRun), "stale_days": .number(staleDays), "probe": .flag(probe),
            "probe_after_days": .number(probeAfterDays), "probe_max": .number(probeMax),
            "probe_rate": .number(probeRate), "delivery_retention_days": .number(deliveryRetentionDays),
            "log_retention_days": .number(logRetentionDays), "run_retention_days": .number(runRetentionDays),
            "keep_partitions": .flag(keepPartitions),
            "purge": .flag(purge), "purge_after_days": .number(purgeAfterDays), "batch_size": .number(batchSize),
        ]
    }

    package func validate() throws {
        var options = JanitorOptions(now: 0)
        do {
            try JanitorSetting.apply(settings, to: &options, name: \.flag)
        } catch {
            throw ValidationError(error.message)
        }
    }
}

import Foundation
import JobKit
import JobKitDelivery
import JobKitPostgres
import JobKitSQLite
import Logging

/// One run of a job as an operator or cron asks for it: the settings (`PUSH_*` through a ``ConfigResolver``,
/// flags on top), the instant, where the results go, and how the run is observed. The command-line
/// executables only parse their flags into one of these and call a job below; a Swift program that depends
/// on JobKit calls the same functions and gets the same behaviour, output and errors (whose
/// ``JobError/exitCode`` is the CLI's):
///
/// ```swift
/// var run = JobInvocation(job: DiaryReminderRunner.jobName, config: ConfigResolver(environment: environment),
///                         logger: logger, now: now)
/// var request = DiaryReminderRequest()
/// request.explain = "u1"                      // "why not that user?"
/// try await run.diaryReminder(request)        // prints the explanation to run.output
/// ```
public struct JobInvocation: Sendable {
    public var job: String
    public var config: ConfigResolver
    public var logger: Logger
    /// The instant the run evaluates (`--now`).
    public var now: Int64
    /// `--database` and `--database-password-file`; `nil`: the `PUSH_DATABASE_*` settings.
    public var database: String?
    public var databasePasswordFile: String?
    /// Results and summaries as JSON (one object) rather than text.
    public var json = false
    /// Where results, summaries and a dry run's lines go.
    public var output: any LineSink = StandardOutput()
    /// `--metrics-file` and `--ping-url` over `PUSH_METRICS_FILE` and `PUSH_PING_URL`.
    public var metricsFile: String?
    public var pingURL: String?
    /// Provider flags over the `PUSH_APNS_*`/`PUSH_FCM_*` settings.
    public var delivery = DeliveryFlags()
    /// Whether SIGTERM and SIGINT stop a reminder run, or a hook invocation that sends a warning, cleanly
    /// (``StopRequest/signals(logger:)``): set by the command-line executables, whose process is the run's; a
    /// program that embeds JobKit keeps its signals.
    public var stopOnSignals = false

    public init(job: String, config: ConfigResolver, logger: Logger, now: Int64) {
        self.job = job
        self.config = config
        self.logger = logger
        self.now = now
    }

    /// Opens the store, runs `body` with it and closes it, also when `body` fails.
    package func withStore<T>(mode: StoreOpenMode, _ body: (any JobStore) async throws(JobError) -> T)
        async throws(JobError) -> T
    {
        try await StoreOpener.sqliteOrPostgres.with(
            config, flags: (database, databasePasswordFile), mode: mode, applicationName: job, body)
    }

    /// The metrics file and heartbeat of a scheduled run; none for an operator's question (a dry run, an
    /// explanation), which must not replace the scheduled run's metrics or ping.
    func observers(question: Bool) throws(JobError) -> RunObservers {
        question
            ? RunObservers()
            : try RunObservers(
                config, metricsFile: metricsFile, pingURL: pingURL, caFile: delivery.caFile, logger: logger)
    }

    func write(_ summary: some JobSummary) { output.write(json ? summary.json : summary.text) }
}

/// What a `diary-reminder` run asks for beyond the shared settings; `nil`: the setting's environment value
/// or default.
public struct DiaryReminderRequest: Sendable {
    /// Explain each rule for this user and the verdict, instead of running.
    public var explain: String?
    /// With ``explain``: the user's local date (`YYYY-MM-DD`) whose reminder to explain, at that day's slot.
    public var localDate: String?
    public var dryRun = false
    /// A dry run in which FCM validates each token and payload.
    public var validateOnly = false
    public var outbox: String?
    public var earlyMinutes: Int?
    public var catchUpMinutes: Int?
    public var claimLeaseMinutes: Int?
    public var pauseAfterIgnored: Int?
    public var shard: String?
    public var copyCatalog: String?

    public init() {}
}

extension JobInvocation {
    /// A reminder run, a dry run or an explanation: prints the summary (or the explanation) and returns the
    /// summary. Throws the run's error after the metrics and the ping, also when due work was left
    /// undelivered by a provider (77 or 69).
    @discardableResult
    public func diaryReminder(_ request: DiaryReminderRequest) async throws(JobError) -> RunSummary? {
        if let userID = request.explain, let problem = UserProfile.idProblem(userID) {
            throw .usage("--explain: \(problem)")
        }
        let localDate = try request.localDate.map { (text: String) throws(JobError) -> LocalDate in
            guard request.explain != nil else {
                throw .usage("--local-date explains a user's day: give --explain USER with it")
            }
            guard let date = LocalDate(text) else { throw .usage("--local-date: not a date YYYY-MM-DD: \(text)") }
            return date
        }
        var settings = try DiaryReminderHandler.Settings.resolve(
            config, earlyMinutes: request.earlyMinutes, catchUpMinutes: request.catchUpMinutes,
            claimLeaseMinutes: request.claimLeaseMinutes, pauseAfterIgnored: request.pauseAfterIgnored,
            shard: request.shard)
        let catalog = try CopyCatalog.resolve(config, flag: request.copyCatalog)
        let mode = DeliveryMode.chosen(
            dryRun: request.dryRun, explain: request.explain != nil, validateOnly: request.validateOnly,
            outbox: try config.string(.outbox, flag: request.outbox), sink: output, json: json)
        settings.dryRun = mode.isQuestion
        var flags = delivery
        flags.validateOnly = request.validateOnly
        let deliveryConfiguration = try DeliveryConfiguration.resolve(config, flags: flags).sharing(settings.shard)
        try await mode.check(deliveryConfiguration)
        let (now, logger) = (self.now, self.logger)
        // A real run that is stopped finishes and records what is on its way; a question is simply ended.
        var context = InvocationContext(now: now)
        if stopOnSignals && !mode.isQuestion { context.stop = StopRequest.signals(logger: logger) }
        return try await observers(question: mode.isQuestion).observe(job: job, now: now, logger: logger) {
            () async throws(JobError) -> RunSummary? in
            try await withStore(mode: mode.storeMode) { store throws(JobError) -> RunSummary? in
                let sender = try await deliveryConfiguration.sender(for: mode, credentials: store, logger: logger)
                let handler = DiaryReminderHandler(
                    runner: DiaryReminderRunner(store: store, sender: sender, catalog: catalog, logger: logger),
                    settings: settings)
                if let userID = request.explain {
                    let explanation = try await handler.closing { handler throws(JobError) in
                        try await handler.runner.explain(
                            userID: userID, options: handler.options(now: now), localDate: localDate)
                    }
                    output.write(json ? explanation.json : explanation.text)
                    return nil
                }
                let summary = try await handler.handleOnce(ScheduledEvent(time: now), context: context)
                write(summary)
                return summary
            }
        }
    }
}

/// What a `content-limit-hook` invocation asks for beyond the shared settings.
public struct ContentLimitHookRequest: Sendable {
    public var event: ContentLimitEvent
    public var dryRun = false
    /// Each decision step printed (implies a dry run).
    public var explain = false
    public var outbox: String?

    public init(event: ContentLimitEvent) { self.event = event }
}

extension JobInvocation {
    /// One write's check: prints the summary, then fails with the error of a warning a provider left
    /// undelivered (77 or 69). Nothing is opened for an unlimited plan, and provider settings are read only
    /// when the usage warns.
    @discardableResult
    public func contentLimitHook(_ request: ContentLimitHookRequest) async throws(JobError) -> HookSummary {
        let readOnly = request.dryRun || request.explain
        let options = ContentLimitHook.Options(now: now, dryRun: readOnly, explain: request.explain)
        func report(_ summary: HookSummary) {
            if request.explain && !json {
                for step in summary.steps { output.write("  \(LineText.escapingControls(step))") }
            }
            write(summary)
        }
        if let summary = ContentLimitHook.summaryWithoutStore(request.event, options: options) {
            report(summary)
            return summary
        }
        // Below 90 % nothing is sent, so provider settings are neither read nor checked — the same as on the
        // quiet path of the content-limit-hook front (a diary-reminder run checks them every 15 min).
        let warns = ContentLimitRule.threshold(used: request.event.used, limit: request.event.limit) != nil
        let deliveryConfiguration =
            warns ? try DeliveryConfiguration.resolve(config, flags: delivery) : DeliveryConfiguration()
        let outbox = try config.string(.outbox, flag: request.outbox)
        if !readOnly && warns { try deliveryConfiguration.requireDelivery(outbox: outbox) }
        let logger = self.logger
        return try await withStore(mode: readOnly ? .readOnly : .readWrite) { store throws(JobError) in
            let handler = ContentLimitHookHandler.make(
                config, delivery: deliveryConfiguration, outbox: outbox, store: store,
                logger: logger, dryRun: readOnly, explain: request.explain)
            // A warning is probably sent: load the keys and trust roots while the store claims it.
            if warns && !readOnly && outbox == nil { await handler.senders.prepare() }
            // A warning on its way is finished and recorded when the process is asked to stop (SIGTERM).
            var context = InvocationContext(now: now)
            if stopOnSignals && warns && !readOnly {
                context.stop = StopRequest.signals(
                    logger: logger, effect: "the warning is finished and recorded; a wait for the 90 % one ends")
            }
            let summary = try await handler.handleOnce(request.event, context: context)
            report(summary)
            if let failure = summary.failure { throw failure }
            return summary
        }
    }
}

extension JobInvocation {
    /// The daily janitor run with `settings` (``JanitorSetting`` keys; a missing key keeps its default) and
    /// the devices of `shard` (`nil`: `PUSH_SHARD`, else all): prints the summary and returns it.
    @discardableResult
    public func tokenJanitor(_ settings: [String: JanitorSetting.Value], shard: String? = nil)
        async throws(JobError) -> JanitorSummary?
    {
        var options = JanitorOptions(now: now)
        try JanitorSetting.apply(settings, to: &options, name: \.flag)
        options.shard =
            try config.raw(.shard, flag: shard).map { raw throws(JobError) in
                try Shard.parse(raw.value, source: raw.source)
            } ?? .all
        var flags = delivery
        flags.validateOnly = true
        var providers = try DeliveryConfiguration.resolve(config, flags: flags)
        providers.apns = nil
        if options.probe && !options.dryRun {
            try providers.requireFCMForProbes()
            try await providers.checkFiles()
        }
        let (now, logger, base) = (self.now, self.logger, options)
        return try await observers(question: options.dryRun).observe(job: job, now: now, logger: logger) {
            () async throws(JobError) -> JanitorSummary? in
            try await withStore(mode: base.dryRun ? .readOnly : .readWrite) { store throws(JobError) in
                let handler = TokenJanitorHandler.make(providers, store: store, logger: logger, base: base)
                let summary = try await handler.handleOnce(
                    ScheduledEvent(time: now), context: InvocationContext(now: now))
                write(summary)
                return summary
            }
        }
    }

    /// The delivery-health report of the `days` before ``now``, written to `path` (`nil`: ``output``).
    public func healthReport(days: Int, format: HealthReport.Format, path: String?) async throws(JobError) {
        guard (1...400).contains(days) else { throw .usage("--days must be within 1…400") }
        if path?.isEmpty == true { throw .usage("--output: empty") }
        let catalog = try CopyCatalog.resolve(config)
        let (now, output) = (self.now, self.output)
        try await withStore(mode: .readOnly) { store throws(JobError) in
            let report = try await store.fullHealthReport(from: now - Int64(days) * 86_400, to: now, catalog: catalog)
            let text = report.rendered(format)
            if let path {
                // Whole or not at all: a reader of the file (a web server, a mail job) never sees half a report.
                do { try AtomicFile.replace(path, with: Data((text + "\n").utf8)) } catch {
                    throw .cantCreate("cannot write the report to \(path): \(systemReason(error))")
                }
            } else {
                output.write(text)
            }
        }
    }
}

extension ContentLimitEvent {
    /// One JSON event (``parse(json:)``) read from a file, or from standard input for `-`.
    public static func read(path: String) throws(JobError) -> ContentLimitEvent {
        if path == "-" {
            let data: Data
            do { data = try FileDescriptorRead.toEnd(STDIN_FILENO) } catch {
                throw .noInput("cannot read the event from standard input: \(error.message)")
            }
            return try parse(json: data)
        }
        return try parse(json: readInputFile(path, what: "the event file"))
    }
}

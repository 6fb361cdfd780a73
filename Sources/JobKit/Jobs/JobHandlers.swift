import Foundation
import Logging

/// `diary-reminder` as a handler of scheduled events.
public struct DiaryReminderHandler: JobHandler {
    package struct Settings: Sendable {
        package var rule: DueRule = .default
        package var claimLeaseSeconds = Int64(ConfigKey.claimLeaseMinutes.number!.default) * 60
        package var shard: Shard = .all
        package var pause: ReminderPause = .default
        package var pageSize = 1000
        /// Decide only: claim, send and write nothing (the sender prints or validates).
        package var dryRun = false
        package var deadlines = DeadlinePolicy()
        package init() {}
    }

    package let runner: DiaryReminderRunner
    package let settings: Settings

    package init(runner: DiaryReminderRunner, settings: Settings) {
        self.runner = runner
        self.settings = settings
    }

    /// The run options at `now`, before any deadline.
    package func options(now: Int64) -> ReminderRunOptions {
        var options = ReminderRunOptions(now: now, rule: settings.rule, dryRun: settings.dryRun)
        options.claimLeaseSeconds = settings.claimLeaseSeconds
        options.shard = settings.shard
        options.pause = settings.pause
        options.pageSize = settings.pageSize
        return options
    }

    public func handle(_ event: ScheduledEvent, context: InvocationContext) async throws(JobError) -> RunSummary {
        try event.checkDetail(known: [], job: DiaryReminderRunner.jobName)
        var options = options(now: event.time)
        // A scheduled event delivered long after its time (asynchronous invocations are retried for hours)
        // would remind people at an hour they did not choose: past the catch-up window it does nothing, and
        // the runs on schedule catch up.
        if context.now - event.time >= settings.rule.catchUp {
            runner.logger.warning(
                "stale scheduled event: nothing done",
                metadata: [
                    "event_time": "\(Timestamps.format(event.time))", "received": "\(Timestamps.format(context.now))",
                ])
            var summary = RunSummary(
                job: DiaryReminderRunner.jobName, runID: options.runID, now: event.time,
                dryRun: settings.dryRun)
            summary.notRun =
                "stale event: scheduled \(Timestamps.format(event.time)), received \(Timestamps.format(context.now))"
            return summary
        }
        if let deadline = context.deadline {
            options.stopClaimingAt = deadline - settings.deadlines.claimReserve
            options.finishBy = deadline - settings.deadlines.reportReserve
        }
        options.stop = context.stop
        await runner.sender.beginRun(finishBy: context.deadline.map { $0 - settings.deadlines.recordReserve })
        return try await runner.run(options)
    }
}

/// `content-limit-hook` as a handler of write events.
public struct ContentLimitHookHandler: JobHandler {
    package let hook: ContentLimitHook
    package let senders: LazySender
    package var dryRun = false
    package var explain = false
    package var deadlines = DeadlinePolicy()

    package init(hook: ContentLimitHook, senders: LazySender, dryRun: Bool = false, explain: Bool = false) {
        self.hook = hook
        self.senders = senders
        self.dryRun = dryRun
        self.explain = explain
    }

    public func handle(_ event: ContentLimitEvent, context: InvocationContext) async throws(JobError) -> HookSummary {
        await senders.beginRun(finishBy: context.deadline.map { $0 - deadlines.recordReserve })
        var options = ContentLimitHook.Options(now: context.now, dryRun: dryRun || explain, explain: explain)
        if let requestID = context.requestID { options.runID = requestID }
        options.finishBy = context.deadline.map { $0 - deadlines.reportReserve }
        options.stop = context.stop
        return try await hook.handle(event, options: options)
    }
}

/// `token-janitor` as a handler of scheduled events; `detail` may set any option (`stale_days`, `probe`, …).
public struct TokenJanitorHandler: JobHandler {
    package let janitor: TokenJanitor
    package let senders: LazySender
    /// The options every run starts from (its `now` is replaced by the event's time).
    package let base: JanitorOptions
    package var deadlines = DeadlinePolicy()

    package init(janitor: TokenJanitor, senders: LazySender, base: JanitorOptions) {
        self.janitor = janitor
        self.senders = senders
        self.base = base
    }

    package static var detailKeys: Set<String> { Set(JanitorSetting.all.map(\.key)) }

    public func handle(_ event: ScheduledEvent, context: InvocationContext) async throws(JobError) -> JanitorSummary {
        try event.checkDetail(known: Self.detailKeys, job: TokenJanitor.jobName)
        var options = base
        options.now = event.time
        options.runID = RunID.make()
        var values: [String: JanitorSetting.Value] = [:]
        for (key, value) in event.detail {
            values[key] =
                switch value {
                case .int(let number): .number(number)
                case .bool(let flag): .flag(flag)
                default: .other
                }
        }
        do {
            try JanitorSetting.apply(values, to: &options) { "event: detail.\($0.key)" }
        } catch {
            throw .dataError(error.message)
        }
        await senders.beginRun(finishBy: context.deadline.map { $0 - deadlines.recordReserve })
        return try await janitor.run(options)
    }
}

extension DiaryReminderHandler {
    /// Closes the provider connections.
    public func shutdown() async { await runner.sender.shutdown() }
}

extension ContentLimitHookHandler {
    /// Closes the provider connections, if a warning ever opened them.
    public func shutdown() async { await senders.shutdown() }
}

extension TokenJanitorHandler {
    /// Closes the provider connections, if a probe ever opened them.
    public func shutdown() async { await senders.shutdown() }
}

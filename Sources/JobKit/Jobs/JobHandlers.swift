import Foundation
import Logging

/// What a handler knows about the invocation it serves.
public struct InvocationContext: Sendable {
    /// The clock when the invocation arrived (or `--now`): the instant of events that carry none.
    public var now: Int64
    /// When the platform ends the invocation (Lambda's `Lambda-Runtime-Deadline-Ms`); `nil` from cron.
    public var deadline: ContinuousClock.Instant?
    /// The platform's request id, for logs.
    public var requestID: String?
    /// A request to end the run early and cleanly (a signal to the process, from cron's side); `nil`: none can come.
    public var stop: StopRequest?

    public init(
        now: Int64, deadline: ContinuousClock.Instant? = nil, requestID: String? = nil, stop: StopRequest? = nil
    ) {
        self.now = now
        self.deadline = deadline
        self.requestID = requestID
        self.stop = stop
    }
}

/// A job as a function of an event: `(Event, Context) async throws -> Summary`. The cron executables and the
/// Lambda runtime loop are thin adapters over the same handler values, built once and reused for every
/// invocation (store, provider connections and credentials stay warm).
public protocol JobHandler: Sendable {
    associatedtype Event: Sendable
    associatedtype Summary: JobSummary
    func handle(_ event: Event, context: InvocationContext) async throws(JobError) -> Summary
    /// Closes what the handler opened (provider connections); the store is its owner's to close.
    func shutdown() async
}

extension JobHandler {
    /// Handles one event, then closes what the handler opened, also when handling fails: a command's single run.
    public func handleOnce(_ event: Event, context: InvocationContext) async throws(JobError) -> Summary {
        try await closing { handler throws(JobError) in try await handler.handle(event, context: context) }
    }

    /// Runs `body` with the handler, then closes what the handler opened, also when `body` fails: a command's
    /// single use of it (a run, an explanation).
    public func closing<T>(_ body: (Self) async throws(JobError) -> T) async throws(JobError) -> T {
        let result: T
        do throws(JobError) {
            result = try await body(self)
        } catch {
            await shutdown()
            throw error
        }
        await shutdown()
        return result
    }
}

/// A job's account of one run, as one JSON line (the Lambda response) or one human-readable line.
public protocol JobSummary: Sendable {
    var json: String { get }
    var text: String { get }
    /// Due work a provider left undelivered: a run with any fails (77 or 69) after printing its summary.
    var troubles: [ProviderTrouble] { get }
    /// The error the run ends with after doing all it could and printing its summary; nil when it left no
    /// due work.
    var failure: JobError? { get }
    /// How long the run took, in milliseconds.
    var durationMs: Int { get }
}

extension JobSummary {
    /// Credentials refused (77) or a provider unavailable (69); nil when nothing due was left for a provider
    /// reason.
    public var failure: JobError? { ProviderTrouble.failure(troubles) }

    /// The run's `job_runs.outcome`: `failed` for a run that ends with an error, the summary's ``failure``
    /// (due work left: 77, 69, 75) or `channelFailure` (the outbox could not take what was sent), as its exit
    /// code says; `ok` otherwise.
    public func recordedOutcome(channelFailure: JobError? = nil) -> RunOutcome {
        failure == nil && channelFailure == nil ? .ok : .failed
    }
}

extension RunJournal {
    /// Journals a run as `running` before it claims or changes anything. Its end replaces the row (the same id);
    /// a run killed outright (SIGKILL, out of memory, the host going down) cannot record its end, and this row is
    /// what the health report then shows of it.
    func recordRunStart(id: String, job: String, runAt: Int64, summary: some JobSummary) async throws(JobError) {
        try await recordRun(
            id: id, job: job, runAt: runAt, durationMs: nil, outcome: .running, summaryJSON: summary.json)
    }

    /// Ends as `failed` each earlier run of `job` that has recorded no end though its claims' lease
    /// (`leaseSeconds` after its instant) is out, and says so in an error line each: a run records its last answer
    /// before then (``Deadline/toRecord(claimLeaseSeconds:finishBy:on:)``), so such a run was killed or lost, and
    /// the process that ran it could tell nobody. Best effort, like the run's other upkeep: a failure is logged and
    /// the run goes on. Returns how many runs it ended.
    func failRunsWithoutEnd(job: String, now: Int64, leaseSeconds: Int64, logger: Logger) async -> Int {
        let error =
            "no end recorded within the claims' lease (\(leaseSeconds) s): the run was killed or lost (SIGKILL, out of "
            + "memory, the host going down); the runs after it take its claims over once their lease is out"
        do throws(JobError) {
            let ended = try await failRunsWithoutEnd(job: job, before: now - leaseSeconds, error: error)
            for run in ended {
                logger.error(
                    """
                    an earlier run recorded no end within the claims' lease: killed or lost (SIGKILL, out of memory, \
                    the host going down); recorded as failed
                    """,
                    metadata: ["earlier_run": "\(run.id)", "earlier_run_at": "\(Timestamps.format(run.runAt))"])
            }
            return ended.count
        } catch {
            logger.warning(
                "earlier runs without an end were not looked for", metadata: ["error": "\(error.message)"])
            return 0
        }
    }

    /// Records a run that an error ended as `failed`, with `summary` (what it did by then, and the error), so that
    /// `job_runs` and the health report show it: otherwise the run before stays its job's last run, as if this
    /// one had not happened. Best effort: the store that just failed may fail again, or still be locked when
    /// `recordDeadline` has passed (then no attempt is made, since waiting would outlast a Lambda's deadline or
    /// the claims' lease). Either is logged, never thrown over the run's own error.
    func recordFailedRun(
        id: String, job: String, runAt: Int64, summary: some JobSummary, recordDeadline: Deadline? = nil,
        logger: Logger
    ) async {
        guard recordDeadline?.hasPassed != true else {
            logger.warning("the failed run is not recorded in job_runs: no time left to record")
            return
        }
        do throws(JobError) {
            try await recordRun(
                id: id, job: job, runAt: runAt, durationMs: summary.durationMs, outcome: .failed,
                summaryJSON: summary.json)
        } catch {
            logger.warning(
                "the failed run could not be recorded in job_runs", metadata: ["error": "\(error.message)"])
        }
    }
}

extension RunSummary {
    /// A provider's trouble (77, 69) first; else, when the run's time ran out (or it was asked to stop) before
    /// it had claimed every due user, a temporary failure (75): the next run reminds them.
    public var failure: JobError? {
        if let trouble = ProviderTrouble.failure(troubles) { return trouble }
        guard stoppedEarly else { return nil }
        let cause = stoppedBy.map { "the run was stopped by \($0)" } ?? "the run's time ran out"
        return .tempFailure(
            "\(cause) before every due user was claimed (stopped_early): the next run reminds the rest")
    }
}

/// An event as it arrives in a Lambda invocation's body.
public protocol LambdaEvent: Sendable {
    static func decode(lambdaPayload: [UInt8]) throws(JobError) -> Self
}

extension RunSummary: JobSummary {}
extension HookSummary: JobSummary {}
extension JanitorSummary: JobSummary {}

extension ContentLimitEvent: LambdaEvent {
    public static func decode(lambdaPayload: [UInt8]) throws(JobError) -> ContentLimitEvent {
        try parse(json: Data(lambdaPayload))
    }
}

/// An EventBridge scheduled event (a rule's `Scheduled Event`, or an EventBridge Scheduler input with
/// `"time": "<aws.scheduler.scheduled-time>"`): its `time` is the run's instant. `detail` may carry a
/// job's settings (the janitor's); a job rejects keys it does not know, so a typo is not ignored.
public struct ScheduledEvent: Sendable, Hashable, LambdaEvent {
    public enum Value: Sendable, Hashable {
        case bool(Bool)
        case int(Int)
        case string(String)
    }

    public var time: Int64
    public var detail: [String: Value]

    public init(time: Int64, detail: [String: Value] = [:]) {
        self.time = time
        self.detail = detail
    }

    public static func decode(lambdaPayload: [UInt8]) throws(JobError) -> ScheduledEvent {
        let event = try JSONValue.strict(Data(lambdaPayload), what: "event")
        let shape =
            "event: not a scheduled event (a JSON object with \"time\" and an optional \"detail\" object of booleans, numbers and strings)"
        guard event.isObject else { throw .dataError(shape) }
        guard let timeValue = event["time"], !timeValue.isNull else {
            throw .dataError(
                "event: missing \"time\" (an EventBridge Scheduler input needs \"time\": \"<aws.scheduler.scheduled-time>\")"
            )
        }
        guard let text = timeValue.string else { throw .dataError(shape) }
        var detail: [String: Value] = [:]
        if let value = event["detail"], !value.isNull {
            guard let members = value.members else { throw .dataError(shape) }
            for (key, member) in members {
                switch (member, member.wholeNumber) {
                case (.bool(let flag), _): detail[key] = .bool(flag)
                case (.string(let string), _): detail[key] = .string(string)
                case (_, .whole(let number)): detail[key] = .int(number)
                default:
                    throw .dataError(
                        "event: detail.\(key) must be true, false, a whole number or a string, got \(member.described)")
                }
            }
        }
        guard let time = Timestamps.parse(text) else {
            throw .dataError("event: \"time\" is not an ISO 8601 instant: \(LineText.field(text))")
        }
        guard Timestamps.supportedRange.contains(time) else {
            throw .dataError(
                "event: \"time\" \(LineText.field(text)) is outside the supported range, \(Timestamps.supportedRangeText)"
            )
        }
        return ScheduledEvent(time: time, detail: detail)
    }

    /// Fails when `detail` has a key outside `known`.
    public func checkDetail(known: Set<String>, job: String) throws(JobError) {
        if let unknown = detail.keys.sorted().first(where: { !known.contains($0) }) {
            let accepted = known.isEmpty ? "none" : known.sorted().joined(separator: ", ")
            throw .dataError("event: \(job) does not know detail.\(unknown) (accepted: \(accepted))")
        }
    }

    public func bool(_ key: String) throws(JobError) -> Bool? {
        switch detail[key] {
        case nil: return nil
        case .bool(let value): return value
        default: throw .dataError("event: detail.\(key) must be true or false")
        }
    }

    public func int(_ key: String, in range: ClosedRange<Int>) throws(JobError) -> Int? {
        switch detail[key] {
        case nil: return nil
        case .int(let value) where range.contains(value): return value
        default:
            throw .dataError(
                "event: detail.\(key) must be a whole number within \(range.lowerBound)…\(range.upperBound)")
        }
    }
}

/// Makes a sender on first use and keeps it (and its connections and credentials) for later runs; the
/// owner shuts it down. A job that usually sends nothing (the hook) never pays for one. Concurrent first
/// uses share one making; a failed making is not kept (the next use tries again).
public actor LazySender {
    private let make: @Sendable () async throws(JobError) -> any Sender
    private var sender: (any Sender)?
    private var making: Task<Result<any Sender, JobError>, Never>?
    private var finishBy: ContinuousClock.Instant?

    public init(_ make: @escaping @Sendable () async throws(JobError) -> any Sender) {
        self.make = make
    }

    public func get() async throws(JobError) -> any Sender {
        if let sender { return sender }
        let task = startMaking()
        let result = await task.value
        if making == task { making = nil }
        if let sender { return sender }  // a concurrent get() kept it first
        let made = try result.get()
        sender = made
        await made.beginRun(finishBy: finishBy)
        return made
    }

    /// Starts making the sender in the background — loading keys and trust roots while the caller does
    /// something else (the hook: its claim) — for a ``get()`` that will probably follow.
    public func prepare() {
        if sender == nil { _ = startMaking() }
    }

    private func startMaking() -> Task<Result<any Sender, JobError>, Never> {
        if let making { return making }
        let make = self.make
        let task = Task { () async -> Result<any Sender, JobError> in
            do throws(JobError) { return .success(try await make()) } catch { return .failure(error) }
        }
        making = task
        return task
    }

    /// Starts a run's budgets on the sender (now, or when it is made).
    public func beginRun(finishBy: ContinuousClock.Instant?) async {
        self.finishBy = finishBy
        await sender?.beginRun(finishBy: finishBy)
    }

    public func shutdown() async {
        if let making {
            let result = await making.value
            if self.making == making { self.making = nil }
            if sender == nil, case .success(let made) = result { sender = made }  // prepared, never used
        }
        await sender?.shutdown()
        sender = nil
    }
}

/// The end of an invocation's useful time: claims stop `claimReserve` before the deadline (time for the last
/// page's sends and records), sends must finish `recordReserve` before it, and waits (for a locked, full or
/// unreachable database to record, for another invocation's 90 % warning) end `reportReserve` before it, so
/// that the invocation still answers, with its error if it has one.
public struct DeadlinePolicy: Sendable, Hashable {
    public var claimReserve: Duration = .seconds(15)
    public var recordReserve: Duration = .seconds(2)
    public var reportReserve: Duration = .milliseconds(500)
    public init() {}
}

/// `diary-reminder` as a handler of scheduled events.
public struct DiaryReminderHandler: JobHandler {
    public struct Settings: Sendable {
        public var rule: DueRule = .default
        public var claimLeaseSeconds: Int64 = 600
        public var shard: Shard = .all
        public var pageSize = 1000
        /// Decide only: claim, send and write nothing (the sender prints or validates).
        public var dryRun = false
        public var deadlines = DeadlinePolicy()
        public init() {}
    }

    public let runner: DiaryReminderRunner
    public let settings: Settings

    public init(runner: DiaryReminderRunner, settings: Settings) {
        self.runner = runner
        self.settings = settings
    }

    /// The run options at `now`, before any deadline.
    public func options(now: Int64) -> ReminderRunOptions {
        var options = ReminderRunOptions(now: now, rule: settings.rule, dryRun: settings.dryRun)
        options.claimLeaseSeconds = settings.claimLeaseSeconds
        options.shard = settings.shard
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
    public let hook: ContentLimitHook
    public let senders: LazySender
    public var dryRun = false
    public var explain = false
    public var deadlines = DeadlinePolicy()

    public init(hook: ContentLimitHook, senders: LazySender, dryRun: Bool = false, explain: Bool = false) {
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
    public let janitor: TokenJanitor
    public let senders: LazySender
    /// The options every run starts from (its `now` is replaced by the event's time).
    public let base: JanitorOptions
    public var deadlines = DeadlinePolicy()

    public init(janitor: TokenJanitor, senders: LazySender, base: JanitorOptions) {
        self.janitor = janitor
        self.senders = senders
        self.base = base
    }

    public static var detailKeys: Set<String> { Set(JanitorSetting.all.map(\.key)) }

    public func handle(_ event: ScheduledEvent, context: InvocationContext) async throws(JobError) -> JanitorSummary {
        try event.checkDetail(known: Self.detailKeys, job: TokenJanitor.jobName)
        var options = base
        options.now = event.time
        options.runID = UUID().uuidString.lowercased()
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

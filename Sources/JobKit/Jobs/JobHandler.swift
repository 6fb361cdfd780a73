import Foundation
import Logging

/// What a handler knows about the invocation it serves.
public struct InvocationContext: Sendable {
    /// The clock when the invocation arrived (or `--now`): the instant of events that carry none.
    package var now: Int64
    /// When the platform ends the invocation (Lambda's `Lambda-Runtime-Deadline-Ms`); `nil` from cron.
    package var deadline: ContinuousClock.Instant?
    /// The platform's request id, for logs.
    package var requestID: String?
    /// A request to end the run early and cleanly (a signal to the process, from cron's side); `nil`: none can come.
    package var stop: StopRequest?

    package init(
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
    package func handleOnce(_ event: Event, context: InvocationContext) async throws(JobError) -> Summary {
        try await closing { handler throws(JobError) in try await handler.handle(event, context: context) }
    }

    /// Runs `body` with the handler, then closes what the handler opened, also when `body` fails: a command's
    /// single use of it (a run, an explanation).
    package func closing<T>(_ body: (Self) async throws(JobError) -> T) async throws(JobError) -> T {
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
    /// Due work a provider left undelivered: a run with any fails (77, 78 or 69) after printing its summary.
    var troubles: [ProviderTrouble] { get }
    /// The error the run ends with after doing all it could and printing its summary; nil when it left no
    /// due work.
    var failure: JobError? { get }
    /// How long the run took, in milliseconds.
    var durationMs: Int { get }
}

extension JobSummary {
    /// Credentials refused (77), a sender set up wrong (78) or a provider unavailable (69); nil when nothing due was left for a provider
    /// reason.
    public var failure: JobError? { ProviderTrouble.failure(troubles) }

    /// The run's `job_runs.outcome`: `failed` for a run that ends with an error, the summary's ``failure``
    /// (due work left: 77, 69, 75) or `channelFailure` (the outbox could not take what was sent), as its exit
    /// code says; `ok` otherwise.
    package func recordedOutcome(channelFailure: JobError? = nil) -> RunOutcome {
        failure == nil && channelFailure == nil ? .ok : .failed
    }
}

extension RunSummary: JobSummary {}
extension HookSummary: JobSummary {}
extension JanitorSummary: JobSummary {}

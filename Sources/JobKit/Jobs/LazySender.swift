import Foundation
import Logging

/// Makes a sender on first use and keeps it (and its connections and credentials) for later runs; the
/// owner shuts it down. A job that usually sends nothing (the hook) never pays for one. Concurrent first
/// uses share one making; a failed making is not kept (the next use tries again).
package actor LazySender {
    private let make: @Sendable () async throws(JobError) -> any Sender
    private var sender: (any Sender)?
    private var making: Task<Result<any Sender, JobError>, Never>?
    private var finishBy: ContinuousClock.Instant?

    package init(_ make: @escaping @Sendable () async throws(JobError) -> any Sender) {
        self.make = make
    }

    package func get() async throws(JobError) -> any Sender {
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
    package func prepare() {
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
    package func beginRun(finishBy: ContinuousClock.Instant?) async {
        self.finishBy = finishBy
        await sender?.beginRun(finishBy: finishBy)
    }

    package func shutdown() async {
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
package struct DeadlinePolicy: Sendable, Hashable {
    package var claimReserve: Duration = .seconds(15)
    package var recordReserve: Duration = .seconds(2)
    package var reportReserve: Duration = .milliseconds(500)
    package init() {}
}

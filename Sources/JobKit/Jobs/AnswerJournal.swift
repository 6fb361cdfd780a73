import Logging
import Synchronization

/// Records a page's provider answers while the page is still being sent, so that a run killed mid-page
/// leaves only the answers of the last write or two unrecorded (the run that takes its claims over sends
/// again to every device without a `delivered` row), not a whole page waiting for its retries.
///
/// Answers are handed over with ``add(_:)`` as they are read, from any thread and without waiting. One
/// writer, ``run()``, started beside the page's send, writes whatever has arrived in one transaction, and
/// as soon as that transaction commits, writes what arrived meanwhile (a group commit: no timer, and the
/// number of transactions adapts to the store's speed rather than to the page's size). At the end,
/// ``finish(_:resolutions:)`` records the rest with the claims' resolutions in one transaction.
final class AnswerJournal: Sendable {
    private struct State {
        /// Answers handed over and not yet written, by index in the page's notifications.
        var buffered: [(index: Int, record: DeliveryRecord)] = []
        /// Indices handed over (buffered or written): a later report of the same index is ignored.
        var known: Set<Int> = []
        /// Indices whose answers are written.
        var written: Set<Int> = []
        /// Set when an early write failed: the rest waits for ``finish(_:resolutions:)``.
        var stopped = false
    }

    private let store: any ClaimLedger
    private let runID: String
    private let now: Int64
    private let deadline: Deadline
    private let logger: Logger
    private let state = Mutex(State())
    private let wakeUps: AsyncStream<Void>
    private let wakeUp: AsyncStream<Void>.Continuation

    init(store: any ClaimLedger, runID: String, now: Int64, deadline: Deadline, logger: Logger) {
        self.store = store
        self.runID = runID
        self.now = now
        self.deadline = deadline
        self.logger = logger
        (wakeUps, wakeUp) = AsyncStream.makeStream(of: Void.self, bufferingPolicy: .bufferingNewest(1))
    }

    /// Answers that are final; written by ``run()`` as soon as it is free. An index handed over before is
    /// ignored. Returns at once.
    func add(_ records: [(index: Int, record: DeliveryRecord)]) {
        let added = state.withLock { state in
            var added = false
            for item in records where state.known.insert(item.index).inserted {
                state.buffered.append(item)
                added = true
            }
            return added && !state.stopped
        }
        if added { wakeUp.yield() }
    }

    /// Writes what ``add(_:)`` hands over until ``close()``; runs beside the page's send.
    func run() async {
        for await _ in wakeUps {
            let batch = state.withLock { state in
                defer { state.buffered = [] }
                return state.stopped ? [] : state.buffered
            }
            guard !batch.isEmpty else { continue }
            do {
                try await store.recordPersistently(
                    batch.map(\.record), resolutions: [], runID: runID, now: now,
                    deadline: deadline, logger: logger)
                state.withLock { state in
                    for item in batch { state.written.insert(item.index) }
                }
            } catch {
                // Written with the page's resolutions instead (or the run fails there).
                logger.warning(
                    "cannot record answers early: recording them with the page",
                    metadata: ["reason": "\(error.message)"])
                state.withLock { state in state.stopped = true }
            }
        }
    }

    /// Ends ``run()`` once it has written what was handed over before.
    func close() {
        wakeUp.finish()
    }

    /// Records every answer of the page not written yet, with the claims' resolutions, in one transaction.
    /// Called after ``run()`` has returned.
    /// - Parameter records: the page's answers, one per notification, in order.
    func finish(_ records: [DeliveryRecord], resolutions: [ClaimResolution]) async throws(JobError) {
        let written = state.withLock { $0.written }
        let rest = written.isEmpty ? records : records.indices.filter { !written.contains($0) }.map { records[$0] }
        try await store.recordPersistently(
            rest, resolutions: resolutions, runID: runID, now: now, deadline: deadline,
            logger: logger)
    }
}

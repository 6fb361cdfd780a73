import Logging

/// Records a page's provider answers while the page is still being sent, so that a run killed mid-page
/// leaves at most `delay` of answers unrecorded (and the run that takes its claims over sends only to the
/// devices without a `delivered` row), not a whole page waiting for its retries.
///
/// Answers that arrive are written at most `delay` (20 ms) later, in one transaction, and at the end
/// ``finish(_:resolutions:)`` records the rest with the claims' resolutions in one transaction. A page then
/// costs a few transactions instead of one; their number is bounded by time, not by the page's size.
actor AnswerJournal {
    private let store: any ReminderStore
    private let runID: String
    private let now: Int64
    private let deadline: ContinuousClock.Instant
    private let logger: Logger
    private let delay: Duration
    /// Answers handed over and not yet written, by index in the page's notifications.
    private var buffered: [(index: Int, record: DeliveryRecord)] = []
    /// Indices whose answers are written.
    private var written: Set<Int> = []
    /// Indices handed over (buffered or written).
    private var known: Set<Int> = []
    private var timer: Task<Void, Never>?
    /// True while the timer's write is under way (it is then waited for, not cancelled).
    private var writing = false

    init(store: any ReminderStore, runID: String, now: Int64, deadline: ContinuousClock.Instant, logger: Logger,
         delay: Duration = .milliseconds(20)) {
        self.store = store
        self.runID = runID
        self.now = now
        self.deadline = deadline
        self.logger = logger
        self.delay = delay
    }

    /// Answers that are final; written within `delay`. An index handed over before is ignored.
    func add(_ records: [(index: Int, record: DeliveryRecord)]) {
        let new = records.filter { known.insert($0.index).inserted }
        guard !new.isEmpty else { return }
        buffered += new
        if timer == nil {
            let delay = self.delay
            timer = Task {
                do { try await Task.sleep(for: delay) } catch { return }   // cancelled: finish writes them
                await self.writeBuffered()
            }
        }
    }

    private func writeBuffered() async {
        // finish() cancelled this flush after its sleep but before it got the actor: finish writes these answers
        // itself (a cancelled task's database write would only fail with CancellationError).
        if Task.isCancelled { return }
        let batch = buffered
        buffered = []
        writing = true
        defer {
            writing = false
            timer = nil
        }
        guard !batch.isEmpty else { return }
        do {
            try await store.recordPersistently(batch.map(\.record), resolutions: [], runID: runID, now: now,
                                               deadline: deadline, logger: logger)
            for item in batch { written.insert(item.index) }
        } catch {
            // Written with the page's resolutions instead (or the run fails there).
            logger.warning("cannot record answers early: recording them with the page", metadata: ["reason": "\(error.message)"])
            buffered = batch + buffered
        }
    }

    /// Records every answer of the page not written yet, with the claims' resolutions, in one transaction.
    /// - Parameter records: the page's answers, one per notification, in order.
    func finish(_ records: [DeliveryRecord], resolutions: [ClaimResolution]) async throws(JobError) {
        if let timer {
            // Not yet writing: cancelled, and its answers go in the one transaction below.
            if !writing { timer.cancel() }
            await timer.value
            self.timer = nil
        }
        let rest = written.isEmpty ? records : records.indices.filter { !written.contains($0) }.map { records[$0] }
        try await store.recordPersistently(rest, resolutions: resolutions, runID: runID, now: now, deadline: deadline,
                                           logger: logger)
    }
}

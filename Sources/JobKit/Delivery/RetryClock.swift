/// The time a job's budgets, deadlines and retries are measured in, and how it waits: the process's monotonic
/// clock in production, a manual one in tests (which then neither sleep nor depend on the machine's speed).
/// Instants are `ContinuousClock`'s, so a run's deadline compares with them directly.
package protocol RetryClock: Sendable {
    var now: ContinuousClock.Instant { get }
    /// Waits `duration` (a retry's backoff); returns early if the task is cancelled.
    func sleep(for duration: Duration) async
}

/// The process's monotonic clock, and `Task.sleep`.
package struct SystemRetryClock: RetryClock {
    package init() {}
    package var now: ContinuousClock.Instant { ContinuousClock.now }
    package func sleep(for duration: Duration) async { try? await Task.sleep(for: duration) }
}

/// An instant on a clock by which a wait must end: answers recorded while the claims' lease runs, or another
/// invocation's warning waited for.
package struct Deadline: Sendable {
    package let instant: ContinuousClock.Instant
    package let clock: any RetryClock

    package init(_ instant: ContinuousClock.Instant, on clock: any RetryClock) {
        self.instant = instant
        self.clock = clock
    }

    /// `duration` from the clock's now.
    package static func after(_ duration: Duration, on clock: any RetryClock) -> Deadline {
        Deadline(clock.now + duration, on: clock)
    }

    /// Until when a run waits to record its answers (a locked, full or unreachable database): nine tenths of the
    /// claims' lease, so that every answer is recorded before another run may take the claims over, or the
    /// caller's own end (`finishBy`, a Lambda invocation's) when that comes first.
    package static func toRecord(
        claimLeaseSeconds: Int64, finishBy: ContinuousClock.Instant?, on clock: any RetryClock
    ) -> Deadline {
        after(.seconds(claimLeaseSeconds) * 0.9, on: clock).notAfter(finishBy)
    }

    /// This deadline, or `instant` when that comes first (a caller's own end, such as a Lambda invocation's).
    package func notAfter(_ instant: ContinuousClock.Instant?) -> Deadline {
        guard let instant, instant < self.instant else { return self }
        return Deadline(instant, on: clock)
    }

    package var hasPassed: Bool { clock.now >= instant }

    /// Whether waiting `duration` from now still ends before the deadline.
    package func allows(_ duration: Duration) -> Bool { clock.now + duration < instant }
}

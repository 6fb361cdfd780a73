/// The time a sender's retries are measured in, and how it waits between them: the process's monotonic
/// clock in production, a manual one in tests (which then neither sleep nor depend on the machine's speed).
/// Instants are `ContinuousClock`'s, so a run's deadline compares with them directly.
public protocol RetryClock: Sendable {
    var now: ContinuousClock.Instant { get }
    /// Waits `duration` (a retry's backoff); returns early if the task is cancelled.
    func sleep(for duration: Duration) async
}

/// The process's monotonic clock, and `Task.sleep`.
public struct SystemRetryClock: RetryClock {
    public init() {}
    public var now: ContinuousClock.Instant { ContinuousClock.now }
    public func sleep(for duration: Duration) async { try? await Task.sleep(for: duration) }
}

import JobKit
import NIOCore

/// How many streams a connection keeps in flight: as many as the provider answers without making them wait,
/// and no more.
///
/// Every request in flight that the provider has accepted is one that a process killed at that instant leaves
/// unrecorded, and the run that takes its claims over sends it again (RELIABILITY.md). Streams beyond what the
/// path needs only wait in the provider's queue: they add no throughput, only that exposure. So the window
/// grows while answers come back about as fast as in the best recent round (the path's own latency: 100 ms to
/// a distant provider, a millisecond on loopback), and shrinks while they take longer than that by more than
/// `queueing` and by more than a quarter (requests waiting behind each other): the rule of TCP Vegas, applied
/// to streams. Against a distant provider it reaches the cap within a few round trips; against a local one it
/// stays at the few dozen streams that keep it busy.
///
/// A round is one window's worth of answers, and its mean latency is what counts: a batching server answers
/// the last request of each read at once, so the quickest answer says nothing about the queue. The best of the
/// last `memory` rounds is the baseline, so that a path that became slower for good (a new route, a provider
/// under load) is the new normal within that many rounds, not a queue forever.
struct StreamWindow: Sendable, Hashable {
    /// Streams that may be in flight now.
    private(set) var limit: Int
    let floor: Int
    let ceiling: Int
    /// Waiting at the provider beyond this (and beyond a quarter of the baseline) shrinks the window; under
    /// half of that, the window grows.
    let queueing: TimeAmount
    let memory: Int
    /// The mean latency of each recent round, oldest first.
    private var recent: [TimeAmount] = []
    private var roundTotal: TimeAmount = .zero
    private var roundAnswers = 0

    init(initial: Int = 16, floor: Int = 8, ceiling: Int, queueing: TimeAmount = .milliseconds(2), memory: Int = 32) {
        self.ceiling = max(1, ceiling)
        self.floor = min(max(1, floor), self.ceiling)
        self.limit = min(max(initial, self.floor), self.ceiling)
        self.queueing = queueing
        self.memory = max(1, memory)
    }

    /// The best mean latency of the recent rounds.
    var baseline: TimeAmount? { recent.min() }

    /// An answer came back `latency` after its request was written.
    mutating func answered(latency: TimeAmount) {
        roundTotal = roundTotal + latency
        roundAnswers += 1
        guard roundAnswers >= limit else { return }
        let mean = TimeAmount.nanoseconds(roundTotal.nanoseconds / Int64(roundAnswers))
        roundTotal = .zero
        roundAnswers = 0
        if recent.count == memory { recent.removeFirst() }
        recent.append(mean)
        let baseline = recent.min()!
        let waited = mean - baseline
        let tolerated = max(queueing, .nanoseconds(baseline.nanoseconds / 4))
        if waited * 2 <= tolerated {
            limit = min(ceiling, limit + max(1, limit / 4))
        } else if waited > tolerated {
            limit = max(floor, limit - max(1, limit / 8))
        }
    }
}

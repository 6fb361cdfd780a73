import JobKit

/// How fast one provider may be sent to: at most `perSecond` requests a second, reached over `ramp` from a
/// tenth of it (FCM asks for a ramp from zero to peak over at least 60 s; a tenth at the start keeps a small
/// slot from waiting on it).
package struct ProviderRate: Sendable, Hashable {
    package var perSecond: Double
    package var ramp: Duration

    package init(perSecond: Double, ramp: Duration = .seconds(60)) {
        self.perSecond = perSecond
        self.ramp = ramp
    }

    /// FCM's default: 90 % of its documented quota of 600,000 messages a minute per project. The rest is for
    /// the pacing's one burst per window and for whatever else sends in the project's name.
    package static let fcmDefault = ProviderRate(perSecond: Double(ConfigKey.fcmRate.number!.default))

    /// This rate divided among `shares` runners (`--shard K/N`: each sends its own part of every slot).
    package func divided(by shares: Int) -> ProviderRate {
        ProviderRate(perSecond: perSecond / Double(max(1, shares)), ramp: ramp)
    }

    /// Requests a second allowed `elapsed` after a send began.
    func perSecond(after elapsed: Duration) -> Double {
        guard ramp > .zero else { return perSecond }
        return perSecond * min(1, max(0.1, elapsed / ramp))
    }
}

/// The pacing of one provider, as a value: a token bucket whose rate follows ``ProviderRate``'s ramp and holds
/// at most a burst of 50 ms of requests, and a pause that a provider's "too many requests" starts. Instants
/// are passed in, so that tests state them.
struct SendPacing: Sendable {
    enum Grant: Sendable, Hashable {
        /// This many requests may go now.
        case send(Int)
        /// Nothing may go before this instant.
        case wait(until: ContinuousClock.Instant)
    }

    /// `nil`: unpaced, but still paused by a "too many requests".
    let rate: ProviderRate?
    private var began: ContinuousClock.Instant?
    private var credit = 0.0
    private var refilled: ContinuousClock.Instant?
    private(set) var pausedUntil: ContinuousClock.Instant?

    init(rate: ProviderRate?) {
        self.rate = rate
    }

    /// The largest number of requests sent at once: 50 ms of the current rate, at least one.
    static func burst(_ perSecond: Double) -> Double { max(1, perSecond / 20) }

    /// Up to `wanted` requests (at least one) that may go at `now`, or when to ask again.
    mutating func take(_ wanted: Int, at now: ContinuousClock.Instant) -> Grant {
        if let pausedUntil {
            if now < pausedUntil { return .wait(until: pausedUntil) }
            self.pausedUntil = nil
        }
        guard let rate else { return .send(max(1, wanted)) }
        let began = self.began ?? now
        self.began = began
        let perSecond = rate.perSecond(after: now - began)
        let burst = Self.burst(perSecond)
        if let refilled {
            credit = min(burst, credit + perSecond * ((now - refilled) / .seconds(1)))
        } else {
            credit = 1
        }
        refilled = now
        guard credit >= 1 else { return .wait(until: now + .seconds((1 - credit) / perSecond)) }
        let granted = min(max(1, wanted), Int(credit))
        credit -= Double(granted)
        return .send(granted)
    }

    /// Nothing more goes before `until` (a provider's Retry-After), and the bucket starts empty then.
    mutating func pause(until: ContinuousClock.Instant) {
        pausedUntil = max(pausedUntil ?? until, until)
        credit = 0
        refilled = pausedUntil
    }

    /// A new run: the ramp starts again at the next request (a pause in force is kept).
    mutating func restart() {
        began = nil
        refilled = nil
        credit = 0
    }
}

/// The pacing of one provider shared by every page a run sends (they run concurrently), kept on the sender's
/// clock, the one its retries wait on.
actor ProviderPacer {
    private var pacing: SendPacing
    private let clock: any RetryClock

    init(rate: ProviderRate?, clock: any RetryClock = SystemRetryClock()) {
        pacing = SendPacing(rate: rate)
        self.clock = clock
    }

    /// Waits until some of `wanted` requests may go, and returns how many (at least one); 0 when the task is
    /// cancelled while it waits (nothing more is to go).
    func take(_ wanted: Int) async -> Int {
        while true {
            switch pacing.take(wanted, at: clock.now) {
            case .send(let count): return count
            case .wait(let until):
                let wait = until - clock.now
                if wait > .zero { await clock.sleep(for: wait) }
                if Task.isCancelled { return 0 }
            }
        }
    }

    /// Pauses for `duration` from now; true when no pause was in force (a new one starts, not a longer one).
    @discardableResult
    func pause(for duration: Duration) -> Bool {
        let now = clock.now
        let starts = pacing.pausedUntil.map { $0 <= now } ?? true
        pacing.pause(until: now + duration)
        return starts
    }

    func restart() {
        pacing.restart()
    }

    var pausedUntil: ContinuousClock.Instant? { pacing.pausedUntil }
}

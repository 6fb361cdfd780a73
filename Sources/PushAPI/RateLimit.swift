import NIOConcurrencyHelpers

/// A token bucket per caller (an API key, or an app user): `rate` requests a second on average, bursts of up to
/// `rate` at once. A request that finds the bucket empty is answered 429 with `Retry-After`. In memory: each
/// server counts its own callers, on the real clock (never `--now`).
final class RateLimiter: Sendable {
    private struct Bucket {
        var tokens: Double
        var at: ContinuousClock.Instant
    }

    let rate: Double
    private let buckets = NIOLockedValueBox<[String: Bucket]>([:])

    /// `rate` ≤ 0: no limit.
    init(rate: Int) { self.rate = Double(rate) }

    /// Takes a token for `caller`; when there is none, the whole seconds until there will be one.
    func take(_ caller: String, now: ContinuousClock.Instant = .now) -> Int? {
        guard rate > 0 else { return nil }
        return buckets.withLockedValue { buckets in
            var bucket = buckets[caller] ?? Bucket(tokens: rate, at: now)
            let elapsed = now - bucket.at
            let seconds = Double(elapsed.components.seconds) + Double(elapsed.components.attoseconds) / 1e18
            bucket.tokens = min(rate, bucket.tokens + seconds * rate)
            bucket.at = now
            defer { buckets[caller] = bucket }
            guard bucket.tokens >= 1 else { return max(1, Int(((1 - bucket.tokens) / rate).rounded(.up))) }
            bucket.tokens -= 1
            return nil
        }
    }
}

/// Reminders whose catch-up window closed before every device was reached: the loss that matters. Free of I/O;
/// the stores only find the claims and write what this decides (``HistoryUpkeep/closeUnfinishedReminders``).
///
/// A claim is made, and taken over, inside its window (`R − early ≤ claimed_at < R + catchUp`, ``DueRule``;
/// `claimed_at` is the last claim or takeover), so its window has closed for certain once
/// `now ≥ claimed_at + early + catchUp`: at most that long after the run that last tried it, whatever the user's
/// zone and reminder time, which the log row does not keep. Every run closes the reminder claims still
/// unfinished (`retry`, or `claimed` by a run that died) that passed that point within the last ``lookback``:
/// each becomes final, `partial` when a device was reached and `failed` otherwise, with ``detail``; its devices
/// not reached are counted by provider and reason (``MissedDevices``). Nothing would have sent them any more:
/// this only makes the loss known when it happens, not a day later.
package enum MissedReminders {
    /// How far back a run looks for windows that closed: a run after a gap longer than this leaves older ones to
    /// the health report, which counts a claim unfinished a day after it was made as missed.
    package static let lookback: Int64 = 2 * 3_600
    /// The `detail` of a claim closed so; the health report counts it as missed.
    package static let detail = "missed: the catch-up window closed before every device was reached"
    /// The most claims one run closes; the rest wait for the next run.
    package static let limit = 10_000
    /// The provider and reason of a claim closed with no attempt at all (its run died before it sent).
    package static let notSent = (provider: "none", reason: "not sent")

    /// The claims a run at `now` closes: claimed in `(cutoff − lookback, cutoff]`, `cutoff = now − early − catchUp`.
    package static func claimedRange(now: Int64, rule: DueRule) -> Range<Int64> {
        let cutoff = now - rule.early - rule.catchUp
        return (cutoff - lookback + 1)..<(cutoff + 1)
    }

    /// Each claim's final state: `partial` when any device was reached, else `failed`; ``detail`` says why.
    package static func resolutions(_ claims: [UnfinishedClaim]) -> [ClaimResolution] {
        claims.map { claim in
            let reached = claim.attempts.contains { $0.outcome == .delivered }
            return ClaimResolution(
                logID: claim.logID, period: claim.period, status: reached ? .partial : .failed, detail: detail)
        }
    }

    /// The devices these claims leave unreached, by provider and reason: each device's last attempt, when it is
    /// not final; a claim with no attempt counts once as ``notSent``.
    package static func missedDevices(_ claims: [UnfinishedClaim]) -> [MissedDevices] {
        var counts: [MissedDevices.Key: Int] = [:]
        for claim in claims {
            guard !claim.attempts.isEmpty else {
                counts[MissedDevices.Key(provider: notSent.provider, reason: notSent.reason), default: 0] += 1
                continue
            }
            // Each device's last attempt; one whose row is gone since (`device_id` NULL) is no device to reach.
            var last: [Int64: RecordedAttempt] = [:]
            for attempt in claim.attempts {
                if let id = attempt.deviceID { last[id] = attempt }
            }
            for attempt in last.values where !DeliveryLifecycle.isFinal(attempt.outcome) {
                let key = MissedDevices.Key(
                    provider: attempt.provider, reason: attempt.reason ?? attempt.outcome.rawValue)
                counts[key, default: 0] += 1
            }
        }
        return counts.map { MissedDevices(provider: $0.key.provider, reason: $0.key.reason, devices: $0.value) }
            .sorted { ($0.provider, $0.reason) < ($1.provider, $1.reason) }
    }
}

/// Devices of reminders whose window closed unreached, by provider and reason: the run summary's
/// `devices_missed`, the counter `diary_push_devices_missed_total`.
public struct MissedDevices: Sendable, Codable, Hashable {
    public let provider: String
    public let reason: String
    public var devices: Int

    struct Key: Hashable {
        let provider: String
        let reason: String
    }

    public init(provider: String, reason: String, devices: Int) {
        self.provider = provider
        self.reason = reason
        self.devices = devices
    }
}

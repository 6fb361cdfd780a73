/// Why a candidate is not reminded. The raw values appear in summaries and JSON.
public enum SkipReason: String, Sendable, Hashable, CaseIterable, Codable, CodingKeyRepresentable, Comparable {
    case noSettings = "no_settings"
    case disabled
    case invalidTimezone = "invalid_timezone"
    case invalidReminderTime = "invalid_reminder_time"
    case notDue = "not_due"
    case noActiveDevice = "no_active_device"
    /// Active devices only with providers this run has no credentials for.
    case noConfiguredProvider = "no_configured_provider"
    case wroteToday = "wrote_today"
    case alreadyReminded = "already_reminded"
    /// Reminders paused after the user ignored a run of them (`ReminderPause`), until they write or change their
    /// settings.
    case paused
    /// Another run holds a fresh claim for this user and day.
    case claimInProgress = "claim_in_progress"
    /// Another run won the claim between selection and claiming.
    case claimLost = "claim_lost"
    /// The day's log row is in a state this version does not know (written by a newer version): nothing is
    /// sent, as sending could remind twice.
    case unknownClaimState = "unknown_claim_state"
    /// Another shard's run handles this user: only `--explain` with `--shard` says so (a run passes such users
    /// over before any rule and counts them as `other_shards`).
    case otherShard = "other_shard"

    public static func < (lhs: SkipReason, rhs: SkipReason) -> Bool { lhs.rawValue < rhs.rawValue }
}

/// What a run does with a user whose reminder time has come: the rest of the due rule, free of I/O.
package enum ReminderDecision: Sendable, Hashable {
    /// Insert a new claim.
    case claim
    /// Take over a claim left by a run that died (stale `claimed`) or with devices pending (`retry`).
    case takeOver(LogState)
    case skip(SkipReason)

    /// Rules 1, 3 and 4 of the due rule, in that order, plus the claim lease.
    /// - Parameters:
    ///   - staleBefore: a `claimed` row claimed at or before this instant belongs to a run that died.
    package static func decide(hasActiveDevice: Bool, wroteToday: Bool, log: LogState?, staleBefore: Int64)
        -> ReminderDecision
    {
        guard hasActiveDevice else { return .skip(.noActiveDevice) }
        guard !wroteToday else { return .skip(.wroteToday) }
        guard let log else { return .claim }
        guard log.status.isKnown else { return .skip(.unknownClaimState) }
        if DeliveryLifecycle.canTakeOver(log, staleBefore: staleBefore) { return .takeOver(log) }
        return .skip(log.status == .claimed ? .claimInProgress : .alreadyReminded)
    }
}

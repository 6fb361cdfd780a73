/// The delivery lifecycle of one notification, stated once and free of I/O: the states of its claim (the
/// notification log row), what each device's delivery ends as, who may take a claim over, when the
/// notification is finished, and in which order a period's quota warnings may reach a device.
///
/// A claim's states (``ClaimStatus``):
///
///     (none) ──claim──▶ claimed ──record──▶ sent | partial | failed      (final)
///                         │                 retry ──take over──▶ claimed (only devices not yet reached)
///                         └──lease runs out (the run died)──take over──▶ claimed
///     warnings: deferred ──quiet hours end──▶ claimed;  deferred | retry ──100 % claimed──▶ superseded (final)
///               deferred | retry ──its period ended (the quota reset), warnings turned off, or plan changed──▶
///                   superseded (final)
///               deferred | retry ──inside the user's quiet hours as set now──▶ deferred (until they end)
///
/// Each device of a claim ends `delivered`, `token_dead` or `rejected` (final), or `retry_later` /
/// `credentials` (pending): a later run inside the catch-up window sends again to the pending devices only,
/// with the same collapse id, and never to a device that was reached.
package enum DeliveryLifecycle {
    /// Whether a run may take over an existing claim: a `retry` one always (some of its devices are pending),
    /// a `claimed` one once its lease has run out (`claimedAt <= staleBefore`: the run that held it died).
    package static func canTakeOver(_ log: LogState, staleBefore: Int64) -> Bool {
        switch log.status {
        case .retry: true
        case .claimed: log.claimedAt <= staleBefore
        default: false
        }
    }

    /// No run takes a claim over, or retries it, more than this long after it was claimed: a reminder's window
    /// (early allowance plus catch-up) is shorter than a day, and pending quota warnings are read for a day (a
    /// warning's quiet hours end within a day of its claim). A claim left `retry`, `deferred` or `claimed` longer
    /// than this was missed: nothing sends it any more.
    package static let retryHorizon: Int64 = 86_400

    /// The delivery-health report's state for a missed claim: a column of the report, never a stored status.
    package static let missedState = "missed"

    /// The statuses of a claim that still awaits a run: held or left for retry, or claimed by a run that may
    /// have died. In the order of the partial index of unfinished warnings (`notification_logs_pending_warnings`), which SQLite uses
    /// only for a query that spells its condition the same way (``unfinishedSQL(table:)``).
    package static let unfinished: [ClaimStatus] = [.deferred, .retry, .claimed]

    /// A device a provider answered is dead (``DeliveryOutcome/tokenDead``), to deactivate with its reason.
    package struct DeadDevice: Sendable, Hashable {
        package let deviceID: Int64
        /// The provider's reason (`Unregistered`, `UNREGISTERED`, …), or `token_dead`.
        package let reason: String
        /// When the provider says the token stopped being valid (APNs' `timestamp`): a device registered again
        /// after it (`last_seen` later) is a new registration of the same token and stays active.
        package let invalidSince: Int64?
    }

    /// The devices this run's answers retire: each one answered dead. The stores deactivate exactly these, each
    /// only while active and not seen after ``DeadDevice/invalidSince``.
    package static func deadDevices(_ deliveries: [DeliveryRecord]) -> [DeadDevice] {
        deliveries.lazy.filter { $0.report.outcome == .tokenDead }.map {
            DeadDevice(
                deviceID: $0.deviceID, reason: $0.report.reason ?? "token_dead",
                invalidSince: $0.report.tokenInvalidSince)
        }
    }

    /// Whether a claim is missed at `now` (``missedState``): still unfinished past ``retryHorizon``.
    package static func isMissed(_ log: LogState, now: Int64) -> Bool {
        unfinished.contains(log.status) && log.claimedAt <= now - retryHorizon
    }

    /// Whether a device's outcome ends its delivery. Transient and credential failures do not: the device is
    /// sent to again by a later run.
    package static func isFinal(_ outcome: DeliveryOutcome) -> Bool {
        switch outcome {
        case .delivered, .tokenDead, .rejected: true
        case .retryLater, .credentials: false
        }
    }

    /// A claim's status once this run's attempts are known.
    /// - Parameters:
    ///   - previouslyDelivered: devices an earlier run of the same claim reached (not sent to again).
    ///   - outcomes: this run's outcome for each device it sent to.
    /// - Returns: `retry` while any device is pending (whether or not another device was reached), else
    ///   `sent` (every device reached), `partial` (some reached, the others failed for good) or `failed`.
    package static func resolution(previouslyDelivered: Int, outcomes: [DeliveryOutcome]) -> ClaimStatus {
        if outcomes.contains(where: { !isFinal($0) }) { return .retry }
        let delivered = previouslyDelivered + outcomes.filter { $0 == .delivered }.count
        if delivered == 0 { return .failed }
        return delivered == previouslyDelivered + outcomes.count ? .sent : .partial
    }

    /// The devices a claim is sent to: its user's active, deliverable devices that no earlier run of the
    /// same claim reached.
    package static func devicesToSend(_ devices: [Device], alreadyDelivered: Set<Int64>) -> [Device] {
        alreadyDelivered.isEmpty ? devices : devices.filter { !alreadyDelivered.contains($0.id) }
    }

    /// What may happen to a quota warning now, given the period's warning log rows.
    package enum WarningOrder: Sendable, Hashable {
        /// Send it.
        case send
        /// A 100 % warning whose period's 90 % warning is on its way (claimed, lease running): sending now
        /// could let the 90 % one arrive last. Wait for it to be recorded.
        case waitForLowerWarning
        /// A 90 % warning whose period's 100 % warning exists: it must never arrive, now or later.
        case overtaken
    }

    /// The warning of the same period that `type` overtakes: the 100 % one overtakes the 90 % one.
    package static func overtakes(_ type: NotificationType) -> NotificationType? {
        type == .contentLimit100 ? .contentLimit90 : nil
    }

    /// The warning of the same period that overtakes `type` (``overtakes(_:)`` the other way).
    package static func overtakenBy(_ type: NotificationType) -> NotificationType? {
        type == .contentLimit90 ? .contentLimit100 : nil
    }

    /// The detail of a lower warning the higher one superseded before it was ever claimed (it never will be).
    package static let neverSentDetail = "usage reached 100 % first"
    /// The detail of a lower warning, held or left for retry, that the higher one superseded.
    package static let overtakenDetail = "overtaken by the 100 % warning"

    /// A 90 % warning never reaches a device after the same period's 100 % warning.
    package static func warningOrder(
        _ type: NotificationType, period: String, logs: [LimitLogKey: LogState],
        staleBefore: Int64
    ) -> WarningOrder {
        if let higher = overtakenBy(type) {
            return logs[LimitLogKey(type: higher, period: period)] == nil ? .send : .overtaken
        }
        guard let lowerType = overtakes(type), let lower = logs[LimitLogKey(type: lowerType, period: period)],
            lower.status == .claimed, lower.claimedAt > staleBefore
        else { return .send }
        return .waitForLowerWarning
    }
}

/// How a store writes an instant in SQL: SQLite keeps epoch seconds, PostgreSQL `timestamptz`.
package enum SQLDialect: Sendable {
    case sqlite, postgres

    /// `seconds` as a literal of the store's instant type (an integer: nothing to escape).
    package func instant(_ seconds: Int64) -> String {
        switch self {
        case .sqlite: "\(seconds)"
        case .postgres: "to_timestamp(\(seconds))"
        }
    }
}

extension DeliveryLifecycle {
    /// Whether a quota warning's row may be claimed now: a `deferred` one whose quiet hours have ended, or one
    /// a run may take over (``canTakeOver(_:staleBefore:)``).
    package static func canClaimWarning(_ log: LogState, deliverAfter: Int64?, now: Int64, staleBefore: Int64) -> Bool {
        if log.status == .deferred { return (deliverAfter ?? .max) <= now }
        return canTakeOver(log, staleBefore: staleBefore)
    }

    /// Whether the 100 % warning supersedes a period's 90 % warning in this state: only one not yet on its way
    /// (held for quiet hours, or waiting for a retry). A claimed one is being sent; a final one was.
    package static func canSupersede(_ status: ClaimStatus) -> Bool {
        status == .deferred || status == .retry
    }

    // The same rules as SQL conditions over a `notification_logs` row, for the stores that claim in one
    // statement: each store writes these, never a spelling of its own. `table` qualifies the columns.

    /// ``canTakeOver(_:staleBefore:)``.
    package static func takeOverSQL(_ dialect: SQLDialect, staleBefore: Int64, table: String? = nil) -> String {
        let c = table.map { "\($0)." } ?? ""
        return
            "(\(c)status = '\(ClaimStatus.retry)' OR (\(c)status = '\(ClaimStatus.claimed)' AND \(c)claimed_at <= \(dialect.instant(staleBefore))))"
    }

    /// What claiming an existing row writes, beside the conditions it is written under (a take-over,
    /// ``takeOverSQL(_:staleBefore:table:)``; a held warning whose hour came, ``claimableWarningSQL(_:now:staleBefore:table:)``):
    /// `claimed`, one attempt more, claimed at `now`, unfinished. The store adds `run_id`, the taking run's
    /// own id, as a bound parameter. `table` qualifies the columns read (a `SET` names its own columns bare).
    package static func reclaimSetSQL(_ dialect: SQLDialect, now: Int64, table: String? = nil) -> String {
        let c = table.map { "\($0)." } ?? ""
        return
            "status = '\(ClaimStatus.claimed)', attempts = \(c)attempts + 1, claimed_at = \(dialect.instant(now)), updated_at = \(dialect.instant(now)), finished_at = NULL"
    }

    /// ``canClaimWarning(_:deliverAfter:now:staleBefore:)``.
    package static func claimableWarningSQL(_ dialect: SQLDialect, now: Int64, staleBefore: Int64, table: String? = nil)
        -> String
    {
        let c = table.map { "\($0)." } ?? ""
        return
            "((\(c)status = '\(ClaimStatus.deferred)' AND \(c)deliver_after <= \(dialect.instant(now))) OR \(takeOverSQL(dialect, staleBefore: staleBefore, table: table)))"
    }

    /// A `notification_logs` row's state in the delivery-health report at `now`: its status, or ``missedState``
    /// when a run closed it as its window closed (``MissedReminders``), or when it is still `retry`, `deferred` or
    /// `claimed` past ``retryHorizon``.
    package static func reportStatusSQL(_ dialect: SQLDialect, now: Int64) -> String {
        "CASE WHEN detail = '\(MissedReminders.detail)' THEN '\(missedState)'"
            + " WHEN \(unfinishedSQL()) AND claimed_at <= \(dialect.instant(now - retryHorizon)) THEN '\(missedState)' ELSE status END"
    }

    /// ``unfinished``: `status IN ('deferred', 'retry', 'claimed')`.
    package static func unfinishedSQL(table: String? = nil) -> String {
        let c = table.map { "\($0)." } ?? ""
        return "\(c)status IN (\(unfinished.map { "'\($0)'" }.joined(separator: ", ")))"
    }

    /// ``canSupersede(_:)``.
    package static func supersedableSQL(table: String) -> String {
        "\(table).status IN ('\(ClaimStatus.deferred)', '\(ClaimStatus.retry)')"
    }
}

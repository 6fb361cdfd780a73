import Foundation

/// What the content-limit hook knows about a user after its one read.
package struct LimitSnapshot: Sendable, Hashable {
    package let userID: String
    package let timezone: String
    package let locale: String
    package let plan: String
    /// Warnings are on unless the settings row turns them off (a missing row means the defaults).
    package let warningsEnabled: Bool
    package let quietHoursStart: String?
    package let quietHoursEnd: String?
    package let hasActiveDevice: Bool
    /// Quota-warning log rows of recent periods, by type and period key.
    package let logs: [LimitLogKey: LogState]

    package init(
        userID: String, timezone: String, locale: String, plan: String, warningsEnabled: Bool,
        quietHoursStart: String?, quietHoursEnd: String?, hasActiveDevice: Bool, logs: [LimitLogKey: LogState]
    ) {
        self.userID = userID
        self.timezone = timezone
        self.locale = locale
        self.plan = plan
        self.warningsEnabled = warningsEnabled
        self.quietHoursStart = quietHoursStart
        self.quietHoursEnd = quietHoursEnd
        self.hasActiveDevice = hasActiveDevice
        self.logs = logs
    }
}

package struct LimitLogKey: Sendable, Hashable {
    package let type: NotificationType
    package let period: String
}

/// A quota warning: whose, which and of which period, and the words it shows.
package struct QuotaWarning: Sendable, Hashable {
    package let userID: String
    package let type: NotificationType
    package let period: String
    package let messageIndex: Int
    package let locale: String
    /// The message's numbers, stored so that a deferred or retried warning shows the same ones.
    package let params: [String: String]

    package init(
        userID: String, type: NotificationType, period: String, messageIndex: Int, locale: String,
        params: [String: String]
    ) {
        self.userID = userID
        self.type = type
        self.period = period
        self.messageIndex = messageIndex
        self.locale = locale
        self.params = params
    }

    /// The warning a takeover of its log row sends: with the words the row's first claim stored (this warning's
    /// where the row has none), so that a retried warning reads as the first try would have. Numbers counted
    /// against another plan than this warning's (``LimitParams/planKey``) are of a quota the user no longer has:
    /// this warning goes out as it is.
    package func resumed(messageIndex: Int?, locale: String?, params: String?) -> QuotaWarning {
        let stored = LimitParams.decode(params)
        guard stored[LimitParams.planKey] == self.params[LimitParams.planKey] else { return self }
        return QuotaWarning(
            userID: userID, type: type, period: period, messageIndex: messageIndex ?? self.messageIndex,
            locale: locale ?? self.locale, params: stored)
    }
}

/// A stored quota warning that a run should deliver now (deferred past quiet hours, or left for retry).
package struct PendingWarning: Sendable, Hashable {
    package let logID: Int64
    package let warning: QuotaWarning

    package init(logID: Int64, warning: QuotaWarning) {
        self.logID = logID
        self.warning = warning
    }
}

/// What claiming a quota warning won: the warning as the log now holds it, to send now or, `deferred`, stored
/// until quiet hours end.
package struct LimitClaim: Sendable, Hashable {
    package let warning: PendingWarning
    package let deferred: Bool

    package init(_ warning: PendingWarning, deferred: Bool) {
        self.warning = warning
        self.deferred = deferred
    }
}

package protocol ContentLimitStore: Sendable {
    /// One read for all of `userIDs` (duplicates allowed): for each, the user, their settings, whether they have
    /// an active device, and their quota-warning log rows with period keys from `periodsFrom` on; by user id,
    /// unknown users absent. A reminder run decides a page of pending warnings from one such read.
    func limitSnapshots(userIDs: [String], periodsFrom: String) async throws(JobError) -> [String: LimitSnapshot]
    /// Whether user `id` is stored: all the hook reads for a write below every threshold (most writes), as the
    /// hook's quiet path does.
    func userExists(id: String) async throws(JobError) -> Bool
    /// Atomically claims a warning, or stores it `deferred` until `deliverAfter` (quiet hours). For 100 %, the
    /// period's 90 % warning is marked superseded (inserted as such, or changed from deferred or retry) so it
    /// never arrives afterwards. A 90 % warning is not claimed once the 100 % one exists. A claim taken over
    /// keeps the words its row holds (``QuotaWarning/resumed(messageIndex:locale:params:)``). Returns `nil` when
    /// another invocation has it. Fails with ``JobError/unknownUser(_:)`` for a user who is gone (deleted since the
    /// caller read them), writing nothing.
    func claimLimitWarning(
        _ warning: QuotaWarning, deliverAfter: Int64?, runID: String, now: Int64, staleBefore: Int64
    )
        async throws(JobError) -> LimitClaim?
    /// Warnings to deliver now: deferred ones whose quiet hours ended, `retry` ones and claims of hooks that
    /// died (older than `staleBefore`), claimed within ``DeliveryLifecycle/retryHorizon``. At most `limit` of
    /// them, in log id order after `afterID`: a run pages through them, and never reads again a warning it
    /// claimed or left for retry itself.
    func pendingWarnings(now: Int64, staleBefore: Int64, afterID: Int64, limit: Int) async throws(JobError)
        -> [PendingWarning]
    /// Claims pending warnings for this run; returns the ids won.
    func claimPendingWarnings(_ ids: [Int64], runID: String, now: Int64, staleBefore: Int64) async throws(JobError)
        -> Set<Int64>
    /// Keeps pending warnings `deferred`, each until its instant (logID → `deliver_after`), as this run's
    /// (`run_id`, `claimed_at` = `now`); only those still claimable (another run may have claimed one). Returns
    /// the ids held.
    func holdPendingWarnings(_ until: [Int64: Int64], runID: String, now: Int64, staleBefore: Int64)
        async throws(JobError) -> Set<Int64>
    /// The devices each of these claims already reached (a `delivered` attempt), by log id; claims that
    /// reached none are absent. A claim taken over is sent only to the others.
    func deliveredDevices(logIDs: [Int64]) async throws(JobError) -> [Int64: Set<Int64>]
}

extension ContentLimitStore {
    /// One user's ``limitSnapshots(userIDs:periodsFrom:)``: `nil` for an unknown user.
    package func limitSnapshot(userID: String, periodsFrom: String) async throws(JobError) -> LimitSnapshot? {
        try await limitSnapshots(userIDs: [userID], periodsFrom: periodsFrom)[userID]
    }
}

/// The stored form of a warning's numbers: a JSON object of strings.
package enum LimitParams {
    /// The key under which the hook stores, beside the numbers, the plan they were counted against (`users.plan`
    /// then): a run withdraws a held or retried warning whose user is on another plan by the time it goes out.
    /// No copy placeholder has this name.
    package static let planKey = "plan"

    package static func encode(_ params: [String: String]) -> String {
        JSONLine.encode(params, verbatimKeys: true)
    }
    /// The numbers of a stored object; anything else (not JSON, not an object of strings) reads as none.
    package static func decode(_ text: String?) -> [String: String] {
        text.flatMap { JSONLine.decode([String: String].self, from: $0) } ?? [:]
    }
}

extension LimitSnapshot {
    /// One log row as both stores aggregate it: `[id, type, period, status, claimed_at, message_index, locale,
    /// run_id, deliver_after, plan]`, message index, locale, deliver_after and plan possibly null (the plan is
    /// the one ``LimitParams/planKey`` stored).
    private struct LogRow: Decodable {
        let key: LimitLogKey
        let state: LogState

        init(from decoder: any Decoder) throws {
            var row = try decoder.unkeyedContainer()
            let id = try row.decode(Int64.self)
            let type = try row.decode(String.self)
            let period = try row.decode(String.self)
            let status = try row.decode(String.self)
            let claimedAt = try row.decode(Int64.self)
            let messageIndex = try row.decodeNil() ? nil : try row.decode(Int.self)
            let locale = try row.decodeNil() ? nil : try row.decode(String.self)
            let runID = try row.decode(String.self)
            let deliverAfter = try row.decodeNil() ? nil : try row.decode(Int64.self)
            let plan = try row.decodeNil() ? nil : try row.decode(String.self)
            guard row.isAtEnd else {
                throw DecodingError.dataCorrupted(.init(codingPath: row.codingPath, debugDescription: "an 11th field"))
            }
            guard let type = NotificationType(rawValue: type) else {
                throw DecodingError.dataCorrupted(.init(codingPath: row.codingPath, debugDescription: "unknown type"))
            }
            key = LimitLogKey(type: type, period: period)
            state = LogState(
                id: id, status: ClaimStatus(rawValue: status), claimedAt: claimedAt, messageIndex: messageIndex,
                locale: locale, runID: runID, deliverAfter: deliverAfter, plan: plan)
        }
    }

    /// A row that does not read as a ``LogRow`` is skipped rather than failing the others.
    private struct Skippable: Decodable {
        let row: LogRow?
        init(from decoder: any Decoder) throws { row = try? LogRow(from: decoder) }
    }

    /// Parses log rows given as a JSON array of `[id, type, period, status, claimed_at, message_index, locale, run_id,
    /// deliver_after, plan]` (what both stores aggregate in their one read); a malformed row is skipped.
    package static func parseLogs(json: String?) -> [LimitLogKey: LogState] {
        var logs: [LimitLogKey: LogState] = [:]
        for row in JSONLine.decode([Skippable].self, from: json ?? "[]")?.compactMap(\.row) ?? [] {
            logs[row.key] = row.state
        }
        return logs
    }
}

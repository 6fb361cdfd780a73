/// What the token janitor needs from a store. Every bulk change works in bounded batches, each its own
/// short transaction, so the app's writes are never blocked for long.
public protocol JanitorStore: Sendable {
    /// Active devices (of `provider`, or all) not seen since `seenBefore`.
    func staleDeviceCount(seenBefore: Int64, provider: Provider?) async throws(JobError) -> Int
    /// Deactivates up to `limit` of them with `reason`; returns how many.
    func deactivateStaleDevices(seenBefore: Int64, provider: Provider?, reason: String, now: Int64, limit: Int)
        async throws(JobError) -> Int
    /// Active FCM devices not seen since `seenBefore` (but seen since `notBefore`), oldest first, for probing.
    func probeCandidates(seenBefore: Int64, notBefore: Int64, limit: Int) async throws(JobError) -> [Device]
    /// Deactivates these devices (a provider said their tokens are dead).
    func deactivate(deviceIDs: [Int64], reason: String, now: Int64) async throws(JobError) -> Int
    func deliveryCount(before: Int64) async throws(JobError) -> Int
    func deleteDeliveries(before: Int64, limit: Int) async throws(JobError) -> Int
    /// Log rows claimed before `before` whose period has ended everywhere (so they guard nothing any more).
    func expiredLogCount(before: Int64, guards: PeriodGuards) async throws(JobError) -> Int
    func deleteExpiredLogs(before: Int64, guards: PeriodGuards, limit: Int) async throws(JobError) -> Int
    /// Drops whole history partitions (PostgreSQL) whose every row the two row rules above would delete: delivery
    /// partitions wholly before `deliveriesBefore`, log partitions whose periods have ended (``PeriodGuards``)
    /// and whose rows are all claimed before `logsBefore` (``PeriodGuards/expiredLogSQL(_:before:)``). Dry, only
    /// names them. Returns the partitions dropped (or to drop) with their rows; a partition the table was too
    /// busy to drop is left to the next run and its rows to the row rules. SQLite's history is not partitioned:
    /// none.
    func dropExpiredHistoryPartitions(deliveriesBefore: Int64, logsBefore: Int64, guards: PeriodGuards, dryRun: Bool)
        async throws(JobError) -> [HistoryPartitionDrop]
    /// Run records (`job_runs`) of before `before` that are not at their job's latest instant
    /// (``RunRetention/expiredRunSQL(_:before:)``).
    func oldRunCount(before: Int64) async throws(JobError) -> Int
    func deleteOldRuns(before: Int64, limit: Int) async throws(JobError) -> Int
    func inactiveDeviceCount(deactivatedBefore: Int64) async throws(JobError) -> Int
    func purgeInactiveDevices(deactivatedBefore: Int64, limit: Int) async throws(JobError) -> Int
}

/// The oldest period keys that may still guard against a duplicate, per key shape. A log row whose period
/// key is older than these has ended in every time zone.
public struct PeriodGuards: Sendable, Hashable {
    /// `YYYY-MM-DD`
    public let day: String
    /// `YYYY-MM`
    public let month: String
    /// `YYYY`
    public let year: String

    /// Keys of the UTC date two days before `now`: no zone is more than 14 hours from UTC, so every period
    /// older than that date's has ended everywhere.
    public init(now: Int64) {
        let date = ZoneClock.split(wallSeconds: now - 2 * 86_400).date
        day = date.description
        month = date.monthKey
        year = LocalDate.pad(date.year, 4)
    }

    /// The janitor's rule for a `notification_logs` row, as a SQL condition over its columns: claimed before
    /// `before` (at least 35 days ago, ``JanitorOptions/logRetentionRange``) and of a period that has ended in
    /// every zone, judged by the key's shape. Whatever its status: a claim still `claimed`, `deferred` or `retry`
    /// that old is long past ``DeliveryLifecycle/retryHorizon`` (no run sends it any more; the report counts it
    /// missed), and no run claims a period that has ended, so the row guards against nothing. Both stores use
    /// this one condition; its values are numbers and keys the program made, written as literals.
    public func expiredLogSQL(_ dialect: SQLDialect, before: Int64) -> String {
        """
        claimed_at < \(dialect.instant(before)) AND (
            (length(period_key) = 10 AND period_key < '\(day)') OR
            (length(period_key) = 7 AND period_key < '\(month)') OR
            (length(period_key) = 4 AND period_key < '\(year)'))
        """
    }
}

/// The janitor's rule for a `job_runs` row.
public enum RunRetention {
    /// The rule as a SQL condition over a `job_runs` row: recorded for an instant before `before`, and not at
    /// its job's latest instant, which the report's "last run of each job" shows however old it is. Both stores
    /// use this one condition; its value is a number, written as a literal.
    public static func expiredRunSQL(_ dialect: SQLDialect, before: Int64) -> String {
        """
        run_at < \(dialect.instant(before))
        AND run_at < (SELECT max(latest.run_at) FROM job_runs latest WHERE latest.job = job_runs.job)
        """
    }
}

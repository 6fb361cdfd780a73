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
    /// and whose rows are all claimed before `logsBefore` and finished. Dry, only names them. Returns the
    /// partitions dropped (or to drop) with their rows; a partition the table was too busy to drop is left to
    /// the next run and its rows to the row rules. SQLite's history is not partitioned: none.
    func dropExpiredHistoryPartitions(deliveriesBefore: Int64, logsBefore: Int64, guards: PeriodGuards, dryRun: Bool)
        async throws(JobError) -> [HistoryPartitionDrop]
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
}

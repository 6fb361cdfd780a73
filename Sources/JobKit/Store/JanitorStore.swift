/// What the token janitor needs from a store. Every bulk change works in bounded batches, each its own
/// short transaction, so the app's writes are never blocked for long.
package protocol JanitorStore: DeviceHolds {
    /// Active devices (of `provider`, or all) not seen since `seenBefore`, other than those mirrored from the app's
    /// own device table (the app decides whether they are active).
    func staleDeviceCount(seenBefore: Int64, provider: Provider?) async throws(JobError) -> Int
    /// Deactivates up to `limit` of them with `reason`; returns how many.
    func deactivateStaleDevices(seenBefore: Int64, provider: Provider?, reason: String, now: Int64, limit: Int)
        async throws(JobError) -> Int
    /// Active FCM devices not seen since `seenBefore` (but seen since `notBefore`), oldest first, for probing.
    func probeCandidates(seenBefore: Int64, notBefore: Int64, limit: Int) async throws(JobError) -> [Device]
    /// Active devices counted by provider and ``TokenKind`` (`"fcm/fid"` → count), for the metrics that show an
    /// app's move from FCM registration tokens to installation ids.
    func activeDeviceCounts() async throws(JobError) -> [String: Int]
    /// Deactivates these devices (a provider said their tokens are dead).
    func deactivate(deviceIDs: [Int64], reason: String, now: Int64) async throws(JobError) -> Int
    /// The rows a retention rule selects, counted.
    func count(_ rule: RetentionRule) async throws(JobError) -> Int
    /// Deletes up to `limit` of them, the rule's oldest first, in one short transaction (on PostgreSQL skipping
    /// rows another session holds); returns how many.
    func delete(_ rule: RetentionRule, limit: Int) async throws(JobError) -> Int
    /// Drops whole history partitions (PostgreSQL) whose every row the two history rules would delete: delivery
    /// partitions wholly before `deliveriesBefore`, log partitions whose periods have ended (``PeriodGuards``)
    /// and whose rows are all claimed before `logsBefore` (``PeriodGuards/expiredLogSQL(_:before:)``). Dry, only
    /// names them. Returns the partitions dropped (or to drop) with their rows; a partition the table was too
    /// busy to drop is left to the next run and its rows to the row rules. SQLite's history is not partitioned:
    /// none.
    func dropExpiredHistoryPartitions(deliveriesBefore: Int64, logsBefore: Int64, guards: PeriodGuards, dryRun: Bool)
        async throws(JobError) -> [HistoryPartitionDrop]
}

/// A retention rule: which rows of a table the janitor deletes, written once for both stores as a SQL condition
/// over the table's columns. Its values are numbers and keys the program made, written as literals; the stores
/// run it in batches, oldest first.
package struct RetentionRule: Sendable, Hashable {
    /// The table, whose `id` identifies a row.
    package let table: String
    /// The rows, as the log and errors name them ("old deliveries").
    package let rows: String
    /// The column that orders the batches, oldest first.
    package let oldestBy: String
    /// The table's key, by which a batch is deleted.
    package let key: String
    private let sqlite: String
    private let postgres: String

    init(table: String, rows: String, oldestBy: String, key: String = "id", condition: (SQLDialect) -> String) {
        self.table = table
        self.rows = rows
        self.oldestBy = oldestBy
        self.key = key
        sqlite = condition(.sqlite)
        postgres = condition(.postgres)
    }

    /// The condition in a store's dialect.
    package func condition(_ dialect: SQLDialect) -> String {
        switch dialect {
        case .sqlite: sqlite
        case .postgres: postgres
        }
    }

    /// Delivery records created before `before`.
    package static func deliveries(before: Int64) -> RetentionRule {
        RetentionRule(table: "notification_deliveries", rows: "old deliveries", oldestBy: "created_at") {
            "created_at < \($0.instant(before))"
        }
    }

    /// Log rows claimed before `before` whose period has ended everywhere, so that they guard nothing any more
    /// (``PeriodGuards/expiredLogSQL(_:before:)``).
    package static func expiredLogs(before: Int64, guards: PeriodGuards) -> RetentionRule {
        RetentionRule(table: "notification_logs", rows: "old log rows", oldestBy: "claimed_at") {
            guards.expiredLogSQL($0, before: before)
        }
    }

    /// Run records (`job_runs`) for an instant before `before` and not at their job's latest instant, which the
    /// report's "last run of each job" shows however old it is.
    package static func runs(before: Int64) -> RetentionRule {
        RetentionRule(table: "job_runs", rows: "old run records", oldestBy: "run_at") {
            """
            run_at < \($0.instant(before)) AND run_at < \(JobRunsSQL.latestRunAt)
            """
        }
    }

    /// Devices a database webhook brought for a user with no time zone yet that have waited since before `before`
    /// (the stale window: a device unseen that long would be deactivated were it registered).
    package static func waitingDevices(before: Int64) -> RetentionRule {
        RetentionRule(table: "waiting_devices", rows: "long-waiting devices", oldestBy: "received_at", key: "token") {
            "received_at < \($0.instant(before))"
        }
    }

    /// Waiting profiles and entries (``waitingDevices(before:)``) of before `before`: nothing of the user came since.
    package static func waitingUsers(before: Int64) -> RetentionRule {
        RetentionRule(table: "waiting_users", rows: "long-waiting users", oldestBy: "user_id", key: "user_id") {
            "(profile_at IS NULL OR profile_at < \($0.instant(before))) AND (entry_at IS NULL OR entry_at < \($0.instant(before)))"
        }
    }

    /// Device rows deactivated before `before` (`--purge`). Each store's form of "inactive" is the one its
    /// partial index `user_devices_inactive_by_time` is declared with, so that the index serves the rule.
    package static func inactiveDevices(deactivatedBefore before: Int64) -> RetentionRule {
        RetentionRule(table: "user_devices", rows: "inactive devices", oldestBy: "deactivated_at") {
            "\($0 == .sqlite ? "is_active = 0" : "NOT is_active") AND deactivated_at < \($0.instant(before))"
        }
    }
}

/// SQL about `job_runs`, the same in both stores.
package enum JobRunsSQL {
    /// The latest instant of the job of the row of the query's own `job_runs` (a correlated subquery): what the
    /// report's "last run of each job" shows and what run retention keeps.
    package static let latestRunAt = "(SELECT max(latest.run_at) FROM job_runs latest WHERE latest.job = job_runs.job)"
}

/// The oldest period keys that may still guard against a duplicate, per key shape. A log row whose period
/// key is older than these has ended in every time zone.
package struct PeriodGuards: Sendable, Hashable {
    /// `YYYY-MM-DD`
    package let day: String
    /// `YYYY-MM`
    package let month: String
    /// `YYYY`
    package let year: String

    /// Keys of the UTC date two days before `now`: no zone is more than 14 hours from UTC, so every period
    /// older than that date's has ended everywhere.
    package init(now: Int64) {
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
    package func expiredLogSQL(_ dialect: SQLDialect, before: Int64) -> String {
        """
        claimed_at < \(dialect.instant(before)) AND (
            (length(period_key) = 10 AND period_key < '\(day)') OR
            (length(period_key) = 7 AND period_key < '\(month)') OR
            (length(period_key) = 4 AND period_key < '\(year)'))
        """
    }
}

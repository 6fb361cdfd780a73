import JobKit
import Logging
import PostgresNIO

/// The partitioned history's upkeep (migration 009, ``HistoryPartition``): partitions made ahead of the rows,
/// rows in a default partition moved into their own, and whole partitions dropped by the janitor.
///
/// Every change runs in its own short transaction with `lock_timeout` set, under an advisory lock that
/// serializes runners doing the same upkeep. Partitions are attached (`ATTACH PARTITION` takes a lock that
/// lets claims and deliveries go on) rather than created under the parent; dropping one briefly takes the
/// parent's exclusive lock, so a busy table makes it wait for the next run instead.
extension PostgresStore {
    static let historyLockKey: Int64 = 0x6869_7374_6f72_7970  // "historyp"
    static let historyLockTimeout = "2s"

    /// Storage parameters of a new partition. A log row is claimed, then resolved once by an update that
    /// changes no indexed column (migration 011): with half of each page left free, that update is heap-only
    /// and writes no index entry. That halved the server's cost of recording a page
    /// (BENCHMARKS.md#postgresqls-page-statements). Deliveries are never updated and fill their pages.
    static func storage(_ table: HistoryPartition.Table) -> String {
        switch table {
        case .logs: "WITH (fillfactor = \(logFillFactor))"
        case .deliveries: ""
        }
    }

    static let logFillFactor = 50

    package func prepareHistory(now: Int64) async throws(JobError) {
        let (existing, inDefault) = try await historyCatalog()
        var wanted = HistoryPartition.needed(now: now)
        for partition in inDefault where !wanted.contains(partition) { wanted.append(partition) }
        for partition in wanted where !existing.contains(partition.name) {
            try await attach(partition)
        }
    }

    package func orphanedRows(userID: String?) async throws(JobError) -> OrphanedRows {
        guard
            let row = try await rows(
                "counting rows whose user does not exist",
                """
                SELECT (SELECT count(*) FROM notification_settings s
                        WHERE (\(userID)::text IS NULL OR s.user_id = \(userID))
                          AND NOT EXISTS (SELECT 1 FROM users u WHERE u.id = s.user_id)),
                       (SELECT count(*) FROM user_devices d
                        WHERE d.is_active AND (\(userID)::text IS NULL OR d.user_id = \(userID))
                          AND NOT EXISTS (SELECT 1 FROM users u WHERE u.id = d.user_id))
                """
            ).first
        else { return OrphanedRows() }
        let (settings, devices) = try decode(row, (Int, Int).self)
        return OrphanedRows(settings: settings, activeDevices: devices)
    }

    package func closeUnfinishedReminders(
        claimedIn: Range<Int64>, staleBefore: Int64, limit: Int, runID: String, now: Int64,
        _ decide: @escaping @Sendable ([UnfinishedClaim]) -> [ClaimResolution]
    ) async throws(JobError) -> [UnfinishedClaim] {
        let logger = self.logger
        return try await transaction("closing reminders whose window closed") { connection in
            // Through each partition's `claimed_at` index; a claim another run holds is its to finish.
            var logs: [(id: Int64, period: String)] = []
            for row in try await connection.query(
                """
                SELECT id, period_key FROM notification_logs
                WHERE claimed_at >= to_timestamp(\(claimedIn.lowerBound)) AND claimed_at < to_timestamp(\(claimedIn.upperBound))
                  AND \(unescaped: NotificationType.diaryReminder.sql())
                  AND \(unescaped: DeliveryLifecycle.takeOverSQL(.postgres, staleBefore: staleBefore))
                ORDER BY id LIMIT \(limit) FOR UPDATE SKIP LOCKED
                """, logger: logger
            ).collect() {
                let (id, period) = try row.decode((Int64, String).self)
                logs.append((id, period))
            }
            guard !logs.isEmpty else { return [] }
            let ids = logs.map(\.id)
            var attempts: [Int64: [RecordedAttempt]] = [:]
            for row in try await connection.query(
                """
                SELECT log_id, device_id, provider, outcome, reason FROM notification_deliveries
                WHERE log_id = ANY(\(ids)::int8[]) ORDER BY id
                """, logger: logger
            ).collect() {
                let (logID, deviceID, provider, outcome, reason) = try row.decode(
                    (Int64, Int64?, String, String, String?).self)
                attempts[logID, default: []].append(
                    RecordedAttempt(
                        deviceID: deviceID, provider: provider,
                        outcome: DeliveryOutcome(rawValue: outcome) ?? .retryLater, reason: reason))
            }
            let claims = logs.map { UnfinishedClaim(logID: $0.id, period: $0.period, attempts: attempts[$0.id] ?? []) }
            let resolutions = decide(claims)
            _ = try await connection.query(
                """
                UPDATE notification_logs l
                SET status = r.status, detail = r.detail, finished_at = to_timestamp(\(now)),
                    updated_at = to_timestamp(\(now)), run_id = \(runID)
                FROM unnest(\(resolutions.map(\.logID))::int8[], \(resolutions.map(\.status.rawValue))::text[],
                            \(resolutions.map { $0.detail ?? "" })::text[], \(resolutions.map(\.period))::text[])
                     AS r(id, status, detail, period)
                WHERE l.id = r.id AND l.period_key = r.period AND l.period_key = ANY(\(resolutions.map(\.period))::text[])
                """, logger: logger
            ).collect()
            return claims
        }
    }

    /// The partitions there are, and those that rows sitting in the default partitions belong in.
    private func historyCatalog() async throws(JobError) -> (existing: Set<String>, inDefault: [HistoryPartition]) {
        let rows = try await rows(
            "reading the history partitions",
            """
            SELECT 'p', c.relname::text, 0::int8 FROM pg_inherits i JOIN pg_class c ON c.oid = i.inhrelid
            WHERE i.inhparent IN ('notification_logs'::regclass, 'notification_deliveries'::regclass)
            UNION ALL
            SELECT DISTINCT 'l', left(period_key, 7), 0::int8 FROM notification_logs_default
            UNION ALL
            SELECT DISTINCT 'd', '', extract(epoch FROM date_trunc('month', created_at, 'UTC'))::int8
            FROM notification_deliveries_default
            """)
        var existing = Set<String>()
        var inDefault: [HistoryPartition] = []
        for row in rows {
            let (kind, name, month) = try decode(row, (String, String, Int64).self)
            switch kind {
            case "p": existing.insert(name)
            case "l": if let partition = HistoryPartition.logs(holding: name) { inDefault.append(partition) }
            default: inDefault.append(HistoryPartition.deliveries(holding: month))
            }
        }
        return (existing, inDefault)
    }

    /// Makes `partition` as a table of its own, moves into it the default partition's rows that belong there,
    /// and attaches it. With the default partition locked, no row can slip in between.
    private func attach(_ partition: HistoryPartition) async throws(JobError) {
        let parent = partition.table.rawValue
        let defaultPartition = partition.table.defaultPartition
        let (bounds, belongs) = Self.bounds(partition)
        let logger = self.logger
        try await transaction("creating history partition \(partition.name)") { connection in
            _ = try await connection.query("SELECT pg_advisory_xact_lock(\(Self.historyLockKey))", logger: logger)
                .collect()
            let exists =
                try await connection.query(
                    "SELECT to_regclass(\(partition.name)) IS NOT NULL", logger: logger
                ).collect().first?.decode(Bool.self) ?? false
            if exists { return }
            for statement in [
                "SET LOCAL lock_timeout = '\(Self.historyLockTimeout)'",
                "LOCK TABLE \(defaultPartition) IN ACCESS EXCLUSIVE MODE",
                """
                CREATE TABLE \(partition.name) (LIKE \(parent) INCLUDING DEFAULTS INCLUDING CONSTRAINTS)
                \(Self.storage(partition.table))
                """,
                """
                WITH moved AS (DELETE FROM \(defaultPartition) WHERE \(belongs) RETURNING *)
                INSERT INTO \(partition.name) SELECT * FROM moved
                """,
                "ALTER TABLE \(parent) ATTACH PARTITION \(partition.name) FOR VALUES \(bounds)",
            ] {
                _ = try await connection.query(PostgresQuery(unsafeSQL: statement), logger: logger).collect()
            }
        }
        logger.info("history partition created", metadata: ["partition": "\(partition.name)"])
    }

    /// The partition's `FOR VALUES` clause and the same range as a condition on its table's rows. Every value
    /// is made of digits, `-`, `:`, `+` and spaces by ``HistoryPartition``: SQL literals, never user input.
    static func bounds(_ partition: HistoryPartition) -> (clause: String, condition: String) {
        switch partition.table {
        case .logs:
            let (lower, upper) = partition.keyBounds
            return ("FROM ('\(lower)') TO ('\(upper)')", "period_key >= '\(lower)' AND period_key < '\(upper)'")
        case .deliveries:
            let (lower, upper) = partition.timeBounds
            let from = "'\(LocalDate.split(wallSeconds: lower).date) 00:00:00+00'"
            let to = "'\(LocalDate.split(wallSeconds: upper).date) 00:00:00+00'"
            return ("FROM (\(from)) TO (\(to))", "created_at >= \(from) AND created_at < \(to)")
        }
    }

    package func dropExpiredHistoryPartitions(
        deliveriesBefore: Int64, logsBefore: Int64, guards: PeriodGuards, dryRun: Bool
    ) async throws(JobError) -> [HistoryPartitionDrop] {
        let (existing, _) = try await historyCatalog()
        let candidates = existing.compactMap { HistoryPartition(name: $0) }
            .filter { $0.deliveriesAllBefore(deliveriesBefore) || $0.periodsEnded(guards) }
            .sorted { $0.name < $1.name }
        var dropped: [HistoryPartitionDrop] = []
        for partition in candidates {
            // A log partition goes only if each of its rows is one the janitor's row rule would delete (the
            // check stops at the first row that is not); then its rows are counted for the summary.
            let check: PostgresQuery =
                partition.table == .logs
                ? """
                SELECT CASE WHEN EXISTS (SELECT 1 FROM \(unescaped: partition.name)
                                         WHERE NOT (\(unescaped: guards.expiredLogSQL(.postgres, before: logsBefore))))
                            THEN -1 ELSE (SELECT count(*) FROM \(unescaped: partition.name)) END
                """
                : "SELECT count(*) FROM \(unescaped: partition.name)"
            if dryRun {
                let rows = try await rows("checking \(partition.name)", check)
                if let row = rows.first, case let count = try decode(row, Int.self), count >= 0 {
                    dropped.append(HistoryPartitionDrop(partition: partition, rows: count))
                }
                continue
            }
            let logger = self.logger
            do throws(JobError) {
                let count = try await transaction("dropping history partition \(partition.name)") { connection in
                    // Rows of an ended period are not written any more; the lock makes sure of it while the
                    // rows are checked, and lets every other partition be written meanwhile.
                    _ = try await connection.query(
                        PostgresQuery(unsafeSQL: "SET LOCAL lock_timeout = '\(Self.historyLockTimeout)'"),
                        logger: logger
                    ).collect()
                    _ = try await connection.query(
                        PostgresQuery(unsafeSQL: "LOCK TABLE \(partition.name) IN SHARE MODE"), logger: logger
                    ).collect()
                    let count =
                        try await connection.query(check, logger: logger).collect().first?.decode(Int.self) ?? -1
                    guard count >= 0 else { return count }
                    _ = try await connection.query(
                        PostgresQuery(unsafeSQL: "DROP TABLE \(partition.name)"), logger: logger
                    ).collect()
                    return count
                }
                if count >= 0 {
                    dropped.append(HistoryPartitionDrop(partition: partition, rows: count))
                    logger.info(
                        "history partition dropped", metadata: ["partition": "\(partition.name)", "rows": "\(count)"])
                }
            } catch  where error.isTemporary {
                logger.warning(
                    "history partition kept for the next run: the table was busy; the row rules delete what they may",
                    metadata: ["partition": "\(partition.name)", "error": "\(error.message)"])
            }
        }
        return dropped
    }
}

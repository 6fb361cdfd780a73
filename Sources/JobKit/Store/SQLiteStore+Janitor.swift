import GRDB

extension SQLiteStore: JanitorStore {
    private static func providerClause(_ provider: Provider?) -> String {
        provider == nil ? "" : " AND provider = :provider"
    }

    public func staleDeviceCount(seenBefore: Int64, provider: Provider?) async throws(JobError) -> Int {
        try await read("counting stale devices") { db in
            try Int.fetchOne(
                db,
                sql: "SELECT count(*) FROM user_devices WHERE is_active = 1 AND last_seen < :before"
                    + Self.providerClause(provider),
                arguments: ["before": seenBefore, "provider": provider?.rawValue]) ?? 0
        }
    }

    public func deactivateStaleDevices(seenBefore: Int64, provider: Provider?, reason: String, now: Int64, limit: Int)
        async throws(JobError) -> Int
    {
        try await write("deactivating stale devices") { db in
            try db.execute(
                sql: """
                    UPDATE user_devices SET is_active = 0, deactivated_at = :now, deactivation_reason = :reason, updated_at = :now
                    WHERE id IN (SELECT id FROM user_devices WHERE is_active = 1 AND last_seen < :before\(Self.providerClause(provider))
                                 LIMIT :limit)
                    """,
                arguments: [
                    "now": now, "reason": reason, "before": seenBefore, "provider": provider?.rawValue, "limit": limit,
                ])
            return db.changesCount
        }
    }

    public func probeCandidates(seenBefore: Int64, notBefore: Int64, limit: Int) async throws(JobError) -> [Device] {
        try await read("selecting devices to probe") { db in
            try Row.fetchAll(
                db,
                sql: """
                    SELECT id, user_id, token, provider, platform, apns_environment FROM user_devices
                    WHERE is_active = 1 AND provider = 'fcm' AND last_seen < ? AND last_seen >= ?
                    ORDER BY last_seen LIMIT ?
                    """, arguments: [seenBefore, notBefore, limit]
            ).map { row throws(JobError) in
                try Device(
                    storedID: row[0], userID: row[1], token: row[2], provider: row[3], platform: row[4],
                    apnsEnvironment: row[5])
            }
        }
    }

    public func deactivate(deviceIDs: [Int64], reason: String, now: Int64) async throws(JobError) -> Int {
        guard !deviceIDs.isEmpty else { return 0 }
        return try await write("deactivating devices") { db in
            var changed = 0
            let statement = try db.cachedStatement(
                sql: """
                    UPDATE user_devices SET is_active = 0, deactivated_at = ?, deactivation_reason = ?, updated_at = ?
                    WHERE id = ? AND is_active = 1
                    """)
            for id in deviceIDs {
                try statement.execute(arguments: [now, reason, now, id])
                changed += db.changesCount
            }
            return changed
        }
    }

    public func deliveryCount(before: Int64) async throws(JobError) -> Int {
        try await read("counting old deliveries") { db in
            try Int.fetchOne(
                db, sql: "SELECT count(*) FROM notification_deliveries WHERE created_at < ?", arguments: [before]) ?? 0
        }
    }

    public func deleteDeliveries(before: Int64, limit: Int) async throws(JobError) -> Int {
        try await write("deleting old deliveries") { db in
            try db.execute(
                sql: """
                    DELETE FROM notification_deliveries
                    WHERE id IN (SELECT id FROM notification_deliveries WHERE created_at < ? ORDER BY created_at LIMIT ?)
                    """, arguments: [before, limit])
            return db.changesCount
        }
    }

    public func expiredLogCount(before: Int64, guards: PeriodGuards) async throws(JobError) -> Int {
        let expired = guards.expiredLogSQL(.sqlite, before: before)
        return try await read("counting old log rows") { db in
            try Int.fetchOne(db, sql: "SELECT count(*) FROM notification_logs WHERE \(expired)") ?? 0
        }
    }

    public func deleteExpiredLogs(before: Int64, guards: PeriodGuards, limit: Int) async throws(JobError) -> Int {
        try await write("deleting old log rows") { db in
            try db.execute(
                sql: """
                    DELETE FROM notification_logs
                    WHERE id IN (SELECT id FROM notification_logs WHERE \(guards.expiredLogSQL(.sqlite, before: before))
                                 ORDER BY claimed_at LIMIT ?)
                    """, arguments: [limit])
            return db.changesCount
        }
    }

    public func oldRunCount(before: Int64) async throws(JobError) -> Int {
        try await read("counting old run records") { db in
            try Int.fetchOne(
                db, sql: "SELECT count(*) FROM job_runs WHERE \(RunRetention.expiredRunSQL(.sqlite, before: before))")
                ?? 0
        }
    }

    public func deleteOldRuns(before: Int64, limit: Int) async throws(JobError) -> Int {
        try await write("deleting old run records") { db in
            try db.execute(
                sql: """
                    DELETE FROM job_runs
                    WHERE id IN (SELECT id FROM job_runs WHERE \(RunRetention.expiredRunSQL(.sqlite, before: before))
                                 ORDER BY run_at LIMIT ?)
                    """, arguments: [limit])
            return db.changesCount
        }
    }

    public func inactiveDeviceCount(deactivatedBefore: Int64) async throws(JobError) -> Int {
        try await read("counting inactive devices") { db in
            try Int.fetchOne(
                db, sql: "SELECT count(*) FROM user_devices WHERE is_active = 0 AND deactivated_at < ?",
                arguments: [deactivatedBefore]) ?? 0
        }
    }

    public func purgeInactiveDevices(deactivatedBefore: Int64, limit: Int) async throws(JobError) -> Int {
        try await write("purging inactive devices") { db in
            try db.execute(
                sql: """
                    DELETE FROM user_devices
                    WHERE id IN (SELECT id FROM user_devices WHERE is_active = 0 AND deactivated_at < ? ORDER BY deactivated_at LIMIT ?)
                    """, arguments: [deactivatedBefore, limit])
            return db.changesCount
        }
    }

    /// SQLite's history is one table each: retention is the row rules alone.
    public func dropExpiredHistoryPartitions(
        deliveriesBefore: Int64, logsBefore: Int64, guards: PeriodGuards, dryRun: Bool
    ) async throws(JobError) -> [HistoryPartitionDrop] { [] }
}

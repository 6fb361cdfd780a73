import GRDB
import JobKit

extension SQLiteStore: JanitorStore {
    private static func providerClause(_ provider: Provider?) -> String {
        provider == nil ? "" : " AND provider = :provider"
    }

    package func staleDeviceCount(seenBefore: Int64, provider: Provider?) async throws(JobError) -> Int {
        try await read("counting stale devices") { db in
            try Int.fetchOne(
                db,
                sql: "SELECT count(*) FROM user_devices WHERE is_active = 1 AND mirrored = 0 AND last_seen < :before"
                    + Self.providerClause(provider),
                arguments: ["before": seenBefore, "provider": provider?.rawValue]) ?? 0
        }
    }

    package func deactivateStaleDevices(seenBefore: Int64, provider: Provider?, reason: String, now: Int64, limit: Int)
        async throws(JobError) -> Int
    {
        try await write("deactivating stale devices") { db in
            try db.execute(
                sql: """
                    UPDATE user_devices SET is_active = 0, deactivated_at = :now, deactivation_reason = :reason, updated_at = :now
                    WHERE id IN (SELECT id FROM user_devices WHERE is_active = 1 AND mirrored = 0 AND last_seen < :before\(Self.providerClause(provider))
                                 LIMIT :limit)
                    """,
                arguments: [
                    "now": now, "reason": reason, "before": seenBefore, "provider": provider?.rawValue, "limit": limit,
                ])
            return db.changesCount
        }
    }

    package func probeCandidates(seenBefore: Int64, notBefore: Int64, limit: Int) async throws(JobError) -> [Device] {
        try await read("selecting devices to probe") { db in
            try Row.fetchAll(
                db,
                sql: """
                    SELECT id, user_id, token, provider, platform, apns_environment, token_kind FROM user_devices
                    WHERE is_active = 1 AND provider IN (\(Provider.sqlList(\.probesQuietTokens)))
                      AND last_seen < ? AND last_seen >= ?
                    ORDER BY last_seen LIMIT ?
                    """, arguments: [seenBefore, notBefore, limit]
            ).map { row throws(JobError) in
                try Device(
                    storedID: row[0], userID: row[1], token: row[2], provider: row[3], platform: row[4],
                    apnsEnvironment: row[5], kind: row[6])
            }
        }
    }

    package func activeDeviceCounts() async throws(JobError) -> [String: Int] {
        try await read("counting active devices") { db in
            Dictionary(
                uniqueKeysWithValues: try Row.fetchAll(
                    db,
                    sql: """
                        SELECT provider || '/' || token_kind, count(*) FROM user_devices WHERE is_active = 1 GROUP BY 1
                        """
                ).map { row -> (String, Int) in (row[0], row[1]) })
        }
    }

    package func deactivate(deviceIDs: [Int64], reason: String, now: Int64) async throws(JobError) -> Int {
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

    package func count(_ rule: RetentionRule) async throws(JobError) -> Int {
        try await read("counting \(rule.rows)") { db in
            try Int.fetchOne(db, sql: "SELECT count(*) FROM \(rule.table) WHERE \(rule.condition(.sqlite))") ?? 0
        }
    }

    package func delete(_ rule: RetentionRule, limit: Int) async throws(JobError) -> Int {
        try await write("deleting \(rule.rows)") { db in
            try db.execute(
                sql: """
                    DELETE FROM \(rule.table)
                    WHERE \(rule.key) IN (SELECT \(rule.key) FROM \(rule.table) WHERE \(rule.condition(.sqlite))
                                 ORDER BY \(rule.oldestBy) LIMIT ?)
                    """, arguments: [limit])
            return db.changesCount
        }
    }

    /// SQLite's history is one table each: retention is the row rules alone.
    package func dropExpiredHistoryPartitions(
        deliveriesBefore: Int64, logsBefore: Int64, guards: PeriodGuards, dryRun: Bool
    ) async throws(JobError) -> [HistoryPartitionDrop] { [] }
}

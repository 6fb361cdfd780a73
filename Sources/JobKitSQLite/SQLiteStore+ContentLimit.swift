import Foundation
import GRDB
import JobKit

extension SQLiteStore: ContentLimitStore {
    /// The quota state of up to `count` users: `periodsFrom`, then the user ids.
    static let limitSnapshotStatements = ChunkedSQL(largest: 500) { count in
        """
        SELECT u.id, u.timezone, u.locale, u.plan,
               coalesce(s.content_limit_warnings_enabled, 1), s.quiet_hours_start, s.quiet_hours_end,
               EXISTS (SELECT 1 FROM user_devices d WHERE d.user_id = u.id AND d.is_active = 1),
               (SELECT json_group_array(json_array(l.id, l.notification_type, l.period_key, l.status, l.claimed_at,
                                                   l.message_index, l.locale, l.run_id, l.deliver_after,
                                                   \(jsonString("l.params", key: LimitParams.planKey))))
                FROM notification_logs l
                WHERE l.user_id = u.id AND l.notification_type IN (\(NotificationType.sqlList(\.isQuotaWarning)))
                  AND l.period_key >= ?)
        FROM users u LEFT JOIN notification_settings s ON s.user_id = u.id
        WHERE u.id IN (\(Array(repeating: "?", count: count).joined(separator: ",")))
        """
    }

    package func limitSnapshots(userIDs: [String], periodsFrom: String) async throws(JobError)
        -> [String: LimitSnapshot]
    {
        let ids = Array(Set(userIDs))
        guard !ids.isEmpty else { return [:] }
        return try await read("reading users' quota state") { db in
            var snapshots: [String: LimitSnapshot] = [:]
            try Self.limitSnapshotStatements.forEachChunk(of: ids.count) { range, sql in
                let arguments = StatementArguments([periodsFrom] + Array(ids[range]))
                for row in try Row.fetchAll(db.cachedStatement(sql: sql), arguments: arguments) {
                    let snapshot = LimitSnapshot(
                        userID: row[0], timezone: row[1], locale: row[2], plan: row[3], warningsEnabled: row[4],
                        quietHoursStart: row[5], quietHoursEnd: row[6], hasActiveDevice: row[7],
                        logs: LimitSnapshot.parseLogs(json: row[8]))
                    snapshots[snapshot.userID] = snapshot
                }
            }
            return snapshots
        }
    }

    package func userExists(id: String) async throws(JobError) -> Bool {
        try await read("looking up a user") { db in
            try Row.fetchOne(db.cachedStatement(sql: "SELECT 1 FROM users WHERE id = ?"), arguments: [id]) != nil
        }
    }

    /// ``WarningClaim``'s steps, each as one statement, in one write transaction.
    package func claimLimitWarning(
        _ warning: QuotaWarning, deliverAfter: Int64?, runID: String, now: Int64, staleBefore: Int64
    )
        async throws(JobError) -> LimitClaim?
    {
        let claim = WarningClaim(warning, deliverAfter: deliverAfter)
        let params = LimitParams.encode(warning.params)
        return try await write("claiming a quota warning") { db in
            try Self.requireUser(warning.userID, db)
            var step = claim.first
            while true {
                let answer: WarningClaim.Answer
                switch step {
                case .supersede(let lower):
                    try db.execute(
                        sql: """
                            INSERT INTO notification_logs
                                (user_id, notification_type, period_key, status, run_id, claimed_at, finished_at, updated_at, detail)
                            VALUES (?, ?, ?, 'superseded', ?, ?, ?, ?, ?)
                            ON CONFLICT (user_id, notification_type, period_key) DO UPDATE SET
                                status = 'superseded', updated_at = excluded.updated_at, detail = ?
                            WHERE \(DeliveryLifecycle.supersedableSQL(table: "notification_logs"))
                            """,
                        arguments: [
                            warning.userID, lower.rawValue, warning.period, runID, now, now, now,
                            DeliveryLifecycle.neverSentDetail, DeliveryLifecycle.overtakenDetail,
                        ])
                    answer = .done
                case .exists(let type):
                    answer = .exists(
                        try Bool.fetchOne(
                            db,
                            sql: """
                                SELECT 1 FROM notification_logs WHERE user_id = ? AND notification_type = ? AND period_key = ?
                                """, arguments: [warning.userID, type.rawValue, warning.period]) != nil)
                case .insert(let status):
                    answer = .inserted(
                        try Int64.fetchOne(
                            db,
                            sql: """
                                INSERT INTO notification_logs
                                    (user_id, notification_type, period_key, status, message_index, locale, run_id, attempts, claimed_at,
                                     updated_at, deliver_after, params)
                                VALUES (?, ?, ?, ?, ?, ?, ?, 1, ?, ?, ?, ?)
                                ON CONFLICT (user_id, notification_type, period_key) DO NOTHING
                                RETURNING id
                                """,
                            arguments: [
                                warning.userID, warning.type.rawValue, warning.period, status.rawValue,
                                warning.messageIndex, warning.locale, runID, now, now, deliverAfter, params,
                            ]))
                case .takeOver:
                    answer = .tookOver(
                        try Row.fetchOne(
                            db,
                            sql: """
                                UPDATE notification_logs
                                SET \(DeliveryLifecycle.reclaimSetSQL(.sqlite, now: now)), run_id = ?
                                WHERE user_id = ? AND notification_type = ? AND period_key = ?
                                  AND \(DeliveryLifecycle.takeOverSQL(.sqlite, staleBefore: staleBefore))
                                RETURNING id, message_index, locale, params
                                """,
                            arguments: [runID, warning.userID, warning.type.rawValue, warning.period]
                        ).map { WarningClaim.TakenOver(id: $0[0], messageIndex: $0[1], locale: $0[2], params: $0[3]) })
                }
                switch claim.next(after: step, answer) {
                case .step(let next): step = next
                case .claimed(let result): return result
                }
            }
        }
    }

    package func pendingWarnings(now: Int64, staleBefore: Int64, afterID: Int64, limit: Int) async throws(JobError)
        -> [PendingWarning]
    {
        try await read("reading pending quota warnings") { db in
            // `status IN (…)` selects the partial index of unfinished warnings; the lifecycle's rule decides.
            try Row.fetchAll(
                db,
                sql: """
                    SELECT l.id, l.user_id, l.notification_type, l.period_key, l.message_index, l.locale, l.params
                    FROM notification_logs l JOIN users u ON u.id = l.user_id
                    WHERE \(NotificationType.quotaWarningSQL("l.notification_type")) AND \(DeliveryLifecycle.unfinishedSQL(table: "l"))
                      AND l.claimed_at >= ? AND l.id > ?
                      AND \(DeliveryLifecycle.claimableWarningSQL(.sqlite, now: now, staleBefore: staleBefore, table: "l"))
                    ORDER BY l.id LIMIT ?
                    """, arguments: [now - DeliveryLifecycle.retryHorizon, afterID, limit]
            ).map { row throws(JobError) in
                PendingWarning(
                    logID: row[0],
                    warning: QuotaWarning(
                        userID: row[1], type: try NotificationType(storedIn: row[0], row[2]), period: row[3],
                        messageIndex: row[4] ?? 0, locale: row[5] ?? CopyCatalog.fallbackLocale,
                        params: LimitParams.decode(row[6])))
            }
        }
    }

    package func claimPendingWarnings(_ ids: [Int64], runID: String, now: Int64, staleBefore: Int64)
        async throws(JobError) -> Set<Int64>
    {
        guard !ids.isEmpty else { return [] }
        return try await write("claiming pending quota warnings") { db in
            var won: Set<Int64> = []
            let statement = try db.makeStatement(
                sql: """
                    UPDATE notification_logs
                    SET \(DeliveryLifecycle.reclaimSetSQL(.sqlite, now: now)), run_id = ?
                    WHERE id = ? AND \(DeliveryLifecycle.claimableWarningSQL(.sqlite, now: now, staleBefore: staleBefore))
                    RETURNING id
                    """)
            for id in ids {
                if let claimed = try Int64.fetchOne(statement, arguments: [runID, id]) {
                    won.insert(claimed)
                }
            }
            return won
        }
    }

    package func holdPendingWarnings(_ until: [Int64: Int64], runID: String, now: Int64, staleBefore: Int64)
        async throws(JobError) -> Set<Int64>
    {
        guard !until.isEmpty else { return [] }
        return try await write("holding pending quota warnings") { db in
            var held: Set<Int64> = []
            let statement = try db.makeStatement(
                sql: """
                    UPDATE notification_logs
                    SET status = 'deferred', deliver_after = ?, run_id = ?, claimed_at = ?, updated_at = ?
                    WHERE id = ? AND \(DeliveryLifecycle.claimableWarningSQL(.sqlite, now: now, staleBefore: staleBefore))
                    RETURNING id
                    """)
            for (id, deliverAfter) in until.sorted(by: { $0.key < $1.key }) {
                if let kept = try Int64.fetchOne(statement, arguments: [deliverAfter, runID, now, now, id]) {
                    held.insert(kept)
                }
            }
            return held
        }
    }

    package func deliveredDevices(logIDs: [Int64]) async throws(JobError) -> [Int64: Set<Int64>] {
        guard !logIDs.isEmpty else { return [:] }
        return try await read("reading earlier deliveries") { db in
            var result: [Int64: Set<Int64>] = [:]
            let statement = try db.cachedStatement(
                sql: """
                    SELECT device_id FROM notification_deliveries
                    WHERE log_id = ? AND outcome = 'delivered' AND device_id IS NOT NULL
                    """)
            for id in Set(logIDs) {
                let devices = try Int64.fetchSet(statement, arguments: [id])
                if !devices.isEmpty { result[id] = devices }
            }
            return result
        }
    }
}

import Foundation
import JobKit
import PostgresNIO

extension PostgresStore: ContentLimitStore {
    package func userExists(id: String) async throws(JobError) -> Bool {
        try await !rows("looking up a user", "SELECT 1 FROM users WHERE id = \(id)").isEmpty
    }

    package func limitSnapshots(userIDs: [String], periodsFrom: String) async throws(JobError)
        -> [String: LimitSnapshot]
    {
        let ids = Array(Set(userIDs))
        guard !ids.isEmpty else { return [:] }
        var snapshots: [String: LimitSnapshot] = [:]
        for row in try await rows(
            "reading users' quota state",
            """
            SELECT u.id, u.timezone, u.locale, u.plan,
                   coalesce(s.content_limit_warnings_enabled, true), s.quiet_hours_start, s.quiet_hours_end,
                   EXISTS (SELECT 1 FROM user_devices d WHERE d.user_id = u.id AND d.is_active),
                   (SELECT json_agg(json_build_array(l.id, l.notification_type, l.period_key, l.status,
                                                     \(unescaped: Self.epoch("l.claimed_at")), l.message_index, l.locale,
                                                     l.run_id, \(unescaped: Self.epoch("l.deliver_after")),
                                                     \(unescaped: Self.jsonString("l.params", key: LimitParams.planKey))))::text
                    FROM notification_logs l
                    WHERE l.user_id = u.id
                      AND l.notification_type IN (\(unescaped: NotificationType.sqlList(\.isQuotaWarning)))
                      AND l.period_key >= \(periodsFrom))
            FROM users u LEFT JOIN notification_settings s ON s.user_id = u.id
            WHERE u.id = ANY(\(ids)::text[])
            """
        ) {
            let (id, timezone, locale, plan, enabled, quietStart, quietEnd, hasDevice, logs) = try decode(
                row, (String, String, String, String, Bool, String?, String?, Bool, String?).self)
            snapshots[id] = LimitSnapshot(
                userID: id, timezone: timezone, locale: locale, plan: plan, warningsEnabled: enabled,
                quietHoursStart: quietStart, quietHoursEnd: quietEnd, hasActiveDevice: hasDevice,
                logs: LimitSnapshot.parseLogs(json: logs))
        }
        return snapshots
    }

    /// ``WarningClaim``'s steps, each as one statement, in one transaction.
    package func claimLimitWarning(
        _ warning: QuotaWarning, deliverAfter: Int64?, runID: String, now: Int64, staleBefore: Int64
    )
        async throws(JobError) -> LimitClaim?
    {
        let logger = self.logger
        let claim = WarningClaim(warning, deliverAfter: deliverAfter)
        let params = LimitParams.encode(warning.params)
        return try await transaction("claiming a quota warning") { connection -> LimitClaim? in
            try await Self.requireUser(warning.userID, on: connection, logger: logger)
            var step = claim.first
            while true {
                let answer: WarningClaim.Answer
                switch step {
                case .supersede(let lower):
                    _ = try await connection.query(
                        """
                        INSERT INTO notification_logs
                            (user_id, notification_type, period_key, status, run_id, claimed_at, finished_at, updated_at, detail)
                        VALUES (\(warning.userID), \(lower.rawValue), \(warning.period), 'superseded', \(runID), to_timestamp(\(now)),
                                to_timestamp(\(now)), to_timestamp(\(now)), \(DeliveryLifecycle.neverSentDetail))
                        ON CONFLICT (user_id, notification_type, period_key) DO UPDATE SET
                            status = 'superseded', updated_at = excluded.updated_at, detail = \(DeliveryLifecycle.overtakenDetail)
                        WHERE \(unescaped: DeliveryLifecycle.supersedableSQL(table: "notification_logs"))
                        """, logger: logger
                    ).collect()
                    answer = .done
                case .exists(let type):
                    answer = .exists(
                        try await connection.query(
                            """
                            SELECT 1 FROM notification_logs
                            WHERE user_id = \(warning.userID) AND notification_type = \(type.rawValue) AND period_key = \(warning.period)
                            """, logger: logger
                        ).collect().first != nil)
                case .insert(let status):
                    answer = .inserted(
                        try await connection.query(
                            """
                            INSERT INTO notification_logs
                                (user_id, notification_type, period_key, status, message_index, locale, run_id, attempts, claimed_at,
                                 updated_at, deliver_after, params)
                            VALUES (\(warning.userID), \(warning.type.rawValue), \(warning.period), \(status.rawValue),
                                    \(Int32(warning.messageIndex)), \(warning.locale), \(runID), 1, to_timestamp(\(now)),
                                    to_timestamp(\(now)), to_timestamp(\(deliverAfter)), \(params)::jsonb)
                            ON CONFLICT (user_id, notification_type, period_key) DO NOTHING
                            RETURNING id
                            """, logger: logger
                        ).collect().first?.decode(Int64.self))
                case .takeOver:
                    answer = .tookOver(
                        try await connection.query(
                            """
                            UPDATE notification_logs
                            SET \(unescaped: DeliveryLifecycle.reclaimSetSQL(.postgres, now: now)), run_id = \(runID)
                            WHERE user_id = \(warning.userID) AND notification_type = \(warning.type.rawValue) AND period_key = \(warning.period)
                              AND \(unescaped: DeliveryLifecycle.takeOverSQL(.postgres, staleBefore: staleBefore))
                            RETURNING id, message_index, locale, params::text
                            """, logger: logger
                        ).collect().first.map { row in
                            let (id, index, locale, stored) = try row.decode((Int64, Int?, String?, String?).self)
                            return WarningClaim.TakenOver(id: id, messageIndex: index, locale: locale, params: stored)
                        })
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
        // The join leaves out a user being deleted: the history has no foreign key here (migration 008).
        try await rows(
            "reading pending quota warnings",
            """
            SELECT l.id, l.user_id, l.notification_type, l.period_key, l.message_index, l.locale, l.params::text
            FROM notification_logs l JOIN users u ON u.id = l.user_id
            WHERE \(unescaped: NotificationType.quotaWarningSQL("l.notification_type")) AND \(unescaped: DeliveryLifecycle.unfinishedSQL(table: "l"))
              AND l.claimed_at >= to_timestamp(\(now - DeliveryLifecycle.retryHorizon)) AND l.id > \(afterID)
              AND \(unescaped: DeliveryLifecycle.claimableWarningSQL(.postgres, now: now, staleBefore: staleBefore, table: "l"))
            ORDER BY l.id LIMIT \(limit)
            """
        ).map { row throws(JobError) in
            let (id, userID, type, period, messageIndex, locale, params) = try decode(
                row, (Int64, String, String, String, Int?, String?, String?).self)
            return PendingWarning(
                logID: id,
                warning: QuotaWarning(
                    userID: userID, type: try NotificationType(storedIn: id, type), period: period,
                    messageIndex: messageIndex ?? 0, locale: locale ?? CopyCatalog.fallbackLocale,
                    params: LimitParams.decode(params)))
        }
    }

    package func claimPendingWarnings(_ ids: [Int64], runID: String, now: Int64, staleBefore: Int64)
        async throws(JobError) -> Set<Int64>
    {
        guard !ids.isEmpty else { return [] }
        let rows = try await write(
            "claiming pending quota warnings",
            """
            UPDATE notification_logs
            SET \(unescaped: DeliveryLifecycle.reclaimSetSQL(.postgres, now: now)), run_id = \(runID)
            WHERE id = ANY(\(ids)::int8[])
              AND \(unescaped: DeliveryLifecycle.claimableWarningSQL(.postgres, now: now, staleBefore: staleBefore))
            RETURNING id
            """)
        var won: Set<Int64> = []
        for row in rows { won.insert(try decode(row, Int64.self)) }
        return won
    }

    package func holdPendingWarnings(_ until: [Int64: Int64], runID: String, now: Int64, staleBefore: Int64)
        async throws(JobError) -> Set<Int64>
    {
        guard !until.isEmpty else { return [] }
        let ordered = until.sorted { $0.key < $1.key }
        let rows = try await write(
            "holding pending quota warnings",
            """
            UPDATE notification_logs l
            SET status = 'deferred', deliver_after = to_timestamp(h.deliver_after), run_id = \(runID),
                claimed_at = to_timestamp(\(now)), updated_at = to_timestamp(\(now))
            FROM unnest(\(ordered.map(\.key))::int8[], \(ordered.map(\.value))::int8[]) AS h(id, deliver_after)
            WHERE l.id = h.id
              AND \(unescaped: DeliveryLifecycle.claimableWarningSQL(.postgres, now: now, staleBefore: staleBefore, table: "l"))
            RETURNING l.id
            """)
        var held: Set<Int64> = []
        for row in rows { held.insert(try decode(row, Int64.self)) }
        return held
    }

    package func deliveredDevices(logIDs: [Int64]) async throws(JobError) -> [Int64: Set<Int64>] {
        guard !logIDs.isEmpty else { return [:] }
        var result: [Int64: Set<Int64>] = [:]
        for row in try await rows(
            "reading earlier deliveries",
            """
            SELECT log_id, device_id FROM notification_deliveries
            WHERE log_id = ANY(\(logIDs)::int8[]) AND outcome = 'delivered' AND device_id IS NOT NULL
            """)
        {
            let (logID, deviceID) = try decode(row, (Int64, Int64).self)
            result[logID, default: []].insert(deviceID)
        }
        return result
    }
}

extension PostgresStore: JanitorStore {
    package func staleDeviceCount(seenBefore: Int64, provider: Provider?) async throws(JobError) -> Int {
        try await count(
            "counting stale devices",
            """
            SELECT count(*) FROM user_devices
            WHERE is_active AND NOT mirrored AND last_seen < to_timestamp(\(seenBefore))
              AND (\(provider?.rawValue)::text IS NULL OR provider = \(provider?.rawValue))
            """)
    }

    /// Each batch skips rows another janitor holds (`SKIP LOCKED`), so two janitors never wait on each other.
    package func deactivateStaleDevices(seenBefore: Int64, provider: Provider?, reason: String, now: Int64, limit: Int)
        async throws(JobError) -> Int
    {
        try await changed(
            "deactivating stale devices",
            """
            WITH batch AS (
                SELECT id FROM user_devices
                WHERE is_active AND NOT mirrored AND last_seen < to_timestamp(\(seenBefore))
                  AND (\(provider?.rawValue)::text IS NULL OR provider = \(provider?.rawValue))
                LIMIT \(limit) FOR UPDATE SKIP LOCKED)
            UPDATE user_devices d SET is_active = false, deactivated_at = to_timestamp(\(now)), deactivation_reason = \(reason),
                   updated_at = to_timestamp(\(now))
            FROM batch WHERE d.id = batch.id
            RETURNING 1
            """)
    }

    package func probeCandidates(seenBefore: Int64, notBefore: Int64, limit: Int) async throws(JobError) -> [Device] {
        var devices: [Device] = []
        for row in try await rows(
            "selecting devices to probe",
            """
            SELECT id, user_id, token, provider, platform, apns_environment, token_kind FROM user_devices
            WHERE is_active AND provider IN (\(unescaped: Provider.sqlList(\.probesQuietTokens)))
              AND last_seen < to_timestamp(\(seenBefore))
              AND last_seen >= to_timestamp(\(notBefore))
            ORDER BY last_seen LIMIT \(limit)
            """)
        {
            devices.append(try Self.device(row))
        }
        return devices
    }

    package func activeDeviceCounts() async throws(JobError) -> [String: Int] {
        var counts: [String: Int] = [:]
        for row in try await rows(
            "counting active devices",
            "SELECT provider || '/' || token_kind, count(*) FROM user_devices WHERE is_active GROUP BY 1")
        {
            let (key, count) = try decode(row, (String, Int).self)
            counts[key] = count
        }
        return counts
    }

    package func deactivate(deviceIDs: [Int64], reason: String, now: Int64) async throws(JobError) -> Int {
        guard !deviceIDs.isEmpty else { return 0 }
        return try await changed(
            "deactivating devices",
            """
            UPDATE user_devices SET is_active = false, deactivated_at = to_timestamp(\(now)), deactivation_reason = \(reason),
                   updated_at = to_timestamp(\(now))
            WHERE id = ANY(\(deviceIDs)::int8[]) AND is_active
            RETURNING 1
            """)
    }

    package func count(_ rule: RetentionRule) async throws(JobError) -> Int {
        try await count(
            "counting \(rule.rows)",
            "SELECT count(*) FROM \(unescaped: rule.table) WHERE \(unescaped: rule.condition(.postgres))")
    }

    package func delete(_ rule: RetentionRule, limit: Int) async throws(JobError) -> Int {
        try await changed(
            "deleting \(rule.rows)",
            """
            WITH batch AS (
                SELECT \(unescaped: rule.key) FROM \(unescaped: rule.table) WHERE \(unescaped: rule.condition(.postgres))
                ORDER BY \(unescaped: rule.oldestBy) LIMIT \(max(1, limit)) FOR UPDATE SKIP LOCKED)
            DELETE FROM \(unescaped: rule.table) t USING batch WHERE t.\(unescaped: rule.key) = batch.\(unescaped: rule.key)
            RETURNING 1
            """)
    }
}

/// The report's queries are ``ReportSQL``'s; this runs them and decodes their rows.
extension PostgresStore: ReportStore {
    /// The rows of `query` (built from integers and constants only), each decoded by `decode`.
    private func all<T: Sendable>(
        _ query: String, _ context: String, _ decode: @escaping @Sendable (PostgresRow) throws -> T
    ) async throws(JobError) -> [T] {
        let logger = self.logger
        return try await read(context) { connection in
            try await connection.query(PostgresQuery(unsafeSQL: query), logger: logger).collect().map(decode)
        }
    }

    package func reminderOutcomes(from: Int64, to: Int64) async throws(JobError) -> [ReminderOutcomeRow] {
        try await all(ReportSQL(.postgres, from: from, to: to).reminderOutcomes, "reading the reminders' outcomes") {
            try $0.decode((String, Int, Int64, String, String, Int64?, String).self)
        }
    }

    package func remindedLocales(from: Int64, to: Int64) async throws(JobError) -> [(locale: String, users: Int)] {
        try await all(ReportSQL(.postgres, from: from, to: to).remindedLocales, "reading the reminded users' locales") {
            let (locale, users) = try $0.decode((String, Int).self)
            return (locale, users)
        }
    }

    package func pauseFigures(from: Int64, to: Int64) async throws(JobError) -> HealthReport.Pauses {
        let rows = try await all(ReportSQL(.postgres, from: from, to: to).pauses, "counting paused reminders") {
            let (paused, started, cameBack) = try $0.decode((Int, Int, Int).self)
            return HealthReport.Pauses(paused: paused, started: started, cameBack: cameBack)
        }
        return rows.first ?? HealthReport.Pauses()
    }

    package func healthFigures(from: Int64, to: Int64) async throws(JobError) -> HealthFigures {
        let sql = ReportSQL(.postgres, from: from, to: to)
        let logger = self.logger
        return try await read("building the report") { connection in
            func all(_ query: String) async throws -> [PostgresRow] {
                try await connection.query(PostgresQuery(unsafeSQL: query), logger: logger).collect()
            }
            var figures = HealthFigures()
            figures.claims = try await all(sql.claims).map { try $0.decode((String, String, String, Int).self) }
            figures.countDeliveries(
                try await all(sql.deliveries).map { try $0.decode((String, String, String, Int?, Int).self) })
            figures.activeDevices = try await all(sql.activeDevices).map { try $0.decode((String, Int).self) }
            figures.deactivations = try await all(sql.deactivations).map { try $0.decode((String, Int).self) }
            figures.lastRuns = try await all(sql.lastRuns).map {
                try $0.decode((String, Int64, String, Int?, String?).self)
            }
            figures.windowRuns = try await all(sql.windowRuns).map {
                try $0.decode((String, Int, Int, Int, Int64?).self)
            }
            figures.lastFailures = try await all(sql.lastFailures).map { try $0.decode((String, Int64, String?).self) }
            return figures
        }
    }
}

import Foundation
import JobKit
import PostgresNIO

extension PostgresStore: ReminderStore {
    package var selectsWhileClaiming: Bool { true }

    /// The zones that have enabled users, as `zones(tz)` (plus one NULL row): a loose index scan, one index
    /// probe per zone instead of reading every user.
    static let enabledZonesCTE = """
        WITH RECURSIVE zones(tz) AS (
            SELECT (SELECT min(timezone) FROM notification_settings WHERE diary_reminder_enabled)
            UNION ALL
            SELECT (SELECT min(timezone) FROM notification_settings
                    WHERE diary_reminder_enabled AND timezone > zones.tz)
            FROM zones WHERE zones.tz IS NOT NULL
        )

        """

    package func reminderZones() async throws(JobError) -> [String] {
        // A loose index scan: one index probe per zone instead of reading every user.
        try await rows(
            "listing reminder zones",
            PostgresQuery(
                unsafeSQL: Self.enabledZonesCTE + """
                    SELECT tz FROM zones WHERE tz IS NOT NULL
                    """)
        ).map { row throws(JobError) in try decode(row, String.self) }
    }

    package func enabledUserCount(zone: String) async throws(JobError) -> Int {
        try await count(
            "counting users in a zone",
            """
            SELECT count(*) FROM notification_settings
            WHERE diary_reminder_enabled AND timezone = \(zone) AND reminder_minute IS NOT NULL
            """)
    }

    package func malformedReminderTimeCount() async throws(JobError) -> Int {
        // Per zone, an index range (NULL minutes sort together); a plain count would read every enabled
        // user's index entry, a cost that grows with the user base rather than with who is due.
        try await count(
            "counting malformed reminder times",
            PostgresQuery(
                unsafeSQL: Self.enabledZonesCTE + """
                    SELECT coalesce(sum((SELECT count(*) FROM notification_settings s
                                         WHERE s.diary_reminder_enabled AND s.timezone = zones.tz AND s.reminder_minute IS NULL)), 0)::bigint
                    FROM zones WHERE tz IS NOT NULL
                    """))
    }

    /// A run's due set, from the `notification_settings_due` index alone: one index range per query.
    static func dueKeysQuery(_ queries: [DueQuery]) -> PostgresQuery {
        """
        SELECT q.i - 1, s.user_id
        FROM unnest(\(queries.map(\.zone))::text[], \(queries.map { Int32($0.minutes.lowerBound) })::int4[],
                    \(queries.map { Int32($0.minutes.upperBound) })::int4[]) WITH ORDINALITY AS q(zone, low, high, i)
        CROSS JOIN LATERAL (
            SELECT n.user_id FROM notification_settings n
            WHERE n.diary_reminder_enabled AND n.timezone = q.zone AND n.reminder_minute BETWEEN q.low AND q.high) s
        """
    }

    package func dueKeys(_ queries: [DueQuery]) async throws(JobError) -> [DueKey] {
        guard !queries.isEmpty else { return [] }
        var keys = try await rows("selecting due users", Self.dueKeysQuery(queries)).map { row throws(JobError) in
            var columns = Columns(row)
            let query = try columns.next(Int64.self)
            let userID = try columns.next(String.self)
            return DueKey(userID: userID, query: Int(query))
        }
        keys.sort()
        return keys
    }

    /// ``PreparedQuery``'s kind for ``dueCandidatesQuery(_:of:)``.
    enum DueCandidates: PreparedQueryKind {
        static let statementName = "diary_push_due_candidates"
        static let sql = dueCandidatesQuery([], of: []).sql
    }

    /// The candidates of one page of keys (each with its query's zone, minutes, day and period), driven by the
    /// keys: every rule is a per-row index probe by user id, written so that the planner cannot choose
    /// otherwise: scalar subqueries and `LATERAL` lookups with `LIMIT 1`. (With plain joins, the log table's
    /// statistics — stale while a run is inserting thousands of claims — led PostgreSQL to rescan it for every
    /// row, and a small page can make a scan of the settings look cheaper than its probes.)
    ///
    /// Today's log row and the previous reminder's words come from one backward scan of the log index
    /// (`user_id, notification_type, period_key`) over the query's previous periods and today: its first row is
    /// today's claim if there is one, and otherwise, in the common case, the previous reminder. Only when today's
    /// row exists, or the latest earlier row has no words, does a second probe look further back. The page's
    /// lowest and highest period keys, two parameters, let PostgreSQL keep only those log partitions (pruned as
    /// the statement starts, which a prepared statement's generic plan does too).
    static func dueCandidatesQuery(_ keys: [DueKey], of queries: [DueQuery]) -> PostgresQuery {
        let pageQueries = Set(keys.map(\.query)).map { queries[$0] }
        let lowest = pageQueries.map(\.previousPeriods.lowerBound).min() ?? ""
        let highest = pageQueries.map(\.period).max() ?? ""
        // One row per (candidate, active device), or one with null device columns: the candidate's probes run
        // once in the fenced (`OFFSET 0`) subquery, then its devices are joined on, which saves the page the
        // statement that read them after selection.
        return """
            SELECT c.*, dv.id, dv.token, dv.provider, dv.platform, dv.apns_environment, dv.token_kind FROM (
                SELECT p.k, p.query, s.user_id, (SELECT u.locale FROM users u WHERE u.id = s.user_id),
                       coalesce((SELECT true FROM diary_entries e
                                 WHERE e.user_id = s.user_id AND e.created_at >= to_timestamp(p.day_start)
                                   AND e.created_at < to_timestamp(p.day_end) LIMIT 1), false),
                       l.id, l.status, \(unescaped: epoch("l.claimed_at")), l.message_index, l.locale, l.run_id,
                       CASE WHEN l.latest IS NOT NULL THEN l.latest
                            WHEN l.found THEN
                                (SELECT x.message_index FROM notification_logs x
                                 WHERE x.user_id = s.user_id AND x.notification_type = p.type
                                   AND x.period_key < p.period AND x.period_key >= p.previous_from
                                   AND x.message_index IS NOT NULL
                                   AND x.period_key BETWEEN \(lowest) AND \(highest)
                                 ORDER BY x.period_key DESC LIMIT 1)
                       END
                FROM (
                    SELECT k.k, k.query, k.user_id, q.zone, q.low, q.high, q.day_start, q.day_end, q.period, q.type,
                           q.previous_from
                    FROM unnest(\(keys.map { Int64($0.query) })::int8[], \(keys.map(\.userID))::text[])
                         WITH ORDINALITY AS k(query, user_id, k)
                    JOIN unnest(\(queries.map(\.zone))::text[], \(queries.map { Int32($0.minutes.lowerBound) })::int4[],
                                \(queries.map { Int32($0.minutes.upperBound) })::int4[],
                                \(queries.map(\.day.lowerBound))::int8[], \(queries.map(\.day.upperBound))::int8[],
                                \(queries.map(\.period))::text[], \(queries.map(\.type.rawValue))::text[],
                                \(queries.map(\.previousPeriods.lowerBound))::text[])
                         WITH ORDINALITY AS q(zone, low, high, day_start, day_end, period, type, previous_from, i)
                         ON q.i = k.query + 1
                    OFFSET 0) p
                CROSS JOIN LATERAL (
                    SELECT n.user_id FROM notification_settings n
                    WHERE n.user_id = p.user_id AND n.diary_reminder_enabled AND n.timezone = p.zone
                      AND n.reminder_minute BETWEEN p.low AND p.high
                    LIMIT 1) s
                LEFT JOIN LATERAL (
                    -- today's row (the id null when there is none), or the words of the latest row before it
                    SELECT CASE WHEN x.today THEN x.id END AS id, CASE WHEN x.today THEN x.status END AS status,
                           CASE WHEN x.today THEN x.claimed_at END AS claimed_at,
                           CASE WHEN x.today THEN x.message_index END AS message_index,
                           CASE WHEN x.today THEN x.locale END AS locale,
                           CASE WHEN x.today THEN x.run_id END AS run_id,
                           CASE WHEN NOT x.today THEN x.message_index END AS latest, true AS found
                    FROM (SELECT y.id, y.status, y.claimed_at, y.message_index, y.locale, y.run_id,
                                 y.period_key = p.period AS today
                          FROM notification_logs y
                          WHERE y.user_id = s.user_id AND y.notification_type = p.type
                            AND y.period_key <= p.period AND y.period_key >= p.previous_from
                            AND y.period_key BETWEEN \(lowest) AND \(highest)
                          ORDER BY y.period_key DESC LIMIT 1) x) l ON true
                OFFSET 0) c
            LEFT JOIN user_devices dv ON dv.user_id = c.user_id AND dv.is_active
            ORDER BY c.k, dv.id
            """
    }

    package func dueCandidates(_ keys: [DueKey], of queries: [DueQuery]) async throws(JobError) -> [ReminderCandidate] {
        guard !keys.isEmpty else { return [] }
        var candidates: [ReminderCandidate] = []
        var current: (k: Int64, candidate: ReminderCandidate, devices: [Device], hasDevice: Bool)?
        func finish() {
            guard let (_, c, devices, hasDevice) = current else { return }
            candidates.append(
                ReminderCandidate(
                    query: c.query, userID: c.userID, locale: c.locale, hasActiveDevice: hasDevice,
                    wroteToday: c.wroteToday,
                    log: c.log, previousMessageIndex: c.previousMessageIndex, devices: devices))
        }
        let statement = PreparedQuery<DueCandidates>(Self.dueCandidatesQuery(keys, of: queries))
        for row in try await read("selecting due users", { connection in try await run(statement, on: connection) }) {
            var columns = Columns(row)
            let k = try columns.next(Int64.self)
            let query = try columns.next(Int64.self)
            let userID = try columns.next(String.self)
            let locale = try columns.next(String.self)
            let wrote = try columns.next(Bool.self)
            let logID = try columns.next(Int64?.self)
            let status = try columns.next(String?.self)
            let claimedAt = try columns.next(Int64?.self)
            let messageIndex = try columns.next(Int?.self)
            let logLocale = try columns.next(String?.self)
            let runID = try columns.next(String?.self)
            let previous = try columns.next(Int?.self)
            let deviceID = try columns.next(Int64?.self)
            let token = try columns.next(String?.self)
            let provider = try columns.next(String?.self)
            let platform = try columns.next(String?.self)
            let environment = try columns.next(String?.self)
            let kind = try columns.next(String?.self)
            if current?.k != k {
                finish()
                let log = logID.map { id in
                    LogState(
                        id: id, status: ClaimStatus(rawValue: status ?? ""), claimedAt: claimedAt ?? 0,
                        messageIndex: messageIndex, locale: logLocale, runID: runID ?? "")
                }
                current = (
                    k,
                    ReminderCandidate(
                        query: Int(query), userID: userID, locale: locale, hasActiveDevice: false, wroteToday: wrote,
                        log: log, previousMessageIndex: previous),
                    [], false
                )
            }
            guard let deviceID, let token, let provider, let platform, let kind else { continue }
            current?.hasDevice = true
            current?.devices.append(
                try Device(
                    storedID: deviceID, userID: userID, token: token, provider: provider, platform: platform,
                    apnsEnvironment: environment, kind: kind))
        }
        finish()
        return candidates
    }

    package func reminderHistory(_ keys: [HistoryKey]) async throws(JobError) -> [HistoryKey: ReminderHistory] {
        guard !keys.isEmpty else { return [:] }
        // The page's lowest and highest period keys keep the log's look-up to those partitions.
        let lowest = keys.map(\.periods.lowerBound).min() ?? ""
        let highest = keys.map(\.periods.upperBound).max() ?? ""
        var histories: [HistoryKey: ReminderHistory] = [:]
        for row in try await rows(
            "reading reminder history",
            """
            SELECT k.i, (SELECT \(unescaped: Self.epoch("max(e.created_at)")) FROM diary_entries e WHERE e.user_id = k.user_id),
                   \(unescaped: Self.epoch("n.updated_at")), p.period_key, \(unescaped: Self.epoch("p.paused_at")), p.ignored,
                   r.periods, r.claimed, r.indices, r.reached
            FROM unnest(\(keys.map(\.userID))::text[], \(keys.map(\.periods.lowerBound))::text[],
                        \(keys.map(\.periods.upperBound))::text[]) WITH ORDINALITY AS k(user_id, low, high, i)
            JOIN users u ON u.id = k.user_id
            LEFT JOIN notification_settings n ON n.user_id = k.user_id
            LEFT JOIN reminder_pauses p ON p.user_id = k.user_id
            CROSS JOIN LATERAL (
                SELECT coalesce(array_agg(l.period_key::text ORDER BY l.period_key), '{}') AS periods,
                       coalesce(array_agg(\(unescaped: Self.epoch("l.claimed_at")) ORDER BY l.period_key), '{}') AS claimed,
                       coalesce(array_agg(coalesce(l.message_index, -1)::int8 ORDER BY l.period_key), '{}') AS indices,
                       coalesce(array_agg(l.status IN ('sent', 'partial') ORDER BY l.period_key), '{}') AS reached
                FROM notification_logs l
                WHERE l.user_id = k.user_id AND \(unescaped: NotificationType.diaryReminder.sql("l.notification_type"))
                  AND l.period_key >= k.low AND l.period_key < k.high
                  AND l.period_key BETWEEN \(lowest) AND \(highest)) r
            """)
        {
            let (i, lastEntry, settingsAt, period, pausedAt, ignored, periods, claimed, indices, reached) = try decode(
                row, (Int64, Int64?, Int64?, String?, Int64?, Int32?, [String], [Int64], [Int64], [Bool]).self)
            var history = ReminderHistory(lastEntryAt: lastEntry, settingsChangedAt: settingsAt)
            history.reminders = periods.indices.map {
                PastReminder(
                    period: periods[$0], claimedAt: claimed[$0], messageIndex: indices[$0] < 0 ? nil : Int(indices[$0]),
                    reached: reached[$0])
            }
            if let period, let pausedAt, let ignored {
                history.pause = PauseRecord(period: period, pausedAt: pausedAt, ignored: Int(ignored))
            }
            histories[keys[Int(i) - 1]] = history
        }
        return histories
    }

    package func copyOutcomes(days: [String], record: Bool, now: Int64) async throws(JobError) -> [CopyOutcomeRow] {
        let counting = CopyOutcomeCounting(.postgres, days: days, record: record, now: now)
        guard let countedSQL = counting.countedSQL, let totalsSQL = counting.totalsSQL else { return [] }
        let logger = self.logger
        func query(_ connection: PostgresConnection, _ sql: String) async throws -> [PostgresRow] {
            try await connection.query(PostgresQuery(unsafeSQL: sql), logger: logger).collect()
        }
        func outcomes(_ connection: PostgresConnection, _ sql: String) async throws -> [CopyOutcomeRow] {
            try await query(connection, sql).map { row in
                let (locale, index, sent, wrote) = try row.decode((String, Int, Int, Int).self)
                return CopyOutcomeRow(
                    locale: locale, messageIndex: index, outcome: MessageOutcome(sent: sent, wrote: wrote))
            }
        }
        // A run counting a day at the same time waits on the day's mark, then finds it counted.
        let body: (PostgresConnection) async throws -> [CopyOutcomeRow] = { connection in
            let counted = Set(try await query(connection, countedSQL).map { try $0.decode(String.self) })
            var rows: [CopyOutcomeRow] = []
            for step in counting.steps(counted: counted) {
                switch step {
                case .read(let sql): rows += try await outcomes(connection, sql)
                case .record(let mark, let store):
                    if try await !query(connection, mark).isEmpty { _ = try await query(connection, store) }
                }
            }
            return rows + (try await outcomes(connection, totalsSQL))
        }
        return record
            ? try await transaction("counting the words' outcomes", body)
            : try await read("counting the words' outcomes", body)
    }

    /// ``ReminderClaim``'s two primitives, a page each in one statement: one `INSERT … ON CONFLICT DO NOTHING
    /// RETURNING` for all of it (in key order, so concurrent runners lock rows in the same order and cannot
    /// deadlock), then one conditional `UPDATE` taking over `retry` rows and stale claims: only one runner's
    /// update matches.
    package func claim(_ requests: [ClaimRequest], runID: String, now: Int64, staleBefore: Int64) async throws(JobError)
        -> [Claim]
    {
        guard !requests.isEmpty else { return [] }
        let logger = self.logger
        let (inserted, takenOver) = try await transaction("claiming notifications") { connection in
            var inserted: [ReminderClaim.Key: Int64] = [:]
            for row in try await self.run(
                PreparedQuery<ClaimInsert>(Self.claimInsertQuery(requests, runID: runID, now: now)), on: connection)
            {
                var columns = Columns(row)
                let id = try columns.next(Int64.self)
                let key = ReminderClaim.Key(
                    userID: try columns.next(String.self), type: try columns.next(String.self),
                    period: try columns.next(String.self))
                inserted[key] = id
            }
            // The pauses the inserted last reminders start, with them (a user deleted meanwhile has no row: none).
            let pausing = ReminderClaim.pausesStarted(requests, inserted: inserted)
            if !pausing.isEmpty {
                let records = pausing.map(\.pause)
                _ = try await connection.query(
                    """
                    INSERT INTO reminder_pauses (user_id, period_key, paused_at, ignored)
                    SELECT p.user_id, p.period, to_timestamp(p.at), p.ignored
                    FROM unnest(\(pausing.map(\.userID))::text[], \(records.map(\.period))::text[],
                                \(records.map(\.pausedAt))::int8[], \(records.map { Int32($0.ignored) })::int4[])
                         AS p(user_id, period, at, ignored)
                    \(unescaped: ReminderClaim.pauseReplacesSQL)
                    """, logger: logger
                ).collect()
            }
            var takenOver: [ReminderClaim.Key: ReminderClaim.TakenOver] = [:]
            let rest = ReminderClaim.remaining(requests, inserted: inserted)
            guard !rest.isEmpty else { return (inserted, takenOver) }
            let taken = try await connection.query(
                """
                UPDATE notification_logs l
                SET \(unescaped: DeliveryLifecycle.reclaimSetSQL(.postgres, now: now, table: "l")), run_id = \(runID)
                FROM unnest(\(rest.map(\.userID))::text[], \(rest.map(\.type.rawValue))::text[],
                            \(rest.map(\.period))::text[]) AS r(user_id, type, period)
                WHERE l.user_id = r.user_id AND l.notification_type = r.type AND l.period_key = r.period
                  AND l.period_key = ANY(\(Set(rest.map(\.period)).sorted())::text[])
                  AND \(unescaped: DeliveryLifecycle.takeOverSQL(.postgres, staleBefore: staleBefore, table: "l"))
                RETURNING l.id, l.user_id, l.notification_type, l.period_key, l.message_index, l.locale
                """, logger: logger
            ).collect()
            var rows: [(ReminderClaim.Key, Int64, Int?, String?)] = []
            for row in taken {
                let (id, user, type, period, messageIndex, locale) = try row.decode(
                    (Int64, String, String, String, Int?, String?).self)
                rows.append((ReminderClaim.Key(userID: user, type: type, period: period), id, messageIndex, locale))
            }
            guard !rows.isEmpty else { return (inserted, takenOver) }
            var delivered: [Int64: Set<Int64>] = [:]
            for row in try await connection.query(
                """
                SELECT log_id, device_id FROM notification_deliveries
                WHERE log_id = ANY(\(rows.map(\.1))::int8[]) AND outcome = 'delivered' AND device_id IS NOT NULL
                """, logger: logger
            ).collect() {
                let (logID, deviceID) = try row.decode((Int64, Int64).self)
                delivered[logID, default: []].insert(deviceID)
            }
            for (key, id, messageIndex, locale) in rows {
                takenOver[key] = ReminderClaim.TakenOver(
                    id: id, messageIndex: messageIndex, locale: locale, delivered: delivered[id] ?? [])
            }
            return (inserted, takenOver)
        }
        return ReminderClaim.claims(requests, inserted: inserted, takenOver: takenOver)
    }

    package func activeDevices(userIDs: [String]) async throws(JobError) -> [String: [Device]] {
        guard !userIDs.isEmpty else { return [:] }
        var result: [String: [Device]] = [:]
        for row in try await rows(
            "loading devices",
            """
            SELECT id, user_id, token, provider, platform, apns_environment, token_kind FROM user_devices
            WHERE is_active AND user_id = ANY(\(userIDs)::text[]) ORDER BY user_id, id
            """)
        {
            let device = try Self.device(row)
            result[device.userID, default: []].append(device)
        }
        return result
    }

    static func device(_ row: PostgresRow) throws(JobError) -> Device {
        let (id, userID, token, provider, platform, environment, kind) = try decode(
            row, (Int64, String, String, String, String, String?, String).self)
        return try Device(
            storedID: id, userID: userID, token: token, provider: provider, platform: platform,
            apnsEnvironment: environment, kind: kind)
    }

    /// ``PreparedQuery``'s kind for ``claimInsertQuery(_:runID:now:)``.
    enum ClaimInsert: PreparedQueryKind {
        static let statementName = "diary_push_claim"
        static let sql = claimInsertQuery([], runID: "", now: 0).sql
    }

    /// A page's claims as new log rows, in key order (concurrent runners lock rows in the same order and cannot
    /// deadlock); a row that exists already is left alone and not returned. A user deleted since the page was
    /// read gets no row (the history has no foreign key to refuse it, migration 008). The users are looked up,
    /// not locked: holding them (`FOR KEY SHARE`, as a foreign key's check does) made the claims 5 % slower
    /// (BENCHMARKS.md#the-runs-pages). A delete in the milliseconds between the lookup and the commit is as one just after the
    /// claim: the reminder goes out as it would have anyway, and the claim's row is left for retention.
    static func claimInsertQuery(_ requests: [ClaimRequest], runID: String, now: Int64) -> PostgresQuery {
        """
        INSERT INTO notification_logs
            (user_id, notification_type, period_key, status, message_index, locale, run_id, attempts, claimed_at, updated_at)
        SELECT r.user_id, r.type, r.period, 'claimed', r.message_index, r.locale, \(runID), 1,
               to_timestamp(\(now)), to_timestamp(\(now))
        FROM unnest(\(requests.map(\.userID))::text[], \(requests.map(\.type.rawValue))::text[],
                    \(requests.map(\.period))::text[], \(requests.map { Int64($0.messageIndex) })::int8[],
                    \(requests.map(\.locale))::text[]) AS r(user_id, type, period, message_index, locale)
        WHERE EXISTS (SELECT 1 FROM users u WHERE u.id = r.user_id)
        ORDER BY r.user_id COLLATE "C", r.type COLLATE "C", r.period COLLATE "C"
        ON CONFLICT (user_id, notification_type, period_key) DO NOTHING
        RETURNING id, user_id, notification_type, period_key
        """
    }

    /// ``PreparedQuery``'s kind for ``deliveriesInsertQuery(_:runID:now:)``.
    enum DeliveriesInsert: PreparedQueryKind {
        static let statementName = "diary_push_deliveries"
        static let sql = deliveriesInsertQuery([], runID: "", now: 0).sql
    }

    /// A page's device attempts: one row each, the columns as one array parameter each.
    static func deliveriesInsertQuery(_ deliveries: [DeliveryRecord], runID: String, now: Int64) -> PostgresQuery {
        """
        -- Arrays hold no NULL: '' and -1 stand for "none".
        INSERT INTO notification_deliveries
            (log_id, device_id, provider, outcome, reason, provider_message_id, attempts, latency_ms, run_id, created_at)
        SELECT r.log_id, r.device_id, r.provider, r.outcome, nullif(r.reason, ''),
               nullif(r.provider_message_id, ''), r.attempts, nullif(r.latency_ms, -1), \(runID),
               to_timestamp(\(now))
        FROM unnest(\(deliveries.map(\.logID))::int8[], \(deliveries.map(\.deviceID))::int8[],
                    \(deliveries.map(\.report.channel.rawValue))::text[], \(deliveries.map(\.report.outcome.rawValue))::text[],
                    \(deliveries.map { $0.report.reason ?? "" })::text[],
                    \(deliveries.map { $0.report.providerMessageID ?? "" })::text[],
                    \(deliveries.map { Int32(clamping: max(1, $0.report.attempts)) })::int4[],
                    \(deliveries.map { Int32(clamping: $0.report.latencyMs ?? -1) })::int4[])
             AS r(log_id, device_id, provider, outcome, reason, provider_message_id, attempts, latency_ms)
        """
    }

    /// ``PreparedQuery``'s kind for ``resolutionQueries(_:runID:now:)``.
    enum Resolution: PreparedQueryKind {
        static let statementName = "diary_push_resolution"
        static let sql = resolutionQuery(
            ClaimResolutionGroup(status: .sent, detail: nil), ids: [], periods: [], runID: "", now: 0
        ).sql
    }

    /// The statements that resolve claims: one per (status, detail) value (a page has a handful), each a
    /// join-free `UPDATE … WHERE id = ANY(ids)`, an index probe per row whatever the (stale, mid-run) statistics
    /// say. Joined to a row set instead, a page's resolutions were planned as a scan of the log, or as a nested
    /// loop comparing every row with every row (143 ms a page of 1,000 at 1,000,000 users; BENCHMARKS.md#postgresqls-page-statements).
    static func resolutionQueries(_ resolutions: [ClaimResolution], runID: String, now: Int64) -> [PostgresQuery] {
        var groups: [ClaimResolutionGroup: (ids: [Int64], periods: Set<String>)] = [:]
        var order: [ClaimResolutionGroup] = []
        for resolution in resolutions {
            let group = ClaimResolutionGroup(status: resolution.status, detail: resolution.detail)
            if groups[group] == nil { order.append(group) }
            groups[group, default: ([], [])].ids.append(resolution.logID)
            groups[group, default: ([], [])].periods.insert(resolution.period)
        }
        // `period_key = ANY(periods)` lets the planner look in the partitions of the page's periods only.
        return order.map { group in
            let (ids, periods) = groups[group] ?? ([], [])
            return resolutionQuery(group, ids: ids, periods: periods.sorted(), runID: runID, now: now)
        }
    }

    private static func resolutionQuery(
        _ group: ClaimResolutionGroup, ids: [Int64], periods: [String], runID: String, now: Int64
    ) -> PostgresQuery {
        """
        UPDATE notification_logs
        SET status = \(group.status.rawValue), finished_at = to_timestamp(\(now)), updated_at = to_timestamp(\(now)),
            detail = \(group.detail)
        WHERE id = ANY(\(ids)::int8[]) AND period_key = ANY(\(periods)::text[])
          AND run_id = \(runID) AND status = 'claimed'
        """
    }

    /// Device attempts, dead-token deactivations and the claims' final states, in one transaction: one statement
    /// for the attempts (rows travel as one array parameter per column), one for the dead tokens, and one per
    /// resolution value, whatever the page size.
    package func record(_ deliveries: [DeliveryRecord], resolutions: [ClaimResolution], runID: String, now: Int64)
        async throws(JobError)
    {
        guard !deliveries.isEmpty || !resolutions.isEmpty else { return }
        struct Dead: Encodable { let device_id: Int64, reason: String, invalid_since: Int64? }
        let deadDevices = DeliveryLifecycle.deadDevices(deliveries)
        let dead = Self.json(
            deadDevices.map { Dead(device_id: $0.deviceID, reason: $0.reason, invalid_since: $0.invalidSince) })
        // The `= ANY(ids)` condition makes each update an index probe, whatever the (stale, mid-run)
        // statistics say about the table.
        let deadIDs = deadDevices.map(\.deviceID)
        let resolving = Self.resolutionQueries(resolutions, runID: runID, now: now)
        let logger = self.logger
        // One statement (the journal's answers while a page is sent: no dead token, no resolution) is atomic on
        // its own: one round trip instead of three, which is how long a kill may find those answers unrecorded.
        let statements = (deliveries.isEmpty ? 0 : 1) + (deadIDs.isEmpty ? 0 : 1) + resolving.count
        try await transaction("recording deliveries", explicit: statements > 1) { connection in
            if !deliveries.isEmpty {
                _ = try await self.run(
                    PreparedQuery<DeliveriesInsert>(Self.deliveriesInsertQuery(deliveries, runID: runID, now: now)),
                    on: connection)
                if !deadIDs.isEmpty {
                    _ = try await connection.query(
                        """
                        UPDATE user_devices d
                        SET is_active = false, deactivated_at = to_timestamp(\(now)), deactivation_reason = r.reason,
                            updated_at = to_timestamp(\(now))
                        FROM jsonb_to_recordset(\(dead)::jsonb) AS r(device_id int8, reason text, invalid_since int8)
                        WHERE d.id = r.device_id AND d.id = ANY(\(deadIDs)::int8[]) AND d.is_active
                          AND (r.invalid_since IS NULL OR d.last_seen <= to_timestamp(r.invalid_since))
                        """, logger: logger
                    ).collect()
                }
            }
            for query in resolving { _ = try await self.run(PreparedQuery<Resolution>(query), on: connection) }
        }
    }

    package func userSnapshot(userID: String) async throws(JobError) -> UserSnapshot? {
        let logger = self.logger
        return try await read("reading a user") { connection -> UserSnapshot? in
            guard
                let row = try await connection.query(
                    """
                    SELECT u.id, u.timezone, u.locale, u.plan, s.user_id IS NOT NULL,
                           coalesce(s.diary_reminder_enabled, false), coalesce(s.reminder_time, ''),
                           coalesce(s.content_limit_warnings_enabled, false)
                    FROM users u LEFT JOIN notification_settings s ON s.user_id = u.id
                    WHERE u.id = \(userID)
                    """, logger: logger
                ).collect().first
            else { return nil }
            let (id, timezone, locale, plan, hasSettings, enabled, time, warnings) = try row.decode(
                (String, String, String, String, Bool, Bool, String, Bool).self)
            let devices = try await connection.query(
                """
                SELECT id, user_id, token, provider, platform, apns_environment, token_kind FROM user_devices
                WHERE user_id = \(userID) AND is_active ORDER BY id
                """, logger: logger
            ).collect().map { row in try Self.device(row) }
            return UserSnapshot(
                userID: id, timezone: timezone, locale: locale, plan: plan,
                settings: hasSettings
                    ? UserSnapshot.Settings(
                        diaryReminderEnabled: enabled, reminderTime: time,
                        contentLimitWarningsEnabled: warnings) : nil,
                activeDevices: devices)
        }
    }

    package func entryCount(userID: String, in range: Range<Int64>) async throws(JobError) -> Int {
        try await count(
            "counting diary entries",
            """
            SELECT count(*) FROM diary_entries WHERE user_id = \(userID)
              AND created_at >= to_timestamp(\(range.lowerBound)) AND created_at < to_timestamp(\(range.upperBound))
            """)
    }

    package func logState(userID: String, type: NotificationType, period: String) async throws(JobError) -> LogState? {
        try await rows(
            "reading the notification log",
            """
            SELECT id, status, \(unescaped: Self.epoch("claimed_at")), message_index, locale, run_id FROM notification_logs
            WHERE user_id = \(userID) AND notification_type = \(type.rawValue) AND period_key = \(period)
            """
        ).first.map { row throws(JobError) in
            let (id, status, claimedAt, messageIndex, locale, runID) = try decode(
                row, (Int64, String, Int64, Int?, String?, String).self)
            return LogState(
                id: id, status: ClaimStatus(rawValue: status), claimedAt: claimedAt, messageIndex: messageIndex,
                locale: locale, runID: runID)
        }
    }

    package func deliveryAttempts(logID: Int64) async throws(JobError) -> [DeliveryAttempt] {
        try await rows(
            "reading the deliveries of a claim",
            """
            SELECT device_id, outcome, reason, run_id, \(unescaped: Self.epoch("created_at")) FROM notification_deliveries
            WHERE log_id = \(logID) ORDER BY created_at, id
            """
        ).map { row throws(JobError) in
            let (deviceID, outcome, reason, runID, at) = try decode(row, (Int64?, String, String?, String, Int64).self)
            return DeliveryOutcome(rawValue: outcome).map {
                DeliveryAttempt(deviceID: deviceID, outcome: $0, reason: reason, runID: runID, at: at)
            }
        }.compactMap { $0 }
    }

    package func previousMessageIndex(userID: String, type: NotificationType, in periods: Range<String>)
        async throws(JobError) -> Int?
    {
        try await rows(
            "reading the notification log",
            """
            SELECT message_index FROM notification_logs
            WHERE user_id = \(userID) AND notification_type = \(type.rawValue)
              AND period_key >= \(periods.lowerBound) AND period_key < \(periods.upperBound) AND message_index IS NOT NULL
            ORDER BY period_key DESC LIMIT 1
            """
        ).first.map { row throws(JobError) in try decode(row, Int.self) }
    }

    package func recordRun(
        id: String, job: String, runAt: Int64, durationMs: Int?, outcome: RunOutcome, summaryJSON: String
    ) async throws(JobError) {
        _ = try await write(
            "recording the run",
            """
            INSERT INTO job_runs (id, job, run_at, duration_ms, outcome, summary)
            VALUES (\(id), \(job), to_timestamp(\(runAt)), \(durationMs.map { Int32(clamping: $0) }), \(outcome.rawValue), \(summaryJSON)::jsonb)
            ON CONFLICT (id) DO UPDATE SET duration_ms = excluded.duration_ms, outcome = excluded.outcome,
                                           summary = excluded.summary
            """)
    }

    package func failRunsWithoutEnd(job: String, before: Int64, error: String) async throws(JobError)
        -> [(id: String, runAt: Int64)]
    {
        try await write(
            "recording runs without an end",
            """
            UPDATE job_runs SET outcome = 'failed',
                                summary = coalesce(summary, '{}'::jsonb) || jsonb_build_object('error', \(error)::text)
            WHERE job = \(job) AND outcome = 'running' AND run_at < to_timestamp(\(before))
            RETURNING id, extract(epoch FROM run_at)::bigint
            """
        ).map { row throws(JobError) in try decode(row, (String, Int64).self) }
            .map { (id: $0.0, runAt: $0.1) }.sorted { ($0.runAt, $0.id) < ($1.runAt, $1.id) }
    }
}

// MARK: - Helpers shared by the extensions

extension PostgresStore {
    func count(_ context: String, _ query: PostgresQuery) async throws(JobError) -> Int {
        guard let row = try await rows(context, query).first else { return 0 }
        return try decode(row, Int.self)
    }

    /// Rows as one JSON array parameter (for `jsonb_to_recordset`): one statement for a whole batch. Keys are
    /// the properties' names in snake case, as the columns are named (`reminderTime` is `reminder_time`).
    static func json<T: Encodable>(_ rows: [T]) -> String {
        let encoder = JSONEncoder()
        encoder.keyEncodingStrategy = .convertToSnakeCase
        guard let data = try? encoder.encode(rows) else { return "[]" }
        return String(decoding: data, as: UTF8.self)
    }
}

func decode<each T: PostgresDecodable>(_ row: PostgresRow, _ type: (repeat each T).Type) throws(JobError) -> (
    repeat each T
) {
    do {
        return try row.decode(type)
    } catch {
        throw .software("unexpected column types from PostgreSQL: \(String(describing: type))")
    }
}

/// A row's columns read one by one, for the statements that return many rows a page: each `next` is
/// specialized for its column's type where it is called. (`PostgresRow.decode` of a tuple, as ``decode(_:_:)``
/// uses, takes an unspecialized generic step per column: 7 % of the job's CPU went to decoding candidates.)
struct Columns {
    private var cells: PostgresRow.Iterator

    init(_ row: PostgresRow) { cells = row.makeIterator() }

    mutating func next<T: PostgresDecodable>(_: T.Type = T.self) throws(JobError) -> T {
        guard let cell = cells.next() else { throw .software("PostgreSQL returned fewer columns than expected") }
        do {
            return try cell.decode(T.self)
        } catch {
            throw .software("unexpected column type from PostgreSQL: \(cell.columnName) is not \(T.self)")
        }
    }
}

/// The values a claim is resolved to, shared by many claims of a page.
private struct ClaimResolutionGroup: Hashable {
    let status: ClaimStatus
    let detail: String?
}

/// The delivery-health report's queries, written once for both stores: a store runs each one and decodes its rows
/// into ``HealthFigures`` (or ``ReminderOutcomeRow``); only the spelling of instants, days and booleans comes from
/// the ``SQLDialect``. `from..<to` is the window, in UTC seconds (integers: nothing to escape).
package struct ReportSQL: Sendable {
    package let dialect: SQLDialect
    package let from: Int64
    package let to: Int64

    package init(_ dialect: SQLDialect, from: Int64, to: Int64) {
        self.dialect = dialect
        self.from = from
        self.to = to
    }

    private func inWindow(_ column: String) -> String {
        "\(column) >= \(dialect.instant(from)) AND \(column) < \(dialect.instant(to))"
    }

    /// ``HealthFigures/claims``: day, type, status, count.
    package var claims: String {
        """
        SELECT \(dialect.utcDay("claimed_at")), notification_type,
               \(DeliveryLifecycle.reportStatusSQL(dialect, now: to)), count(*)
        FROM notification_logs WHERE \(inWindow("claimed_at"))
        GROUP BY 1, 2, 3 ORDER BY 1, 2, 3
        """
    }

    /// The rows of ``HealthFigures/countDeliveries(_:)``, one scan of the window's deliveries for three of the
    /// report's sections: day, provider, outcome, answer-time bucket or NULL, count.
    package var deliveries: String {
        """
        SELECT \(dialect.utcDay("created_at")), provider, outcome,
               \(dialect.integer(HealthReport.AnswerTimes.bucketSQL("latency_ms"))), count(*)
        FROM notification_deliveries WHERE \(inWindow("created_at")) GROUP BY 1, 2, 3, 4
        """
    }

    /// ``HealthFigures/activeDevices``: key, count.
    package var activeDevices: String {
        """
        SELECT \(dialect.byteOrder("platform || '/' || provider || '/' || token_kind")), count(*) FROM user_devices
        WHERE \(dialect.isTrue("is_active")) GROUP BY 1 ORDER BY 1
        """
    }

    /// ``HealthFigures/deactivations``: reason, count.
    package var deactivations: String {
        """
        SELECT \(dialect.byteOrder("coalesce(deactivation_reason, 'unknown')")), count(*) FROM user_devices
        WHERE NOT \(dialect.isTrue("is_active")) AND \(inWindow("deactivated_at")) GROUP BY 1 ORDER BY 2 DESC, 1
        """
    }

    /// The error a run's summary recorded, when it is a string.
    private var runError: String { dialect.jsonString("summary", key: "error") }

    /// ``HealthFigures/lastRuns``: job, instant, outcome, duration, error.
    package var lastRuns: String {
        """
        SELECT job, \(dialect.epoch("run_at")), outcome, duration_ms, \(runError)
        FROM job_runs WHERE run_at = \(JobRunsSQL.latestRunAt)
        """
    }

    /// ``HealthFigures/windowRuns``: job, runs, failed, unfinished, latest unfinished instant.
    package var windowRuns: String {
        """
        SELECT \(dialect.byteOrder("job")), count(*), sum(CASE WHEN outcome = 'failed' THEN 1 ELSE 0 END),
               sum(CASE WHEN outcome = 'running' THEN 1 ELSE 0 END),
               \(dialect.epoch("max(CASE WHEN outcome = 'running' THEN run_at END)"))
        FROM job_runs WHERE \(inWindow("run_at")) GROUP BY 1 ORDER BY 1
        """
    }

    /// ``HealthFigures/lastFailures``: job, instant, error.
    package var lastFailures: String {
        """
        SELECT job_runs.job, \(dialect.epoch("run_at")), \(runError)
        FROM job_runs
        JOIN (SELECT job, max(run_at) AS at FROM job_runs
              WHERE outcome = 'failed' AND \(inWindow("run_at")) GROUP BY job) latest
          ON job_runs.job = latest.job AND job_runs.run_at = latest.at
        WHERE outcome = 'failed'
        """
    }

    /// Reminders sent (or partly sent) and claimed in the window: the ``ReminderOutcomeRow``s.
    private var sentReminders: String {
        """
        l.notification_type = '\(NotificationType.diaryReminder.rawValue)' AND l.status IN ('\(ClaimStatus.sent)', '\(ClaimStatus.partial)')
          AND \(inWindow("l.claimed_at"))
        """
    }

    /// ``ReportStore/reminderOutcomes(from:to:)``: locale, message index, instant, period, time zone, first entry
    /// within two days after it, user.
    package var reminderOutcomes: String {
        let at = "coalesce(l.finished_at, l.claimed_at)"
        return """
            SELECT l.locale, l.message_index, \(dialect.epoch(at)), l.period_key, u.timezone,
                   (SELECT \(dialect.epoch("min(e.created_at)")) FROM diary_entries e
                    WHERE e.user_id = l.user_id AND e.created_at >= \(at)
                      AND e.created_at < \(dialect.plusSeconds(at, 2 * 86_400))),
                   l.user_id
            FROM notification_logs l JOIN users u ON u.id = l.user_id
            WHERE \(sentReminders) AND l.locale IS NOT NULL AND l.message_index IS NOT NULL
              AND NOT EXISTS (SELECT 1 FROM reminder_pauses p WHERE p.user_id = l.user_id AND p.period_key = l.period_key)
            """
    }

    /// ``ReportStore/pauseFigures(from:to:)``: users paused at the window's end (no entry and no settings change
    /// since their pause), pauses that started in the window, and of those, the users who wrote again before its
    /// end.
    package var pauses: String {
        let wroteAfter = """
            EXISTS (SELECT 1 FROM diary_entries e WHERE e.user_id = p.user_id AND e.created_at > p.paused_at
                      AND e.created_at < \(dialect.instant(to)))
            """
        return """
            SELECT coalesce(sum(CASE WHEN NOT \(wroteAfter)
                                      AND (s.updated_at IS NULL OR s.updated_at <= p.paused_at) THEN 1 ELSE 0 END), 0),
                   coalesce(sum(CASE WHEN \(inWindow("p.paused_at")) THEN 1 ELSE 0 END), 0),
                   coalesce(sum(CASE WHEN \(inWindow("p.paused_at")) AND \(wroteAfter) THEN 1 ELSE 0 END), 0)
            FROM reminder_pauses p LEFT JOIN notification_settings s ON s.user_id = p.user_id
            WHERE p.paused_at < \(dialect.instant(to))
            """
    }

    /// ``ReportStore/remindedLocales(from:to:)``: locale, users.
    package var remindedLocales: String {
        """
        SELECT u.locale, count(DISTINCT l.user_id)
        FROM notification_logs l JOIN users u ON u.id = l.user_id
        WHERE \(sentReminders)
        GROUP BY u.locale
        """
    }
}

extension SQLDialect {
    /// The UTC day (`YYYY-MM-DD`) of an instant column.
    package func utcDay(_ column: String) -> String {
        switch self {
        case .sqlite: "date(\(column), 'unixepoch')"
        case .postgres: "to_char(\(column) AT TIME ZONE 'UTC', 'YYYY-MM-DD')"
        }
    }

    /// Unix seconds (an integer) of an instant expression.
    package func epoch(_ expression: String) -> String {
        switch self {
        case .sqlite: expression
        case .postgres: "floor(extract(epoch FROM \(expression)))::int8"
        }
    }

    /// An instant expression `seconds` later.
    package func plusSeconds(_ expression: String, _ seconds: Int64) -> String {
        switch self {
        case .sqlite: "\(expression) + \(seconds)"
        case .postgres: "\(expression) + interval '\(seconds) seconds'"
        }
    }

    /// An integer expression as a 64-bit integer (PostgreSQL types a `CASE` of literals `int4`).
    package func integer(_ expression: String) -> String {
        switch self {
        case .sqlite: expression
        case .postgres: "(\(expression))::int8"
        }
    }

    /// The boolean literal true.
    package var trueLiteral: String {
        switch self {
        case .sqlite: "1"
        case .postgres: "true"
        }
    }

    /// The larger of two values (SQLite's two-argument `max`).
    package func greatest(_ a: String, _ b: String) -> String {
        switch self {
        case .sqlite: "max(\(a), \(b))"
        case .postgres: "greatest(\(a), \(b))"
        }
    }

    /// Either of two booleans (SQLite keeps them as 0 and 1).
    package func either(_ a: String, _ b: String) -> String {
        switch self {
        case .sqlite: "max(\(a), \(b))"
        case .postgres: "(\(a) OR \(b))"
        }
    }

    /// A boolean column's truth, spelled as each store's partial indexes are declared (`is_active = 1`, `is_active`).
    package func isTrue(_ column: String) -> String {
        switch self {
        case .sqlite: "\(column) = 1"
        case .postgres: column
        }
    }

    /// A text expression that sorts by bytes, as SQLite's default collation does (PostgreSQL's follows the
    /// database's locale).
    package func byteOrder(_ expression: String) -> String {
        switch self {
        case .sqlite: expression
        case .postgres: "\(expression) COLLATE \"C\""
        }
    }

    /// The string at `key` of the JSON in `expression` (SQLite: text; PostgreSQL: `jsonb`), or NULL: for a value
    /// that is not a string, and (SQLite) for text that is not JSON; the nested `CASE` keeps `json_type` from
    /// ever reading text that is not JSON (an error).
    package func jsonString(_ expression: String, key: String) -> String {
        switch self {
        case .sqlite:
            "CASE WHEN json_valid(\(expression)) THEN CASE json_type(\(expression), '$.\(key)') WHEN 'text' THEN "
                + "json_extract(\(expression), '$.\(key)') END END"
        case .postgres:
            "CASE jsonb_typeof(\(expression) -> '\(key)') WHEN 'string' THEN \(expression) ->> '\(key)' END"
        }
    }
}

import GRDB
import JobKit

extension SQLiteStore: ReportStore {
    package func reminderOutcomes(from: Int64, to: Int64) async throws(JobError) -> [ReminderOutcomeRow] {
        try await read("reading the reminders' outcomes") { db in
            try Row.fetchAll(
                db,
                sql: """
                    SELECT l.locale, l.message_index, coalesce(l.finished_at, l.claimed_at) AS at, l.period_key, u.timezone,
                           (SELECT min(e.created_at) FROM diary_entries e
                            WHERE e.user_id = l.user_id AND e.created_at >= coalesce(l.finished_at, l.claimed_at)
                              AND e.created_at < coalesce(l.finished_at, l.claimed_at) + 172800)
                    FROM notification_logs l JOIN users u ON u.id = l.user_id
                    WHERE l.notification_type = 'diary_reminder' AND l.status IN ('sent', 'partial')
                      AND l.claimed_at >= ? AND l.claimed_at < ? AND l.locale IS NOT NULL AND l.message_index IS NOT NULL
                    """, arguments: [from, to]
            ).map { ($0[0], $0[1], $0[2], $0[3], $0[4], $0[5]) }
        }
    }

    package func remindedLocales(from: Int64, to: Int64) async throws(JobError) -> [(locale: String, users: Int)] {
        try await read("reading the reminded users' locales") { db in
            try Row.fetchAll(
                db,
                sql: """
                    SELECT u.locale, count(DISTINCT l.user_id)
                    FROM notification_logs l JOIN users u ON u.id = l.user_id
                    WHERE l.notification_type = 'diary_reminder' AND l.status IN ('sent', 'partial')
                      AND l.claimed_at >= ? AND l.claimed_at < ?
                    GROUP BY u.locale
                    """, arguments: [from, to]
            ).map { ($0[0], $0[1]) }
        }
    }

    package func healthFigures(from: Int64, to: Int64) async throws(JobError) -> HealthFigures {
        try await read("building the report") { db in
            var figures = HealthFigures()
            figures.claims = try Row.fetchAll(
                db,
                sql: """
                    SELECT date(claimed_at, 'unixepoch'), notification_type,
                           \(DeliveryLifecycle.reportStatusSQL(.sqlite, now: to)), count(*)
                    FROM notification_logs WHERE claimed_at >= ? AND claimed_at < ?
                    GROUP BY 1, 2, 3 ORDER BY 1, 2, 3
                    """, arguments: [from, to]
            ).map { ($0[0], $0[1], $0[2], $0[3]) }
            // One scan of the window's deliveries for three of the report's sections.
            figures.countDeliveries(
                try Row.fetchAll(
                    db,
                    sql: """
                        SELECT date(created_at, 'unixepoch'), provider, outcome,
                               \(HealthReport.AnswerTimes.bucketSQL("latency_ms")), count(*)
                        FROM notification_deliveries WHERE created_at >= ? AND created_at < ? GROUP BY 1, 2, 3, 4
                        """, arguments: [from, to]
                ).map { ($0[0], $0[1], $0[2], $0[3], $0[4]) })
            figures.activeDevices = try Row.fetchAll(
                db,
                sql: """
                    SELECT platform || '/' || provider || '/' || token_kind, count(*) FROM user_devices WHERE is_active = 1
                    GROUP BY 1 ORDER BY 1
                    """
            ).map { ($0[0], $0[1]) }
            figures.deactivations = try Row.fetchAll(
                db,
                sql: """
                    SELECT coalesce(deactivation_reason, 'unknown'), count(*) FROM user_devices
                    WHERE is_active = 0 AND deactivated_at >= ? AND deactivated_at < ? GROUP BY 1 ORDER BY 2 DESC, 1
                    """, arguments: [from, to]
            ).map { ($0[0], $0[1]) }
            // The error a run's summary recorded, when it is a string.
            let error = Self.jsonString("summary", key: "error")
            figures.lastRuns = try Row.fetchAll(
                db,
                sql: """
                    SELECT job, run_at, outcome, duration_ms, \(error)
                    FROM job_runs WHERE run_at = \(JobRunsSQL.latestRunAt)
                    """
            ).map { ($0[0], $0[1], $0[2], $0[3], $0[4]) }
            figures.windowRuns = try Row.fetchAll(
                db,
                sql: """
                    SELECT job, count(*), sum(outcome = 'failed'), sum(outcome = 'running'),
                           max(CASE WHEN outcome = 'running' THEN run_at END)
                    FROM job_runs WHERE run_at >= ? AND run_at < ? GROUP BY job ORDER BY job
                    """, arguments: [from, to]
            ).map { ($0[0], $0[1], $0[2], $0[3], $0[4]) }
            figures.lastFailures = try Row.fetchAll(
                db,
                sql: """
                    SELECT job_runs.job, run_at, \(error)
                    FROM job_runs
                    JOIN (SELECT job, max(run_at) AS at FROM job_runs
                          WHERE outcome = 'failed' AND run_at >= ? AND run_at < ? GROUP BY job) latest
                      ON job_runs.job = latest.job AND job_runs.run_at = latest.at
                    WHERE outcome = 'failed'
                    """, arguments: [from, to]
            ).map { ($0[0], $0[1], $0[2]) }
            return figures
        }
    }
}

/// How the learned words' counts of some UTC days are read (``DueSetSource/copyOutcomes(days:record:now:)``), said
/// once for both stores: the statements, in each store's dialect, and the order they run in. A store runs them in
/// one transaction and supplies only the primitives (read rows, read a column, execute):
///
/// 1. ``countedSQL``: the days already counted;
/// 2. for each day not yet counted, its ``Step``: read its counts from the log (`read`), or, when the run records,
///    mark it counted and, only when this runner's mark is the one that stands, store its counts (`record`);
/// 3. ``totalsSQL``: the stored counts of all the days, summed per locale and message.
///
/// The rows of 2's reads and of 3 together are the counts. A day another run counted first is kept as it counted
/// it; a day is never counted twice.
package struct CopyOutcomeCounting: Sendable {
    /// What one uncounted day costs.
    package enum Step: Sendable, Equatable {
        /// Its counts, read from the log and the entries: rows of locale, message index, sent, wrote.
        case read(String)
        /// `mark` returns the day when this runner marked it counted (nothing when another had); then `store`
        /// keeps its counts.
        case record(mark: String, store: String)
    }

    package let dialect: SQLDialect
    /// The days asked for that are days (`YYYY-MM-DD`); anything else is left out, so the literals below are safe.
    package let days: [LocalDate]
    package let record: Bool
    package let now: Int64

    package init(_ dialect: SQLDialect, days: [String], record: Bool, now: Int64) {
        self.dialect = dialect
        self.days = days.compactMap(LocalDate.init)
        self.record = record
        self.now = now
    }

    private var dayList: String { days.map { "'\($0)'" }.joined(separator: ", ") }

    /// The days already counted: one text column. `nil` when there are no days.
    package var countedSQL: String? {
        days.isEmpty ? nil : "SELECT day FROM copy_outcome_days WHERE day IN (\(dayList))"
    }

    /// The steps for the days not in `counted`.
    package func steps(counted: Set<String>) -> [Step] {
        days.filter { !counted.contains($0.description) }.map { date in
            let day = CopyOutcomeSQL(dialect, date: date)
            guard record else { return .read(day.select) }
            return .record(
                mark: """
                    INSERT INTO copy_outcome_days (day, counted_at) VALUES ('\(date)', \(dialect.instant(now)))
                    ON CONFLICT (day) DO NOTHING RETURNING day
                    """,
                store: """
                    INSERT INTO copy_outcomes (day, locale, message_index, sent, wrote)
                    SELECT '\(date)', c.* FROM (\(day.select)) AS c
                    """)
        }
    }

    /// The stored counts of the days, summed: rows of locale, message index, sent, wrote. `nil` when there are no
    /// days.
    package var totalsSQL: String? {
        guard !days.isEmpty else { return nil }
        return """
            SELECT locale, message_index, \(dialect.integer("sum(sent)")), \(dialect.integer("sum(wrote)"))
            FROM copy_outcomes WHERE day IN (\(dayList)) GROUP BY locale, message_index
            """
    }
}

/// The learned words' counts of one UTC day (``DueSetSource/copyOutcomes(days:record:now:)``), in each store's
/// dialect: per locale and message, the diary reminders claimed that day that reached a device (last reminders
/// excepted), and how many of their users wrote within 3 hours of the claim.
package struct CopyOutcomeSQL: Sendable {
    package let dialect: SQLDialect
    /// The day's bounds, as instants.
    package let from: Int64
    package let to: Int64
    /// The period keys the day's claims can have (a day either side), so that PostgreSQL reads only their
    /// partitions.
    package let periods: ClosedRange<String>

    package static let window: Int64 = 3 * 3600

    package init(_ dialect: SQLDialect, date: LocalDate) {
        self.dialect = dialect
        from = Int64(date.daysSinceEpoch) * 86_400
        to = from + 86_400
        periods = date.adding(days: -1).description...date.adding(days: 1).description
    }

    /// locale, message index, sent, wrote.
    package var select: String {
        """
        SELECT l.locale, l.message_index, count(*),
               coalesce(sum(CASE WHEN EXISTS (SELECT 1 FROM diary_entries e WHERE e.user_id = l.user_id
                                                AND e.created_at >= l.claimed_at
                                                AND e.created_at < \(dialect.plusSeconds("l.claimed_at", Self.window)))
                            THEN 1 ELSE 0 END), 0)
        FROM notification_logs l
        WHERE l.notification_type = '\(NotificationType.diaryReminder.rawValue)'
          AND l.status IN ('\(ClaimStatus.sent)', '\(ClaimStatus.partial)')
          AND l.claimed_at >= \(dialect.instant(from)) AND l.claimed_at < \(dialect.instant(to))
          AND l.period_key BETWEEN '\(periods.lowerBound)' AND '\(periods.upperBound)'
          AND l.locale IS NOT NULL AND l.message_index IS NOT NULL
          AND NOT EXISTS (SELECT 1 FROM reminder_pauses p WHERE p.user_id = l.user_id AND p.period_key = l.period_key)
        GROUP BY l.locale, l.message_index
        """
    }
}

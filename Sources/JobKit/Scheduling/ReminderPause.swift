/// A pause of a user's reminders: the day of the last reminder that said so.
package struct PauseRecord: Sendable, Hashable, Codable {
    /// The period key (local date) of the last reminder.
    package let period: String
    /// When that last reminder was claimed: an entry or a settings change after it ends the pause.
    package let pausedAt: Int64
    /// The ignored reminders that led to it.
    package let ignored: Int

    package init(period: String, pausedAt: Int64, ignored: Int) {
        self.period = period
        self.pausedAt = pausedAt
        self.ignored = ignored
    }
}

/// What the pause rule needs to know of one user before a period's reminder: read by
/// ``DueSetSource/reminderHistory(_:)``.
package struct ReminderHistory: Sendable, Hashable {
    /// The user's latest diary entry, if any.
    package var lastEntryAt: Int64?
    /// When the user's notification settings last changed.
    package var settingsChangedAt: Int64?
    /// The user's latest pause, ended or not.
    package var pause: PauseRecord?
    /// The user's reminders of the key's periods (``HistoryKey/periods``), any status.
    package var reminders: [PastReminder]

    package init(
        lastEntryAt: Int64? = nil, settingsChangedAt: Int64? = nil, pause: PauseRecord? = nil,
        reminders: [PastReminder] = []
    ) {
        self.lastEntryAt = lastEntryAt
        self.settingsChangedAt = settingsChangedAt
        self.pause = pause
        self.reminders = reminders
    }
}

extension ReminderHistory {
    /// The message index of the latest reminder of `periods` that has one: the previous words
    /// (``ReminderCandidate/previousMessageIndex``), when the history covers those periods.
    package func previousMessageIndex(in periods: Range<String>) -> Int? {
        reminders.filter { periods.contains($0.period) && $0.messageIndex != nil }
            .max { $0.period < $1.period }?.messageIndex
    }
}

/// One earlier reminder of a user.
package struct PastReminder: Sendable, Hashable {
    package let period: String
    package let claimedAt: Int64
    package let messageIndex: Int?
    /// It reached a device (`sent` or `partial`).
    package let reached: Bool

    package init(period: String, claimedAt: Int64, messageIndex: Int?, reached: Bool) {
        self.period = period
        self.claimedAt = claimedAt
        self.messageIndex = messageIndex
        self.reached = reached
    }
}

/// One user and period whose history a run reads.
package struct HistoryKey: Sendable, Hashable {
    /// A candidate's key under its query (whose ``DueQuery/historyFrom`` the run set).
    package init(_ userID: String, _ query: DueQuery) {
        self.init(userID: userID, period: query.period, periods: (query.historyFrom ?? query.period)..<query.period)
    }

    package let userID: String
    package let period: String
    /// The periods whose reminders are read: the pause rule's (``ReminderPause/lookBack(before:)``), and the
    /// learned words' recency (``CopyLearning/recentDays``).
    package let periods: Range<String>

    package init(userID: String, period: String, periods: Range<String>) {
        self.userID = userID
        self.period = period
        self.periods = periods
    }
}

/// When reminders stop for a user who ignores them, free of I/O.
///
/// A reminder is ignored when the user writes no entry after it. When the reminders of the `afterIgnored` periods
/// before today all reached the user and all were ignored (no entry, and no change of the reminder settings,
/// since the first of them), today's reminder is the last one: its words say that reminders pause
/// (`diary_reminder_last` in the catalog). The user is then paused (`paused`, a skip reason) until they write an
/// entry or change their settings. Days are the user's local dates (period keys), so neither a daylight-saving
/// shift nor a zone change moves the count; a day without a reminder that reached them breaks the run of days.
package struct ReminderPause: Sendable, Hashable {
    /// Consecutive ignored reminder days before the last reminder; 0 never pauses.
    package let afterIgnored: Int

    package static let `default` = ReminderPause(uncheckedAfterIgnored: ConfigKey.pauseAfterIgnored.number!.default)
    package static let off = ReminderPause(uncheckedAfterIgnored: 0)

    /// Fails with a ``JobError/usage(_:)`` error outside ``ConfigKey/pauseAfterIgnored``'s range.
    package init(afterIgnored: Int) throws(JobError) {
        let range = ConfigKey.pauseAfterIgnored.number!.range
        guard range.contains(afterIgnored) else {
            throw .usage(
                "pause after ignored must be within \(range.lowerBound)…\(range.upperBound), got \(afterIgnored)")
        }
        self.init(uncheckedAfterIgnored: afterIgnored)
    }

    private init(uncheckedAfterIgnored: Int) {
        self.afterIgnored = uncheckedAfterIgnored
    }

    package var isOn: Bool { afterIgnored > 0 }

    /// The periods whose reminders count for `period`'s: the `afterIgnored` local dates before it.
    package func lookBack(before period: String) -> Range<String> {
        guard let date = LocalDate(period) else { return period..<period }
        return date.adding(days: -afterIgnored).description..<period
    }

    package enum Verdict: Sendable, Hashable {
        /// An ordinary reminder; `ignored` reminders in a row were ignored before it.
        case remind(ignored: Int)
        /// The last reminder: its words say reminders pause.
        case lastReminder(ignored: Int)
        /// Paused since that last reminder.
        case paused(PauseRecord)
    }

    /// The verdict for `period`'s reminder of a user with this history; `from`: ``lookBack(before:)``'s lower
    /// bound, when the caller has it.
    package func verdict(_ history: ReminderHistory, period: String, from: String? = nil) -> Verdict {
        // What ends a run of ignored reminders, and a pause: an entry, or a settings change.
        let since = max(history.lastEntryAt ?? .min, history.settingsChangedAt ?? .min)
        if let pause = history.pause {
            // Today's own last reminder (a claim taken over) stays the last reminder, whatever happened since.
            if pause.period == period { return .lastReminder(ignored: pause.ignored) }
            if isOn && pause.period < period && since <= pause.pausedAt { return .paused(pause) }
        }
        guard isOn else { return .remind(ignored: 0) }
        let from = from ?? lookBack(before: period).lowerBound
        let ignored = history.reminders.lazy.filter { $0.reached && $0.period >= from && $0.claimedAt > since }.count
        return ignored >= afterIgnored ? .lastReminder(ignored: ignored) : .remind(ignored: ignored)
    }
}

/// The kind of a notification: the middle part of the notification log's unique key.
/// A closed set, as the schema's check: a name this version does not know is no `NotificationType`.
package enum NotificationType: String, Hashable, Sendable, Codable, CaseIterable, CustomStringConvertible {
    /// The daily diary reminder; period key `YYYY-MM-DD` (the user's local date).
    case diaryReminder = "diary_reminder"
    /// Content quota at 90 %; period key `YYYY-MM` or `YYYY`.
    case contentLimit90 = "content_limit_90"
    /// Content quota reached; period key `YYYY-MM` or `YYYY`.
    case contentLimit100 = "content_limit_100"

    /// A log row's type as a store reads it; a name this version does not know is a ``JobError/dataError(_:)``
    /// naming the row.
    package init(storedIn logID: Int64, _ name: String) throws(JobError) {
        guard let type = NotificationType(rawValue: name) else {
            throw .dataError("notification_logs row \(logID): unknown notification_type \(LineText.quoted(name))")
        }
        self = type
    }

    /// A quota warning of the content-limit hook (the daily reminder is not one).
    package var isQuotaWarning: Bool {
        switch self {
        case .diaryReminder: false
        case .contentLimit90, .contentLimit100: true
        }
    }

    /// The path of the app's screen a tap opens, after the deep-link base (`PUSH_DEEP_LINK_BASE`): the day's new
    /// entry for a reminder, the plan for a quota warning.
    package func deepLinkPath(period: String) -> String {
        switch self {
        case .diaryReminder: "entries/new?date=\(period)"
        case .contentLimit90, .contentLimit100: "plan"
        }
    }

    /// SQL of "`column` is a quota warning", spelled as the partial indexes of pending warnings spell it
    /// (migrations 004 and 014: `notification_type <> 'diary_reminder'`), so that both stores' planners use them.
    /// `ProviderDescriptorTests` checks that it picks exactly the types ``isQuotaWarning`` names: a new type that is no
    /// quota warning fails there, not silently in a store.
    package static func quotaWarningSQL(_ column: String = "notification_type") -> String {
        "\(column) <> '\(NotificationType.diaryReminder.rawValue)'"
    }

    /// The types `filter` picks, as an SQL list of string literals (their raw values are constant letters): an
    /// `IN` list, which the unique index `(user_id, notification_type, period_key)` seeks.
    package static func sqlList(_ filter: (NotificationType) -> Bool) -> String {
        allCases.filter(filter).map { "'\($0.rawValue)'" }.joined(separator: ", ")
    }

    /// SQL of "`column` is this type".
    package func sql(_ column: String = "notification_type") -> String { "\(column) = '\(rawValue)'" }

    /// Placeholders a message of this type may use.
    var allowedPlaceholders: Set<String> {
        isQuotaWarning ? ["used", "limit", "percent"] : []
    }

    /// Placeholders a message of this type must use (in its title or body), each entry one requirement met
    /// by any of its names: a quota warning without its numbers reads wrong ("You've used of entries").
    var requiredPlaceholders: [[String]] {
        switch self {
        case .contentLimit90: [["limit"], ["used", "percent"]]
        case .contentLimit100: [["limit"]]
        default: []
        }
    }

    package var description: String { rawValue }
}

/// Which words of the catalog a notification uses: those of its type, or, for the last reminder before a pause
/// (``ReminderPause``), `diary_reminder_last`. A catalog section, not a notification type: the last reminder is
/// logged as the day's `diary_reminder`, so the day still holds at most one reminder.
package enum CopyKind: String, Hashable, Sendable, CaseIterable, CustomStringConvertible {
    case diaryReminder = "diary_reminder"
    case diaryReminderLast = "diary_reminder_last"
    case contentLimit90 = "content_limit_90"
    case contentLimit100 = "content_limit_100"

    package init(_ type: NotificationType) {
        switch type {
        case .diaryReminder: self = .diaryReminder
        case .contentLimit90: self = .contentLimit90
        case .contentLimit100: self = .contentLimit100
        }
    }

    /// The notification type whose rules (placeholders) its words follow.
    package var type: NotificationType {
        switch self {
        case .diaryReminder, .diaryReminderLast: .diaryReminder
        case .contentLimit90: .contentLimit90
        case .contentLimit100: .contentLimit100
        }
    }

    package var description: String { rawValue }
}

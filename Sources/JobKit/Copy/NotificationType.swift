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

    /// Placeholders a message of this type may use.
    var allowedPlaceholders: Set<String> {
        self == .diaryReminder ? [] : ["used", "limit", "percent"]
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

/// The kind of a notification: the middle part of the notification log's unique key.
public struct NotificationType: RawRepresentable, Hashable, Sendable, Codable, CustomStringConvertible {
    public let rawValue: String
    public init(rawValue: String) { self.rawValue = rawValue }

    /// The daily diary reminder; period key `YYYY-MM-DD` (the user's local date).
    public static let diaryReminder = NotificationType(rawValue: "diary_reminder")
    /// Content quota at 90 %; period key `YYYY-MM` or `YYYY`.
    public static let contentLimit90 = NotificationType(rawValue: "content_limit_90")
    /// Content quota reached; period key `YYYY-MM` or `YYYY`.
    public static let contentLimit100 = NotificationType(rawValue: "content_limit_100")

    public static let all: [NotificationType] = [.diaryReminder, .contentLimit90, .contentLimit100]

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

    public var description: String { rawValue }
}

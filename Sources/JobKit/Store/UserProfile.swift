import Foundation

/// A user and their notification settings, as the app backend keeps them.
package struct UserProfile: Sendable, Hashable, Codable {
    /// The characters (Unicode scalars) a user id may have: the schema's `CHECK (length(id) BETWEEN 1 AND 128)`.
    package static let idLength = 1...128

    /// What is wrong with `id` as a user id (`nil`: nothing), for a message that names where it came from.
    package static func idProblem(_ id: String) -> String? {
        let count = id.unicodeScalars.count
        guard !idLength.contains(count) else { return nil }
        return "a user id is \(idLength.lowerBound) to \(idLength.upperBound) characters, got \(count)"
    }

    /// Whether `locale` is a BCP 47 tag such as `ja` or `pt-BR`, or a locale as Android or a server writes it:
    /// `pt_BR`, `de_DE.UTF-8`, `sr_RS@latin` (choosing copy reads `_` as `-` and leaves out the charset and the
    /// modifier).
    package static func isLocale(_ locale: String) -> Bool {
        CopyCatalog.isLocaleTag(LocaleKey.tagPart(locale).replacingOccurrences(of: "_", with: "-"))
    }

    /// The schema's default `reminder_time`.
    package static let defaultReminderTime = "21:00"

    package var id: String
    package var timezone: String
    package var locale: String
    package var plan: String
    package var diaryReminderEnabled: Bool
    package var reminderTime: String
    package var contentLimitWarningsEnabled: Bool
    /// Local `HH:MM`; both or neither. Quota warnings due inside them are deferred until they end.
    package var quietHoursStart: String?
    package var quietHoursEnd: String?

    package init(
        id: String, timezone: String, locale: String = "en", plan: String = "free",
        diaryReminderEnabled: Bool = true, reminderTime: String = defaultReminderTime,
        contentLimitWarningsEnabled: Bool = true, quietHoursStart: String? = nil, quietHoursEnd: String? = nil
    ) {
        self.quietHoursStart = quietHoursStart
        self.quietHoursEnd = quietHoursEnd
        self.id = id
        self.timezone = timezone
        self.locale = locale
        self.plan = plan
        self.diaryReminderEnabled = diaryReminderEnabled
        self.reminderTime = reminderTime
        self.contentLimitWarningsEnabled = contentLimitWarningsEnabled
    }
}

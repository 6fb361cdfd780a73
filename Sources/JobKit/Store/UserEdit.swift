/// A user as the store holds them: the profile, and whether they have a `notification_settings` row.
///
/// Without that row no reminder goes out (`--explain`: "no notification_settings row") and quota warnings keep
/// their default (on), so the profile of such a user says exactly that: reminders off, warnings on, the schema's
/// default time. An edit that names no setting leaves the row absent.
package struct StoredUser: Sendable, Hashable {
    package var profile: UserProfile
    package var hasSettings: Bool

    package init(profile: UserProfile, hasSettings: Bool) {
        self.profile = profile
        self.hasSettings = hasSettings
    }

    /// A user whose `users` row has no settings row beside it (see the type's documentation).
    package static func withoutSettings(id: String, timezone: String, locale: String, plan: String) -> StoredUser {
        StoredUser(
            profile: UserProfile(
                id: id, timezone: timezone, locale: locale, plan: plan, diaryReminderEnabled: false,
                contentLimitWarningsEnabled: true),
            hasSettings: false)
    }
}

/// A change to one user, as `pushctl user set` takes it: each field left `nil` keeps what the store holds, so that
/// changing one setting never resets another (a user who turned reminders off keeps them off when an operator
/// sets their quiet hours). A new user starts from ``UserProfile``'s defaults and needs a time zone.
package struct UserEdit: Sendable, Hashable {
    /// Quiet hours to set, or `off` to remove them.
    package enum QuietHours: Sendable, Hashable {
        case off
        case hours(start: String, end: String)
    }

    package let id: String
    package var timezone: String?
    package var locale: String?
    package var plan: String?
    package var diaryReminderEnabled: Bool?
    package var reminderTime: String?
    package var contentLimitWarningsEnabled: Bool?
    package var quietHours: QuietHours?

    package init(id: String) { self.id = id }

    /// Whether the edit names a setting of the `notification_settings` row.
    package var namesASetting: Bool {
        diaryReminderEnabled != nil || reminderTime != nil || contentLimitWarningsEnabled != nil || quietHours != nil
    }

    /// The user after the edit: `current` with each named field replaced, or a new user (`current` nil) with
    /// the defaults for what the edit leaves out. A new user without a time zone is a usage error.
    package func applied(to current: StoredUser?) throws(JobError) -> StoredUser {
        guard
            var user = current
                ?? timezone.map({ StoredUser(profile: UserProfile(id: id, timezone: $0), hasSettings: true) })
        else {
            throw .usage("user \(id) does not exist: a new user needs a time zone (--timezone; timezone over HTTP)")
        }
        if let timezone { user.profile.timezone = timezone }
        if let locale { user.profile.locale = locale }
        if let plan { user.profile.plan = plan }
        if let diaryReminderEnabled { user.profile.diaryReminderEnabled = diaryReminderEnabled }
        if let reminderTime { user.profile.reminderTime = reminderTime }
        if let contentLimitWarningsEnabled { user.profile.contentLimitWarningsEnabled = contentLimitWarningsEnabled }
        switch quietHours {
        case .off:
            user.profile.quietHoursStart = nil
            user.profile.quietHoursEnd = nil
        case .hours(let start, let end):
            user.profile.quietHoursStart = start
            user.profile.quietHoursEnd = end
        case nil: break
        }
        if namesASetting { user.hasSettings = true }
        return user
    }
}

extension UserEdit {
    /// An edit from text as a caller gives it (`pushctl user set`, the HTTP API), each value checked: the id's length
    /// and characters, a BCP 47 or POSIX locale, a non-empty plan, an IANA zone, `HH:MM`, quiet hours
    /// `HH:MM-HH:MM` (not ending when they start) or `off`. A bad value is a ``JobError/usage(_:)`` that starts with
    /// `name(field)` of the field (`--timezone` for the command line, `timezone` for JSON).
    package static func checked(
        id: String, timezone: String? = nil, locale: String? = nil, plan: String? = nil, reminderTime: String? = nil,
        reminders: Bool? = nil, limitWarnings: Bool? = nil, quietHours: String? = nil,
        name: (Field) -> String
    ) throws(JobError) -> UserEdit {
        if let problem = UserProfile.idProblem(id) { throw .usage("\(name(.id)): \(problem)") }
        if let locale, !UserProfile.isLocale(locale) {
            throw .usage(
                "\(name(.locale)): not a BCP 47 locale (e.g. ja or pt-BR) or a POSIX one (pt_BR.UTF-8): \"\(locale)\"")
        }
        if plan?.isEmpty == true { throw .usage("\(name(.plan)): empty") }
        if let timezone, ZoneClock(identifier: timezone) == nil {
            throw .usage("\(name(.timezone)): unknown IANA time zone \(timezone)")
        }
        if let reminderTime, LocalTime(reminderTime) == nil {
            throw .usage("\(name(.reminderTime)): not HH:MM: \(reminderTime)")
        }
        var edit = UserEdit(id: id)
        edit.timezone = timezone
        edit.locale = locale
        edit.plan = plan
        edit.reminderTime = reminderTime
        edit.diaryReminderEnabled = reminders
        edit.contentLimitWarningsEnabled = limitWarnings
        if let quietHours {
            edit.quietHours = try Self.quietHours(quietHours, field: name(.quietHours))
        }
        return edit
    }

    /// The fields of an edit, as ``checked(id:timezone:locale:plan:reminderTime:reminders:limitWarnings:quietHours:name:)``
    /// names them in its messages.
    package enum Field: String, Sendable, CaseIterable {
        case id, timezone, locale, plan
        case reminderTime = "reminder_time"
        case reminders
        case limitWarnings = "limit_warnings"
        case quietHours = "quiet_hours"

        /// The command-line flag: `--reminder-time`.
        package var flag: String { "--" + String(rawValue.map { $0 == "_" ? "-" : $0 }) }
    }

    /// Quiet hours `HH:MM-HH:MM` (they may span midnight), or `off`.
    private static func quietHours(_ text: String, field: String) throws(JobError) -> QuietHours {
        if text == "off" { return .off }
        let parts = text.split(separator: "-", omittingEmptySubsequences: false)
        guard parts.count == 2, let start = LocalTime(parts[0]), let end = LocalTime(parts[1]) else {
            throw .usage("\(field): not HH:MM-HH:MM or off: \(text)")
        }
        // Quiet hours that end when they start are none (ContentLimitRule.quietHoursEnd): a caller who gave them
        // meant something else.
        guard start != end else {
            throw .usage("\(field): \(text) ends when it starts, which is no quiet hours (off removes them)")
        }
        return .hours(start: String(parts[0]), end: String(parts[1]))
    }
}

/// What applying a ``UserEdit`` did, for the operator.
package struct UserEditResult: Sendable, Hashable {
    /// The user before (`nil`: created) and after.
    package let before: StoredUser?
    package let after: StoredUser

    package init(before: StoredUser?, after: StoredUser) {
        self.before = before
        self.after = after
    }

    /// One line: `created user u1`, `updated user u1: plan free → pro, quiet hours none → 22:00-06:00`, or
    /// `user u1 unchanged`. The id is written as a `key=value` field is (``LineText/field(_:)``: quoted when it
    /// has a space or a control character), and stored values with their control characters escaped: the app
    /// backend writes users too, and one line stays one line.
    package var summary: String {
        let id = LineText.field(after.profile.id)
        guard let before else { return "created user \(id)" }
        let fields: [(String, (StoredUser) -> String)] = [
            ("timezone", { $0.profile.timezone }),
            ("locale", { $0.profile.locale }),
            ("plan", { $0.profile.plan }),
            ("reminders", { $0.profile.diaryReminderEnabled ? "on" : "off" }),
            ("reminder time", { $0.profile.reminderTime }),
            ("limit warnings", { $0.profile.contentLimitWarningsEnabled ? "on" : "off" }),
            (
                "quiet hours",
                { user in
                    guard let start = user.profile.quietHoursStart, let end = user.profile.quietHoursEnd else {
                        return "none"
                    }
                    return "\(start)-\(end)"
                }
            ),
        ]
        var changes = fields.compactMap { name, value in
            value(before) == value(after)
                ? nil
                : "\(name) \(LineText.escapingControls(value(before))) → \(LineText.escapingControls(value(after)))"
        }
        if !before.hasSettings && after.hasSettings { changes.append("settings row created") }
        return changes.isEmpty ? "user \(id) unchanged" : "updated user \(id): " + changes.joined(separator: ", ")
    }
}

extension AppDataStore {
    /// Applies `edit` to the stored user in one transaction (``AppDataStore/editUser(id:now:_:)``).
    package func apply(_ edit: UserEdit, now: Int64) async throws(JobError) -> UserEditResult {
        try await editUser(id: edit.id, now: now) { current throws(JobError) in try edit.applied(to: current) }
    }
}

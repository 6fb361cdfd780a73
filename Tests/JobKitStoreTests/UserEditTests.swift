import Foundation
import JobKitTestSupport
import Testing

@testable import JobKit

/// `pushctl user set` and the ``UserEdit`` under it: an edit changes what it names and nothing else.
@Suite struct UserEditTests {
    private static let settingsColumns =
        """
        CASE WHEN diary_reminder_enabled THEN 'on' ELSE 'off' END || ' ' || reminder_time || ' '
        || CASE WHEN content_limit_warnings_enabled THEN 'on' ELSE 'off' END || ' '
        || coalesce(quiet_hours_start, '-') || ' ' || coalesce(quiet_hours_end, '-')
        """

    /// Setting quiet hours with `pushctl user set --id u1 --quiet-hours …` also reset the user's plan, locale and
    /// reminder time to the flags' defaults and turned their reminders back on: an operator changing one setting
    /// re-enabled reminders the user had turned off.
    @Test(arguments: Backend.allCases) func pushctlChangesOnlyTheSettingsItNames(_ backend: Backend) async throws {
        let db = try await TemporaryDatabase(backend)
        let database = ["--database", db.path]
        let created = try await Executables.run(
            "pushctl",
            [
                "user", "set", "--id", "u1", "--timezone", "Asia/Tokyo", "--locale", "ja", "--plan", "pro",
                "--reminder-time", "07:30", "--reminders", "off", "--limit-warnings", "off",
            ] + database)
        #expect(created.status == 0, "\(created.stderr)")
        #expect(created.stdout == "created user u1\n")

        let quiet = try await Executables.run(
            "pushctl",
            ["user", "set", "--id", "u1", "--timezone", "Asia/Tokyo", "--quiet-hours", "22:00-06:00"] + database)
        #expect(quiet.status == 0, "\(quiet.stderr)")
        #expect(quiet.stdout == "updated user u1: quiet hours none → 22:00-06:00\n")
        #expect(
            try await db.strings("SELECT timezone || ' ' || locale || ' ' || plan FROM users") == ["Asia/Tokyo ja pro"])
        #expect(
            try await db.strings("SELECT \(Self.settingsColumns) FROM notification_settings") == [
                settings(false, "07:30", false, "22:00", "06:00")
            ])

        let again = try await Executables.run(
            "pushctl", ["user", "set", "--id", "u1", "--quiet-hours", "22:00-06:00"] + database)
        #expect(again.stdout == "user u1 unchanged\n", "\(again.stderr)")

        let cleared = try await Executables.run(
            "pushctl", ["user", "set", "--id", "u1", "--quiet-hours", "off", "--reminders", "on"] + database)
        #expect(cleared.status == 0, "\(cleared.stderr)")
        #expect(cleared.stdout == "updated user u1: reminders off → on, quiet hours 22:00-06:00 → none\n")
        #expect(
            try await db.strings("SELECT \(Self.settingsColumns) FROM notification_settings") == [
                settings(true, "07:30", false, nil, nil)
            ])

        // A new user needs a time zone: a usage error, and nothing written.
        let noZone = try await Executables.run("pushctl", ["user", "set", "--id", "u2", "--plan", "pro"] + database)
        #expect(noZone.status == 64, "\(noZone.status) \(noZone.stderr)")
        #expect(
            noZone.stderr.contains(
                "user u2 does not exist: a new user needs a time zone (--timezone; timezone over HTTP)"),
            "\(noZone.stderr)")
        #expect(try await db.count("SELECT count(*) FROM users") == 1)
        for value in ["22-", "22:00", "22:00-06:00-07:00", "none"] {
            let refused = try await Executables.run(
                "pushctl", ["user", "set", "--id", "u1", "--quiet-hours", value] + database)
            #expect(refused.status == 64, "\(value): \(refused.status)")
            #expect(refused.stderr.contains("--quiet-hours: not HH:MM-HH:MM or off"), "\(value): \(refused.stderr)")
        }
        // Quiet hours that end when they start are none: refused, not stored as if they were set.
        let empty = try await Executables.run(
            "pushctl", ["user", "set", "--id", "u1", "--quiet-hours", "22:00-22:00"] + database)
        #expect(empty.status == 64, "\(empty.status) \(empty.stdout)")
        #expect(empty.stderr.contains("--quiet-hours: 22:00-22:00 ends when it starts"), "\(empty.stderr)")
        #expect(
            try await db.strings("SELECT \(Self.settingsColumns) FROM notification_settings") == [
                settings(true, "07:30", false, nil, nil)
            ])
    }

    /// A user the app created without a settings row gets no reminder; an edit keeps it so. One that names no
    /// setting writes no row; one that names a setting writes the row with reminders still off.
    @Test(arguments: Backend.allCases) func aUserWithoutSettingsKeepsTheirEffectiveSettings(_ backend: Backend)
        async throws
    {
        let db = try await TemporaryDatabase(backend)
        try await db.execute(
            "INSERT INTO users (id, timezone, locale, plan, created_at, updated_at) VALUES ('bare', 'UTC', 'en', 'free', \(db.ts(1)), \(db.ts(1)))"
        )
        var plan = UserEdit(id: "bare")
        plan.plan = "pro"
        let planned = try await db.store.apply(plan, now: 10)
        #expect(planned.before?.hasSettings == false)
        #expect(planned.summary == "updated user bare: plan free → pro")
        #expect(try await db.count("SELECT count(*) FROM notification_settings") == 0)

        var time = UserEdit(id: "bare")
        time.reminderTime = "08:00"
        let timed = try await db.store.apply(time, now: 20)
        #expect(timed.summary == "updated user bare: reminder time 21:00 → 08:00, settings row created")
        #expect(
            try await db.strings("SELECT \(Self.settingsColumns) FROM notification_settings") == [
                settings(false, "08:00", true, nil, nil)
            ])
        #expect(try await db.strings("SELECT plan FROM users") == ["pro"])
    }

    /// An edit that throws (a new user without a time zone) writes nothing, and the store says so as a usage
    /// error; the rule itself is the same for both stores.
    @Test func theEditRuleFillsANewUserFromTheDefaults() throws {
        var edit = UserEdit(id: "new")
        edit.reminderTime = "06:15"
        #expect(
            throws: JobError.usage(
                "user new does not exist: a new user needs a time zone (--timezone; timezone over HTTP)")
        ) {
            try edit.applied(to: nil)
        }
        edit.timezone = "Europe/Paris"
        let created = try edit.applied(to: nil)
        #expect(
            created
                == StoredUser(
                    profile: UserProfile(id: "new", timezone: "Europe/Paris", reminderTime: "06:15"), hasSettings: true)
        )
        #expect(UserEditResult(before: nil, after: created).summary == "created user new")
    }

    /// The summary is one line for the operator, and ids and stored values come from outside (the app backend
    /// writes users too): an id with a space or a line break was echoed as it is, so `pushctl user set` printed
    /// a forged second line. The id is written as a `key=value` field is, and a stored value's control
    /// characters are escaped.
    @Test func theSummaryKeepsAnIdOrAStoredValueWithALineBreakOnItsLine() throws {
        var edit = UserEdit(id: "a b\nfake: line")
        edit.timezone = "UTC"
        let created = try edit.applied(to: nil)
        #expect(UserEditResult(before: nil, after: created).summary == #"created user "a b\nfake: line""#)
        var before = created
        before.profile.plan = "pro\nfake: plan"
        let updated = UserEditResult(before: before, after: created).summary
        #expect(updated == #"updated user "a b\nfake: line": plan pro\nfake: plan → free"#)
        #expect(UserEditResult(before: created, after: created).summary == #"user "a b\nfake: line" unchanged"#)
    }

    private func settings(_ reminders: Bool, _ time: String, _ warnings: Bool, _ start: String?, _ end: String?)
        -> String
    {
        "\(reminders ? "on" : "off") \(time) \(warnings ? "on" : "off") \(start ?? "-") \(end ?? "-")"
    }
}

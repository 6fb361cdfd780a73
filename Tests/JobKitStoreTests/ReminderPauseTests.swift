import Foundation
import JobKitTestSupport
import Testing

@testable import JobKit

/// Issue 69: reminders pause for a user who ignores a run of them, with one last reminder that says so, and start
/// again when they write or change their settings. Each day's run is at the user's local reminder time.
@Suite struct ReminderPauseTests {
    static let lastTitle = CopyCatalog.builtIn.messages(for: CopyKind.diaryReminderLast, locale: "en")[0].title

    struct Day {
        let summary: RunSummary
        /// Titles sent this run.
        let titles: [String]
    }

    /// Runs at `time` local on `date` in `zone`, pausing after `k` ignored days.
    static func run(
        _ db: TemporaryDatabase, _ sender: RecordingSender, _ date: String, zone: String, time: String = "20:00",
        k: Int, dryRun: Bool = false
    ) async throws -> Day {
        let before = await sender.sent.count
        let clock = try #require(ZoneClock(identifier: zone))
        let at = clock.instant(
            on: try #require(LocalDate(date)), minuteOfDay: try #require(LocalTime(time)).minuteOfDay)
        var options = ReminderRunOptions(now: at, dryRun: dryRun)
        options.pause = try ReminderPause(afterIgnored: k)
        let summary = try await DiaryReminderRunner(store: db.store, sender: sender, logger: quietLogger).run(options)
        return Day(summary: summary, titles: await sender.sent.dropFirst(before).map(\.title))
    }

    static func dates(from first: String, count: Int) throws -> [String] {
        let start = try #require(LocalDate(first))
        return (0..<count).map { start.adding(days: $0).description }
    }

    /// K ignored days, then the last reminder once, then nothing until the user writes; writing resumes the next
    /// day. New York leaves daylight saving time on 2026-11-01, inside the run of days: the count is of local
    /// days, so the shift moves nothing.
    @Test(arguments: Backend.allCases) func pausesAfterExactlyKIgnoredDaysUntilTheUserWrites(_ backend: Backend)
        async throws
    {
        let db = try await TemporaryDatabase(backend)
        let zone = "America/New_York"
        try await db.store.addUser("u", zone: zone, time: "20:00")
        let sender = RecordingSender()
        let days = try Self.dates(from: "2026-10-29", count: 8)
        var titles: [[String]] = []
        for date in days.prefix(6) {
            let day = try await Self.run(db, sender, date, zone: zone, k: 3)
            titles.append(day.titles)
            if date == days[3] { #expect(day.summary.pausing == 1) }
            if date > days[3] { #expect(day.summary.skipped[.paused] == 1) }
        }
        // Days 1–3 ordinary, day 4 (2026-11-01, the shift's day) the last, days 5–6 nothing.
        #expect(titles.map(\.count) == [1, 1, 1, 1, 0, 0])
        #expect(titles.prefix(3).allSatisfy { $0.first != Self.lastTitle })
        #expect(titles[3] == [Self.lastTitle])
        #expect(
            try await db.count("SELECT count(*) FROM reminder_pauses WHERE period_key = '2026-11-01' AND ignored = 3")
                == 1)
        // A dry run says who would be paused, and so does --explain.
        let dry = try await Self.run(db, sender, days[6], zone: zone, k: 3, dryRun: true)
        #expect(dry.summary.skipped[.paused] == 1)
        var options = ReminderRunOptions(
            now: try #require(ZoneClock(identifier: zone)).instant(
                on: try #require(LocalDate(days[6])), minuteOfDay: 20 * 60))
        options.pause = try ReminderPause(afterIgnored: 3)
        let explanation = try await DiaryReminderRunner(store: db.store, sender: sender, logger: quietLogger).explain(
            userID: "u", options: options)
        #expect(explanation.skipReason == .paused)
        #expect(explanation.verdict.contains("paused since 2026-11-01 after 3 ignored reminders"))
        // The health report counts the paused user.
        let from = instant("2026-10-29T00:00:00Z")
        #expect(
            try await db.store.healthReport(from: from, to: options.now).pauses
                == HealthReport.Pauses(paused: 1, started: 1, cameBack: 0))
        // The user writes on day 7 (before the reminder time): not reminded that day, and reminded again on day 8.
        try await db.store.recordEntry(userID: "u", at: options.now - 3600)
        #expect(try await Self.run(db, sender, days[6], zone: zone, k: 3).summary.skipped[.wroteToday] == 1)
        let back = try await Self.run(db, sender, days[7], zone: zone, k: 3)
        #expect(back.titles.count == 1 && back.titles != [Self.lastTitle])
        #expect(
            try await db.store.healthReport(from: from, to: options.now + 2 * 86_400).pauses
                == HealthReport.Pauses(paused: 0, started: 1, cameBack: 1))
        // The last reminder is not one of the messages the report compares.
        let effect = try await db.store.fullHealthReport(from: from, to: options.now + 2 * 86_400).reminderEffect
        #expect(effect.map(\.reminded).reduce(0, +) == 4)
    }

    /// A user who writes after the reminder of day K−1 starts a new run of days: not paused at day K + 1.
    @Test(arguments: Backend.allCases) func aUserWhoWritesOnDayKMinusOneIsNotPaused(_ backend: Backend) async throws {
        let db = try await TemporaryDatabase(backend)
        try await db.store.addUser("u", zone: "Asia/Tokyo", time: "21:00")
        let sender = RecordingSender()
        let clock = try #require(ZoneClock(identifier: "Asia/Tokyo"))
        let days = try Self.dates(from: "2026-11-02", count: 6)
        for (i, date) in days.enumerated() {
            let day = try await Self.run(db, sender, date, zone: "Asia/Tokyo", time: "21:00", k: 4)
            #expect(day.titles.count == 1, "day \(i + 1)")
            #expect(day.summary.pausing == 0 && day.titles != [Self.lastTitle], "day \(i + 1)")
            // Day K−1 = 3: an entry an hour after its reminder.
            if i == 2 {
                try await db.store.recordEntry(
                    userID: "u", at: clock.instant(on: try #require(LocalDate(date)), minuteOfDay: 22 * 60))
            }
        }
        #expect(try await db.count("SELECT count(*) FROM reminder_pauses") == 0)
    }

    /// A change of the reminder settings ends a pause; the same settings written again do not.
    @Test(arguments: Backend.allCases) func changingTheSettingsResumesReminders(_ backend: Backend) async throws {
        let db = try await TemporaryDatabase(backend)
        try await db.store.addUser("u", zone: "Europe/Berlin", time: "20:00")
        let sender = RecordingSender()
        let days = try Self.dates(from: "2026-11-10", count: 6)
        for date in days.prefix(4) { _ = try await Self.run(db, sender, date, zone: "Europe/Berlin", k: 2) }
        #expect(await sender.sent.map(\.title).filter { $0 == Self.lastTitle }.count == 1)
        let clock = try #require(ZoneClock(identifier: "Europe/Berlin"))
        let noon = clock.instant(on: try #require(LocalDate(days[4])), minuteOfDay: 12 * 60)
        let same = UserProfile(id: "u", timezone: "Europe/Berlin", locale: "en", reminderTime: "20:00")
        try await db.store.upsertUser(same, now: noon)
        #expect(try await Self.run(db, sender, days[4], zone: "Europe/Berlin", k: 2).summary.skipped[.paused] == 1)
        let changed = UserProfile(id: "u", timezone: "Europe/Berlin", locale: "en", reminderTime: "20:30")
        try await db.store.upsertUser(changed, now: noon + 3600)
        let day = try await Self.run(db, sender, days[5], zone: "Europe/Berlin", time: "20:30", k: 2)
        #expect(day.titles.count == 1 && day.titles != [Self.lastTitle])
    }

    /// 0 turns pausing off: nobody is paused however long they ignore reminders, and no history is read.
    @Test func zeroNeverPauses() async throws {
        let db = try await TemporaryDatabase(.sqlite)
        try await db.store.addUser("u", time: "20:00")
        let sender = RecordingSender()
        for date in try Self.dates(from: "2026-11-01", count: 5) {
            _ = try await Self.run(db, sender, date, zone: "UTC", k: 0)
        }
        #expect(await sender.sent.map(\.title).filter { $0 == Self.lastTitle }.isEmpty)
        #expect(await sender.sent.count == 5)
    }

    /// The rule alone: what ends a run of ignored reminders, and when a pause holds.
    @Test func theRuleCountsRemindersAfterTheLastEntryOrSettingsChange() throws {
        let rule = try ReminderPause(afterIgnored: 3)
        let reminded = [("2026-11-01", 100), ("2026-11-02", 200), ("2026-11-03", 300)].map {
            PastReminder(period: $0.0, claimedAt: Int64($0.1), messageIndex: 0, reached: true)
        }
        #expect(rule.verdict(ReminderHistory(reminders: reminded), period: "2026-11-04") == .lastReminder(ignored: 3))
        #expect(
            rule.verdict(ReminderHistory(lastEntryAt: 150, reminders: reminded), period: "2026-11-04")
                == .remind(ignored: 2))
        #expect(
            rule.verdict(ReminderHistory(settingsChangedAt: 250, reminders: reminded), period: "2026-11-04")
                == .remind(ignored: 1))
        let pause = PauseRecord(period: "2026-11-04", pausedAt: 400, ignored: 3)
        #expect(rule.verdict(ReminderHistory(pause: pause), period: "2026-11-09") == .paused(pause))
        #expect(rule.verdict(ReminderHistory(pause: pause), period: "2026-11-04") == .lastReminder(ignored: 3))
        #expect(
            rule.verdict(ReminderHistory(lastEntryAt: 401, pause: pause), period: "2026-11-09") == .remind(ignored: 0))
        #expect(ReminderPause.off.verdict(ReminderHistory(pause: pause), period: "2026-11-09") == .remind(ignored: 0))
        #expect(rule.lookBack(before: "2026-03-02") == "2026-02-27"..<"2026-03-02")
        #expect(throws: JobError.self) { try ReminderPause(afterIgnored: 61) }
    }
}

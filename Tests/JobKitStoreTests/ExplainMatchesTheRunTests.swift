import Foundation
import JobKitTestSupport
import Testing

@testable import JobKit

/// Issue 80: explain narrates what the run does. Random users (zones with odd offsets, reminder times, locales,
/// devices that die or fail for a while, some who write before their slot, some who answer the reminder) over a
/// week of runs at their slots, with learned words on and off and the pause rule at 3 ignored reminders. Before
/// each run, every user whose slot the run reaches (and a few others) is explained at the run's instant; then the
/// run's sends must be exactly explain's: due or not, the same words, the same devices.
@Suite struct ExplainMatchesTheRunTests {
    static let zones = [
        "UTC", "Asia/Kolkata", "America/St_Johns", "Pacific/Chatham", "Australia/Adelaide", "Asia/Kathmandu",
        "America/Los_Angeles",
    ]
    static let locales = ["en", "ja", "pt-BR", "de", "fr", "es", "sw"]

    @Test(arguments: Backend.allCases, [false, true])
    func explainNamesTheRunsWordsAndDevices(_ backend: Backend, learning: Bool) async throws {
        var random = SplitMix64(seed: learning ? 80 : 81)
        let db = try await TemporaryDatabase(backend)
        let catalog = learning ? LearnedWordsTests.catalog : CopyCatalog.builtIn
        let start = instant("2026-11-10T00:00:00Z")
        let users = (0..<30).map { "u\($0)" }
        for user in users {
            let minutes = 15 * Int.random(in: 64..<92, using: &random)  // 16:00 … 22:45
            let time = String(format: "%02d:%02d", minutes / 60, minutes % 60)
            try await db.store.upsertUser(
                UserProfile(
                    id: user, timezone: Self.zones.randomElement(using: &random)!,
                    locale: Self.locales.randomElement(using: &random)!, reminderTime: time), now: start - 86_400)
            for n in 0..<Int.random(in: 0...3, using: &random) {
                let kind = Int.random(in: 0..<10, using: &random)
                let prefix = kind == 0 ? "dead" : kind == 1 ? "flaky" : "ok"
                _ = try await db.store.register(
                    DeviceRegistration(
                        userID: user, token: "\(prefix)-\(user)-\(n)", provider: .fcm, platform: .android),
                    now: start - 86_400)
            }
        }
        let sender = RecordingSender()
        let runner = DiaryReminderRunner(store: db.store, sender: sender, catalog: catalog, logger: quietLogger)
        let pause = try ReminderPause(afterIgnored: 3)
        // Each user's slots of the week (their settings do not change).
        var slots: [String: [Int64]] = [:]
        for user in users {
            for day in -1...8 {
                let date = ZoneClock.split(wallSeconds: start).date.adding(days: day)
                if let slot = try await runner.slotInstant(userID: user, on: date) {
                    slots[user, default: []].append(slot)
                }
            }
        }
        var checked = (due: 0, notDue: 0, learned: 0)
        // The runs: at every slot and the quarter after it (a take-over of a device that failed for a while), and
        // at 60 other quarters of the week; a run between slots reminds nobody, so the others are a sample.
        var instants = Set(slots.values.joined().flatMap { [$0, $0 + 900] })
        for _ in 0..<60 { instants.insert(start + 900 * Int64.random(in: 0..<(7 * 96), using: &random)) }
        for now in instants.filter({ $0 >= start && $0 < start + 7 * 86_400 }).sorted() {
            var options = ReminderRunOptions(now: now)
            options.pause = pause
            // Who to explain: everybody whose slot lies in the quarter before this run, and a few others.
            var explained: [String: ReminderExplanation] = [:]
            for user in users {
                let near = slots[user, default: []].contains { $0 > now - 900 && $0 <= now }
                if near || Int.random(in: 0..<40, using: &random) == 0 {
                    explained[user] = try await runner.explain(userID: user, options: options)
                }
            }
            // Some write before their slot; the run must then skip them, as explain said it would.
            let before = await sender.sent.count
            _ = try await runner.run(options)
            let sent = await sender.sent.dropFirst(before)
            let byUser = Dictionary(grouping: sent, by: \.device.userID)
            for (user, explanation) in explained {
                let theirs = byUser[user] ?? []
                #expect(
                    explanation.due == !theirs.isEmpty,
                    "\(user) at \(Timestamps.format(now)): explain says \(explanation.verdict), the run sent \(theirs.count)"
                )
                guard explanation.due, let first = theirs.first else {
                    checked.notDue += 1
                    continue
                }
                checked.due += 1
                #expect(
                    explanation.words == .init(locale: first.locale, messageIndex: first.messageIndex),
                    "\(user) at \(Timestamps.format(now)): explain's words \(String(describing: explanation.words)), the run's \(first.locale) #\(first.messageIndex)"
                )
                #expect(
                    Set(explanation.sendsTo) == Set(theirs.map(\.device.id)), "\(user) at \(Timestamps.format(now))")
                if learning, let learner = catalog.learning, !learner.isHeldOut(userID: user, period: first.period) {
                    checked.learned += 1
                }
            }
            // Answers: message 2 works best; a few write before their reminder.
            for notification in sent
            where Int.random(in: 0..<10, using: &random) < (notification.messageIndex == 2 ? 8 : 2) {
                try await db.store.recordEntry(userID: notification.device.userID, at: now + 600)
            }
            if Int.random(in: 0..<8, using: &random) == 0, let writer = users.randomElement(using: &random) {
                try await db.store.recordEntry(userID: writer, at: now)
            }
        }
        // The property held over enough cases to mean something: reminders, skips, and learned choices.
        #expect(checked.due > 100 && checked.notDue > 200, "\(checked)")
        if learning { #expect(checked.learned > 80, "\(checked)") }
    }

    /// A claim left for retry whose words the next catalog no longer has (a shorter catalog deployed between two
    /// runs): the run sends that catalog's own choice under the recorded index, and explain names those words, not
    /// a new choice. Neither reads the previous words or the learned counts for it.
    @Test(arguments: Backend.allCases)
    func explainNamesTheWordsOfAClaimTheCatalogLost(_ backend: Backend) async throws {
        let db = try await TemporaryDatabase(backend)
        let now = instant("2026-11-10T20:00:00Z")
        for n in 0..<12 {
            try await db.store.upsertUser(
                UserProfile(id: "u\(n)", timezone: "UTC", locale: "en", reminderTime: "20:00"), now: now - 86_400)
            _ = try await db.store.register(
                DeviceRegistration(userID: "u\(n)", token: "flaky-u\(n)", provider: .fcm, platform: .android),
                now: now - 86_400)
        }
        let sender = RecordingSender()
        let before = DiaryReminderRunner(store: db.store, sender: sender, catalog: .builtIn, logger: quietLogger)
        _ = try await before.run(ReminderRunOptions(now: now))
        // A user whose claim recorded a message past the shorter catalog's two.
        let lost = try #require(await sender.sent.first { $0.messageIndex >= 2 })
        let words = "[{\"title\": \"short 1\", \"body\": \"b\"}, {\"title\": \"short 2\", \"body\": \"b\"}]"
        let warning = "{\"en\": [{\"title\": \"t\", \"body\": \"{used} of {limit}\"}]}"
        let shorter = try CopyCatalog(
            json: Data(
                """
                {"diary_reminder": {"en": \(words)}, "content_limit_90": \(warning), "content_limit_100": \(warning)}
                """.utf8), source: "shorter catalog")
        let after = DiaryReminderRunner(store: db.store, sender: sender, catalog: shorter, logger: quietLogger)
        let retry = ReminderRunOptions(now: now + 900)
        let explanation = try await after.explain(userID: lost.device.userID, options: retry)
        let sentBefore = await sender.sent.count
        _ = try await after.run(retry)
        let resent = try #require(
            await sender.sent.dropFirst(sentBefore).first { $0.device.userID == lost.device.userID })
        #expect(explanation.due && resent.messageIndex == lost.messageIndex)
        #expect(explanation.words == .init(locale: "en", messageIndex: lost.messageIndex))
        let copy = try #require(explanation.steps.first { $0.rule == "copy" })
        #expect(resent.title.hasPrefix("short "), "\(resent.title)")
        #expect(copy.value.contains("\"\(resent.title)\""), "\(copy.value)")
        #expect(copy.value.contains("not in this catalog"), "\(copy.value)")
    }
}

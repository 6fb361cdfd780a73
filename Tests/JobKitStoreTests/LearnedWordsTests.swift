import Foundation
import JobKitTestSupport
import Testing

@testable import JobKit

/// Issue 69: words that learn. The choice is Thompson sampling over each message's counts, deterministic per seed,
/// user and day; a held-out share stays uniform; the counts are kept per day, counted once.
@Suite struct LearnedWordsTests {
    static let catalog = try! CopyCatalog(
        json: Data(
            CopyCatalog.builtInJSON.replacingOccurrences(
                of: "{\n  \"diary_reminder\":",
                with: "{\n  \"learning\": {\"held_out_percent\": 10, \"seed\": 7},\n  \"diary_reminder\":"
            ).utf8), source: "learning catalog")

    /// en message 3 works far better than the others.
    static let outcomes: [String: [Int: MessageOutcome]] = [
        "en": [
            0: MessageOutcome(sent: 400, wrote: 40), 1: MessageOutcome(sent: 400, wrote: 44),
            2: MessageOutcome(sent: 400, wrote: 36), 3: MessageOutcome(sent: 400, wrote: 160),
        ]
    ]

    func choice(_ user: String, _ period: String, previous: Int? = nil) -> CopyChoice {
        Self.catalog.choose(
            .diaryReminder, locale: "en", userID: user, period: period, previousIndex: previous,
            learned: LearnedWords(outcomes: Self.outcomes, history: nil))
    }

    @Test func theCatalogTurnsLearningOnAndRefusesABadSection() throws {
        #expect(Self.catalog.learning == CopyLearning(heldOutPercent: 10, seed: 7))
        #expect(CopyCatalog.builtIn.learning == nil)
        let bad = CopyCatalog.builtInJSON.replacingOccurrences(
            of: "{\n  \"diary_reminder\":",
            with: "{\n  \"learning\": {\"held_out_percent\": 120, \"speed\": 1},\n  \"diary_reminder\":")
        #expect(throws: JobError.self) { try CopyCatalog(json: Data(bad.utf8), source: "bad") }
    }

    /// The same seed, user and day give the same words, in any order and any number of times; the best message
    /// wins most learned choices, and yesterday's is never repeated.
    @Test func theChoiceIsDeterministicAndFavoursTheMessageThatWorks() {
        let users = (0..<2000).map { "user-\($0)" }
        let first = users.map { choice($0, "2026-11-20").index }
        let again = users.reversed().map { choice($0, "2026-11-20").index }.reversed()
        #expect(first == Array(again))
        let learned = users.filter { !Self.catalog.learning!.isHeldOut(userID: $0, period: "2026-11-20") }
        let best = learned.filter { choice($0, "2026-11-20").index == 3 }.count
        #expect(Double(best) / Double(learned.count) > 0.9)
        #expect(users.allSatisfy { choice($0, "2026-11-21", previous: 3).index != 3 })
        // Another seed gives other draws.
        let other = CopyLearning(heldOutPercent: 10, seed: 8)
        #expect(
            users.prefix(200).map { other.isHeldOut(userID: $0, period: "2026-11-20") }
                != users.prefix(200).map { Self.catalog.learning!.isHeldOut(userID: $0, period: "2026-11-20") })
    }

    /// The recency penalty: with equal counts, a message the user got two days ago is chosen about half as often as
    /// the others, one of four days ago at 7/8 of their rate, and yesterday's never.
    @Test func aRecentMessageIsPenalisedLessTheLongerAgo() {
        let learning = CopyLearning(heldOutPercent: 0, seed: 3)
        let even = (0..<4).reduce(into: [Int: MessageOutcome]()) { $0[$1] = MessageOutcome(sent: 1000, wrote: 200) }
        var chosen = [0, 0, 0, 0]
        for i in 0..<20_000 {
            chosen[
                learning.choose(
                    count: 4, outcomes: even, previous: 0, recent: [0: 1, 1: 2, 2: 4], userID: "r\(i)",
                    period: "2026-11-20")] += 1
        }
        #expect(chosen[0] == 0)
        // Even draws: message 3 (no penalty) wins more than message 2 (× 7/8), which wins far more than 1 (× ½).
        #expect(chosen[3] > chosen[2] && chosen[2] > 3 * chosen[1], "\(chosen)")
    }

    /// The held-out share is 10 % and its words are uniform, whatever the counts say: a chi-square test over
    /// 40,000 users (fixed ids, so it is deterministic), 3 degrees of freedom, 1 % level (11.34).
    @Test func theHeldOutShareIsUniform() {
        let learning = Self.catalog.learning!
        var counts = [0, 0, 0, 0]
        var heldOut = 0
        let users = 40_000
        for i in 0..<users {
            let user = "held-\(i)"
            guard learning.isHeldOut(userID: user, period: "2026-11-20") else { continue }
            heldOut += 1
            counts[choice(user, "2026-11-20").index] += 1
        }
        let share = Double(heldOut) / Double(users)
        #expect(abs(share - 0.10) < 0.01, "held-out share \(share)")
        let expected = Double(heldOut) / 4
        let chiSquare = counts.map { pow(Double($0) - expected, 2) / expected }.reduce(0, +)
        #expect(chiSquare < 11.34, "counts \(counts), chi-square \(chiSquare)")
    }

    /// A day's counts are kept once, by the first run that counts it; a dry run counts without writing.
    @Test(arguments: Backend.allCases) func aDaysCountsAreKeptOnce(_ backend: Backend) async throws {
        let db = try await TemporaryDatabase(backend)
        for i in 0..<6 { try await db.store.addUser("u\(i)", time: "20:00") }
        let at = instant("2026-11-20T20:00:00Z")
        let sender = RecordingSender()
        _ = try await DiaryReminderRunner(store: db.store, sender: sender, catalog: Self.catalog, logger: quietLogger)
            .run(ReminderRunOptions(now: at))
        // Two users write within 3 hours, one the next day.
        try await db.store.recordEntry(userID: "u0", at: at + 600)
        try await db.store.recordEntry(userID: "u1", at: at + 3 * 3600 - 1)
        try await db.store.recordEntry(userID: "u2", at: at + 4 * 3600)
        let dry = try await db.store.copyOutcomes(days: ["2026-11-20"], record: false, now: at + 86_400)
        #expect(dry.map(\.outcome.sent).reduce(0, +) == 6)
        #expect(dry.map(\.outcome.wrote).reduce(0, +) == 2)
        #expect(try await db.count("SELECT count(*) FROM copy_outcome_days WHERE day = '2026-11-20'") == 0)
        let counted = try await db.store.copyOutcomes(days: ["2026-11-20"], record: true, now: at + 86_400)
        #expect(Set(counted) == Set(dry))
        // Later entries change nothing: the day is counted.
        try await db.store.recordEntry(userID: "u3", at: at + 60)
        let again = try await db.store.copyOutcomes(
            days: ["2026-11-19", "2026-11-20"], record: true, now: at + 2 * 86_400)
        #expect(again.map(\.outcome.wrote).reduce(0, +) == 2)
        #expect(
            try await db.count("SELECT count(*) FROM copy_outcome_days WHERE day IN ('2026-11-19', '2026-11-20')") == 2)
    }

    /// A run with learning on uses the counts of the days before: the message that worked is chosen for most users.
    @Test(arguments: Backend.allCases) func aRunChoosesByTheCounts(_ backend: Backend) async throws {
        let db = try await TemporaryDatabase(backend)
        for i in 0..<200 { try await db.store.addUser("u\(i)", time: "20:00") }
        let sender = RecordingSender()
        let runner = DiaryReminderRunner(store: db.store, sender: sender, catalog: Self.catalog, logger: quietLogger)
        let first = instant("2026-11-10T20:00:00Z")
        _ = try await runner.run(ReminderRunOptions(now: first))
        // Everybody sent message 2 writes within the hour.
        for notification in await sender.sent where notification.messageIndex == 2 {
            try await db.store.recordEntry(userID: notification.device.userID, at: first + 1800)
        }
        // A dry run first, then the run, at the same instant: the same words for every user.
        let dry = RecordingSender()
        _ = try await DiaryReminderRunner(store: db.store, sender: dry, catalog: Self.catalog, logger: quietLogger).run(
            ReminderRunOptions(now: first + 2 * 86_400, dryRun: true))
        let before = await sender.sent.count
        _ = try await runner.run(ReminderRunOptions(now: first + 2 * 86_400))
        let second = await sender.sent.dropFirst(before)
        let twos = second.filter { $0.messageIndex == 2 }.count
        #expect(Double(twos) / Double(second.count) > 0.6, "\(twos) of \(second.count)")
        let dryChoices = Dictionary(uniqueKeysWithValues: await dry.sent.map { ($0.device.userID, $0.messageIndex) })
        #expect(dryChoices.count == 200)
        #expect(dryChoices == Dictionary(uniqueKeysWithValues: second.map { ($0.device.userID, $0.messageIndex) }))
        // The report compares the held-out choices only, and gives each message's chance of being chosen now.
        let report = try await db.store.fullHealthReport(
            from: first, to: first + 3 * 86_400, catalog: Self.catalog)
        #expect(report.heldOutOnly)
        let learning = try #require(Self.catalog.learning)
        let heldOut = (0..<200).map { "u\($0)" }.map {
            (learning.isHeldOut(userID: $0, period: "2026-11-10") ? 1 : 0)
                + (learning.isHeldOut(userID: $0, period: "2026-11-12") ? 1 : 0)
        }.reduce(0, +)
        #expect(report.reminderEffect.map(\.reminded).reduce(0, +) == heldOut)
        let chances = report.reminderEffect.compactMap { message in message.chance.map { (message.messageIndex, $0) } }
        #expect(chances.count == report.reminderEffect.count)
        if let best = chances.max(by: { $0.1 < $1.1 }), chances.contains(where: { $0.0 == 2 }) {
            #expect(best.0 == 2)
        }
        #expect(report.text.contains("chance="))
    }
}

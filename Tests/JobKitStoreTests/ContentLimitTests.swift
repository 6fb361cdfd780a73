import Foundation
import JobKitTestSupport
import NIOConcurrencyHelpers
import Testing

@testable import JobKit
@testable import JobKitDelivery

@Suite struct ContentLimitHookTests {
    final class SenderFactory: @unchecked Sendable {
        let sender = RecordingSender()
        private let lock = NIOLock()
        private var made = 0
        var calls: Int { lock.withLock { made } }
        func make() -> any Sender {
            lock.withLock { made += 1 }
            return sender
        }
    }

    func hook(_ db: TemporaryDatabase, _ factory: SenderFactory, store: (any JobStore)? = nil) -> ContentLimitHook {
        ContentLimitHook(store: store ?? db.store, logger: quietLogger) { () async throws(JobError) -> any Sender in
            factory.make()
        }
    }

    func fire(
        _ db: TemporaryDatabase, _ factory: SenderFactory, used: Int, limit: Int? = 30, period: LimitPeriod = .monthly,
        at now: String = "2026-11-21T12:00:00Z", user: String = "writer"
    ) async throws -> HookSummary {
        try await hook(db, factory).handle(
            try ContentLimitEvent(userID: user, used: used, limit: limit, period: period),
            options: .init(now: instant(now)))
    }

    func addWriter(
        _ db: TemporaryDatabase, zone: String = "UTC", warnings: Bool = true, quiet: (String, String)? = nil,
        id: String = "writer"
    ) async throws {
        try await db.store.upsertUser(
            UserProfile(
                id: id, timezone: zone, contentLimitWarningsEnabled: warnings,
                quietHoursStart: quiet?.0, quietHoursEnd: quiet?.1), now: 0)
        _ = try await db.store.register(
            DeviceRegistration(userID: id, token: "phone-\(id)", provider: .fcm, platform: .android), now: 0)
    }

    /// A warning claim taken over after its lease ran out carries the words its first claim stored, not the
    /// ones the later invocation chose: a retried warning reads as the first try would have. A live claim is
    /// not taken, and a deferred warning is stored with the words it will show.
    @Test(arguments: Backend.allCases) func aTakenOverWarningKeepsTheWordsOfItsFirstClaim(_ backend: Backend)
        async throws
    {
        let db = try await TemporaryDatabase(backend)
        try await addWriter(db)
        let start = instant("2026-11-21T12:00:00Z")
        let first = QuotaWarning(
            userID: "writer", type: .contentLimit90, period: "2026-11", messageIndex: 2, locale: "de",
            params: ["used": "27", "limit": "30"])
        let later = QuotaWarning(
            userID: "writer", type: .contentLimit90, period: "2026-11", messageIndex: 0, locale: "en",
            params: ["used": "28", "limit": "30"])
        let claim = try #require(
            try await db.store.claimLimitWarning(
                first, deliverAfter: nil, runID: "one", now: start, staleBefore: start - 600))
        #expect(claim.warning.warning == first && !claim.deferred)
        #expect(
            try await db.store.claimLimitWarning(
                later, deliverAfter: nil, runID: "two", now: start + 60, staleBefore: start + 60 - 600) == nil)
        let takenOver = try #require(
            try await db.store.claimLimitWarning(
                later, deliverAfter: nil, runID: "three", now: start + 700, staleBefore: start + 100))
        #expect(takenOver == LimitClaim(PendingWarning(logID: claim.warning.logID, warning: first), deferred: false))

        let deferred = QuotaWarning(
            userID: "writer", type: .contentLimit90, period: "2026-12", messageIndex: 1, locale: "fr",
            params: ["used": "9", "limit": "10"])
        let stored = try #require(
            try await db.store.claimLimitWarning(
                deferred, deliverAfter: start + 3_600, runID: "four", now: start, staleBefore: start - 600))
        #expect(stored.deferred && stored.warning.warning == deferred)
        let pending = try await db.store.pendingWarnings(now: start + 3_600, staleBefore: start, afterID: 0, limit: 10)
        #expect(pending.map(\.warning) == [deferred])
    }

    /// A warning left for retry on one plan and taken over by a hook call on another shows the numbers of the
    /// quota the user has now: the stored words are kept only for a retry of the same warning. It showed the old
    /// plan's ("27 of 30") to a user who had upgraded to 100 and was at 95.
    @Test(arguments: Backend.allCases) func aWarningTakenOverOnAnotherPlanShowsTheNewNumbers(_ backend: Backend)
        async throws
    {
        let db = try await TemporaryDatabase(backend)
        try await db.store.upsertUser(UserProfile(id: "writer", timezone: "UTC"), now: 0)
        _ = try await db.store.register(
            DeviceRegistration(userID: "writer", token: "flaky-phone", provider: .fcm, platform: .android), now: 0)
        let factory = SenderFactory()
        #expect(try await fire(db, factory, used: 27).action == .retry)
        #expect(try await db.count("SELECT count(*) FROM notification_logs WHERE status = 'retry'") == 1)
        let first = try #require(await factory.sender.sent.last)
        #expect(first.body.contains("27") && first.body.contains("30"))

        // Same plan: the retry reads as the first try did, whatever this call's numbers.
        _ = try await fire(db, factory, used: 28, at: "2026-11-21T12:01:00Z")
        let retried = try #require(await factory.sender.sent.last)
        #expect(retried.title == first.title && retried.body == first.body)

        // The user upgrades: a quota of 100, and 95 used.
        try await db.execute("UPDATE users SET plan = 'plus' WHERE id = 'writer'")
        _ = try await fire(db, factory, used: 95, limit: 100, at: "2026-11-21T12:02:00Z")
        let upgraded = try #require(await factory.sender.sent.last)
        #expect(upgraded.body.contains("95") && upgraded.body.contains("100"), "\(upgraded.body)")
        #expect(!upgraded.body.contains("27"))
        #expect(await factory.sender.sent.count == 3)
    }

    /// The hook warns whatever plan has a limit (the backend sends `limit` for a limited plan, none for an
    /// unlimited one), so its built-in words name no plan: a user on a paid plan with a quota of 100 was told
    /// "You've used 90 of 100 entries on the free plan".
    @Test func theBuiltInWarningsNameNoPlan() async throws {
        let db = try await TemporaryDatabase(.sqlite)
        try await addWriter(db)
        try await db.execute("UPDATE users SET plan = 'plus' WHERE id = 'writer'")
        let factory = SenderFactory()
        _ = try await fire(db, factory, used: 90, limit: 100)
        _ = try await fire(db, factory, used: 100, limit: 100, at: "2026-11-21T12:01:00Z")
        let sent = await factory.sender.sent
        #expect(
            sent.map(\.body) == [
                "You've used 90 of your 100 entries. Upgrade to keep writing without limits.",
                "You've used all 100 of your entries. Upgrade to keep writing.",
            ])
        // Every language of the built-in catalog: its word for the free plan appears in no warning.
        let free = [
            "en": "free", "ja": "無料", "de": "kostenlos", "fr": "gratuit", "es": "gratuito", "pt": "gratuito",
            "pt-BR": "gratuito", "ko": "무료",
        ]
        let catalog = try JSONDecoder().decode(
            [String: [String: [CopyMessage]]].self, from: Data(CopyCatalog.builtInJSON.utf8))
        for type in [NotificationType.contentLimit90, .contentLimit100] {
            let locales = try #require(catalog[type.rawValue])
            #expect(Set(locales.keys) == Set(free.keys), "a language to add to this table")
            for (locale, messages) in locales {
                for message in messages {
                    let word = try #require(free[locale])
                    #expect(
                        !message.title.lowercased().contains(word) && !message.body.lowercased().contains(word),
                        "\(type.rawValue).\(locale): \(message.body)")
                }
            }
        }
    }

    /// An account closed between the hook's read and its claim: the claim is refused as for any unknown user
    /// (65, "unknown user"), on both stores, and writes nothing. SQLite failed it as "FOREIGN KEY constraint
    /// failed"; PostgreSQL, whose history has no foreign key (migration 008), claimed a warning for nobody.
    @Test(arguments: Backend.allCases) func aClaimForAUserDeletedMeanwhileIsRefusedAsUnknown(_ backend: Backend)
        async throws
    {
        let db = try await TemporaryDatabase(backend)
        try await addWriter(db)
        try await addWriter(db, id: "other")
        try await db.execute("DELETE FROM users WHERE id = 'writer'")
        let start = instant("2026-11-21T12:00:00Z")
        for type in [NotificationType.contentLimit90, .contentLimit100] {
            for deliverAfter in [nil, start + 3_600] {
                let warning = QuotaWarning(
                    userID: "writer", type: type, period: "2026-11", messageIndex: 0, locale: "en",
                    params: ["used": "30", "limit": "30"])
                await #expect(throws: JobError.dataError("unknown user writer")) {
                    try await db.store.claimLimitWarning(
                        warning, deliverAfter: deliverAfter, runID: "one", now: start, staleBefore: start - 600)
                }
            }
        }
        #expect(try await db.count("SELECT count(*) FROM notification_logs") == 0)
        // The user's neighbour is claimed as before.
        let warning = QuotaWarning(
            userID: "other", type: .contentLimit100, period: "2026-11", messageIndex: 0, locale: "en",
            params: ["used": "30", "limit": "30"])
        let claim = try await db.store.claimLimitWarning(
            warning, deliverAfter: nil, runID: "one", now: start, staleBefore: start - 600)
        #expect(claim?.warning.warning == warning)
    }

    @Test(arguments: Backend.allCases) func belowNinetyPercentWritesNothingAndTouchesNoNetwork(_ backend: Backend)
        async throws
    {
        let db = try await TemporaryDatabase(backend)
        try await addWriter(db)
        let factory = SenderFactory()
        let before = try await db.contentDigest()
        let summary = try await fire(db, factory, used: 26)
        #expect(summary.action == .none)
        #expect(summary.reason == "below 90 %")
        #expect(factory.calls == 0)
        #expect(try await db.contentDigest() == before)
        #expect(try await db.count("SELECT count(*) FROM notification_logs") == 0)
    }

    @Test(arguments: Backend.allCases) func ninetyPercentFiresOncePerPeriodWithTheNumbers(_ backend: Backend)
        async throws
    {
        let db = try await TemporaryDatabase(backend)
        try await addWriter(db)
        let factory = SenderFactory()
        let first = try await fire(db, factory, used: 27)
        #expect(first.action == .sent)
        #expect(first.period == "2026-11")
        let again = try await fire(db, factory, used: 28)
        #expect(again.action == .none)
        let sent = await factory.sender.sent
        #expect(sent.count == 1)
        #expect(sent.first?.type == .contentLimit90)
        #expect(sent.first?.body.contains("27 of your 30") == true)
        #expect(sent.first?.collapseID == "content_limit_90:2026-11")
        #expect(
            try await db.strings("SELECT notification_type || ' ' || status FROM notification_logs") == [
                "content_limit_90 sent"
            ])
        // Then 100 %: its own warning, once.
        #expect(try await fire(db, factory, used: 30).action == .sent)
        #expect(try await fire(db, factory, used: 31).action == .none)
        #expect(await factory.sender.sent.map(\.type) == [.contentLimit90, .contentLimit100])
    }

    @Test(arguments: Backend.allCases) func aJumpStraightToTheLimitSendsOnlyTheHundredAndSupersedesTheNinety(
        _ backend: Backend
    ) async throws {
        let db = try await TemporaryDatabase(backend)
        try await addWriter(db)
        let factory = SenderFactory()
        #expect(try await fire(db, factory, used: 30).action == .sent)
        #expect(try await fire(db, factory, used: 27).action == .none)  // deleted some, back at 90 %
        #expect(await factory.sender.sent.map(\.type) == [.contentLimit100])
        #expect(
            try await db.strings(
                "SELECT notification_type || ' ' || status FROM notification_logs ORDER BY notification_type")
                == ["content_limit_100 sent", "content_limit_90 superseded"])
    }

    @Test(arguments: Backend.allCases) func usageThatDropsAndRisesAgainFiresNothingNew(_ backend: Backend) async throws
    {
        let db = try await TemporaryDatabase(backend)
        try await addWriter(db)
        let factory = SenderFactory()
        for used in [27, 20, 27, 29, 12, 28] { _ = try await fire(db, factory, used: used) }
        #expect(await factory.sender.sent.count == 1)
    }

    @Test(arguments: Backend.allCases) func aNewMonthStartsInTheUsersZoneBeforeUTC(_ backend: Backend) async throws {
        let db = try await TemporaryDatabase(backend)
        try await addWriter(db, zone: "Pacific/Auckland")
        let factory = SenderFactory()
        let november = try await fire(db, factory, used: 27, at: "2026-11-30T10:00:00Z")  // 23:00 NZDT, 30 Nov
        // 01:00 NZDT, 1 Dec; UTC still November
        let december = try await fire(db, factory, used: 27, at: "2026-11-30T12:00:00Z")
        #expect(november.period == "2026-11")
        #expect(december.period == "2026-12")
        #expect(december.action == .sent)
        #expect(await factory.sender.sent.count == 2)
    }

    @Test(arguments: Backend.allCases) func annualPeriodsUseTheLocalYear(_ backend: Backend) async throws {
        let db = try await TemporaryDatabase(backend)
        try await addWriter(db, zone: "Pacific/Kiritimati")
        let factory = SenderFactory()
        let summary = try await fire(db, factory, used: 95, limit: 100, period: .annual, at: "2026-12-31T11:00:00Z")
        #expect(summary.period == "2027")  // already New Year's Day at UTC+14
        #expect(
            try await fire(db, factory, used: 96, limit: 100, period: .annual, at: "2027-06-01T00:00:00Z").action
                == .none)
    }

    @Test func aWarningsPeriodEndsAtTheUsersLocalMidnight() throws {
        let tokyo = try #require(ZoneClock(identifier: "Asia/Tokyo"))
        func ended(_ period: String, _ at: String) -> Bool {
            ContentLimitRule.periodEnded(period, now: instant(at), zone: tokyo)
        }
        #expect(!ended("2026-11", "2026-11-30T14:59:59Z"))  // 23:59:59 JST
        #expect(ended("2026-11", "2026-11-30T15:00:00Z"))
        #expect(!ended("2026-12", "2026-11-30T15:00:00Z"))
        #expect(!ended("2026", "2026-12-31T14:59:59Z"))
        #expect(ended("2026", "2026-12-31T15:00:00Z"))
        #expect(ended("2025-12", "2026-01-31T00:00:00Z"))
    }

    @Test(arguments: Backend.allCases) func unlimitedPlansAndDisabledWarningsDoNothing(_ backend: Backend) async throws
    {
        let db = try await TemporaryDatabase(backend)
        try await addWriter(db)
        try await addWriter(db, warnings: false, id: "quiet-type")
        let factory = SenderFactory()
        #expect(try await fire(db, factory, used: 500, limit: nil).reason == "unlimited plan")
        #expect(try await fire(db, factory, used: 500, limit: 0).reason == "unlimited plan")
        #expect(try await fire(db, factory, used: 30, user: "quiet-type").reason == "warnings turned off")
        #expect(factory.calls == 0)
        #expect(try await db.count("SELECT count(*) FROM notification_logs") == 0)
        await #expect(throws: JobError.dataError("unknown user ghost")) {
            try await fire(db, factory, used: 29, user: "ghost")
        }
    }

    @Test(arguments: Backend.allCases) func quietHoursDeferUntilTheyEndAndTheReminderRunDelivers(_ backend: Backend)
        async throws
    {
        let db = try await TemporaryDatabase(backend)
        try await addWriter(db, zone: "Asia/Tokyo", quiet: ("22:00", "07:00"))
        let factory = SenderFactory()
        let summary = try await fire(db, factory, used: 27, at: "2026-11-21T14:30:00Z")  // 23:30 JST
        #expect(summary.action == .deferred)
        #expect(summary.deliverAfter == "2026-11-21T22:00:00Z")
        // Later that night the user jumps to 100 %: still deferred, and the 90 % one is superseded.
        #expect(try await fire(db, factory, used: 30, at: "2026-11-21T17:00:00Z").action == .deferred)
        #expect(factory.calls == 0)
        let runner = DiaryReminderRunner(store: db.store, sender: factory.sender, logger: quietLogger)
        let early = try await runner.run(ReminderRunOptions(now: instant("2026-11-21T21:45:00Z")))  // 06:45 JST
        #expect(early.warningsDelivered == 0)
        let morning = try await runner.run(ReminderRunOptions(now: instant("2026-11-21T22:00:00Z")))  // 07:00 JST
        #expect(morning.warningsDelivered == 1)
        // Counted by provider too, as the metrics file's `diary_push_run_deliveries` reads them: the run's
        // warnings were missing there, and from the JSON summary's `outcomes_by_provider`.
        #expect(morning.outcomes == [.delivered: 1])
        #expect(morning.outcomesByProvider == [DeliveryChannel(.fcm): [.delivered: 1]])
        let sent = await factory.sender.sent
        #expect(sent.map(\.type) == [.contentLimit100])
        #expect(sent.first?.body.contains("30") == true)
        #expect(
            try await db.strings(
                "SELECT notification_type || ' ' || status FROM notification_logs ORDER BY notification_type")
                == ["content_limit_100 sent", "content_limit_90 superseded"])
        let later = try await runner.run(ReminderRunOptions(now: instant("2026-11-21T22:15:00Z")))
        #expect(later.warningsDelivered == 0)
    }

    /// A warning held for quiet hours that end in the next month is never sent: the quota it speaks of has reset.
    /// It is marked superseded, and the next month's warnings are unaffected.
    @Test(arguments: Backend.allCases) func aWarningHeldPastItsPeriodsEndIsNotSent(_ backend: Backend) async throws {
        let db = try await TemporaryDatabase(backend)
        try await addWriter(db, zone: "Asia/Tokyo", quiet: ("22:00", "07:00"))
        let factory = SenderFactory()
        let night = try await fire(db, factory, used: 30, at: "2026-11-30T14:30:00Z")  // 23:30 JST, 30 November
        #expect(night.action == .deferred && night.period == "2026-11")
        #expect(night.deliverAfter == "2026-11-30T22:00:00Z")  // 07:00 JST, 1 December
        let runner = DiaryReminderRunner(store: db.store, sender: factory.sender, logger: quietLogger)
        let morning = try await runner.run(ReminderRunOptions(now: instant("2026-11-30T22:00:00Z")))
        #expect(morning.warningsDelivered == 0)
        #expect(await factory.sender.sent.isEmpty)
        #expect(
            try await db.strings(
                "SELECT notification_type || ' ' || status || ' ' || detail FROM notification_logs ORDER BY notification_type"
            )
                == [
                    "content_limit_100 superseded its period 2026-11 ended before it could be sent",
                    "content_limit_90 superseded usage reached 100 % first",
                ])
        // A warning of a period that has not ended is still delivered when its quiet hours end.
        let december = try await fire(db, factory, used: 27, at: "2026-12-01T14:30:00Z")  // 23:30 JST
        #expect(december.action == .deferred && december.period == "2026-12")
        let next = try await runner.run(ReminderRunOptions(now: instant("2026-12-01T22:00:00Z")))
        #expect(next.warningsDelivered == 1)
        #expect(await factory.sender.sent.map(\.type) == [.contentLimit90])
    }

    /// Users in Tokyo with quiet hours 22:00–07:00, each with a 90 % warning the hook held at 23:30 JST until
    /// 07:00 JST (22:00 UTC).
    func holdWarnings(_ db: TemporaryDatabase, _ factory: SenderFactory, for users: [String]) async throws {
        for id in users {
            try await addWriter(db, zone: "Asia/Tokyo", quiet: ("22:00", "07:00"), id: id)
            let held = try await fire(db, factory, used: 27, at: "2026-11-21T14:30:00Z", user: id)
            #expect(held.action == .deferred && held.deliverAfter == "2026-11-21T22:00:00Z")
        }
    }

    /// What a user of ``holdWarnings(_:_:for:)`` changes after the hook held their warning.
    enum SettingsChange {
        case warningsOff, movedToBerlin, quietUntilNine, upgraded

        func profile(_ id: String) -> UserProfile {
            switch self {
            case .warningsOff: UserProfile(id: id, timezone: "Asia/Tokyo", contentLimitWarningsEnabled: false)
            case .movedToBerlin:
                UserProfile(id: id, timezone: "Europe/Berlin", quietHoursStart: "22:00", quietHoursEnd: "07:00")
            case .quietUntilNine:
                UserProfile(id: id, timezone: "Asia/Tokyo", quietHoursStart: "22:00", quietHoursEnd: "09:00")
            case .upgraded:
                UserProfile(
                    id: id, timezone: "Asia/Tokyo", plan: "plus", quietHoursStart: "22:00", quietHoursEnd: "07:00")
            }
        }
    }

    func change(_ db: TemporaryDatabase, _ changes: [String: SettingsChange]) async throws {
        for (id, change) in changes { try await db.store.upsertUser(change.profile(id), now: 0) }
    }

    /// Measured: a warning held for quiet hours went out when they ended as the hook had computed them, whatever
    /// the user did meanwhile. One who turned warnings off got it anyway; one who moved from Tokyo to Berlin got it
    /// at 23:00 in Berlin, inside their quiet hours; one who made their quiet hours longer got it before they
    /// ended. A held warning now goes out only if its user's settings allow it when it does: turned off, it is never
    /// sent; inside the quiet hours in force, it is held again until they end.
    @Test(arguments: Backend.allCases) func aHeldWarningHeedsItsUsersSettingsWhenItGoesOut(_ backend: Backend)
        async throws
    {
        let db = try await TemporaryDatabase(backend)
        let factory = SenderFactory()
        try await holdWarnings(db, factory, for: ["opted-out", "traveller", "sleeper", "unchanged"])
        try await change(db, ["opted-out": .warningsOff, "traveller": .movedToBerlin, "sleeper": .quietUntilNine])
        let runner = DiaryReminderRunner(store: db.store, sender: factory.sender, logger: quietLogger)
        var held: [Int] = []
        var withdrawn: [Int] = []
        func run(_ at: String) async throws -> [String] {
            let before = await factory.sender.sent.count
            let summary = try await runner.run(ReminderRunOptions(now: instant(at)))
            held.append(summary.warningsHeld)
            withdrawn.append(summary.warningsWithdrawn)
            if summary.warningsHeld > 0 { #expect(summary.text.contains("warnings_held=\(summary.warningsHeld)")) }
            if summary.warningsWithdrawn > 0 {
                #expect(summary.text.contains("warnings_withdrawn=\(summary.warningsWithdrawn)"))
                #expect(summary.json.contains(#""warnings_withdrawn":\#(summary.warningsWithdrawn)"#))
            }
            return await factory.sender.sent.dropFirst(before).map(\.device.userID).sorted()
        }
        func row(_ user: String) async throws -> String {
            try await db.strings(
                "SELECT status || ' ' || coalesce(detail, '-') FROM notification_logs WHERE user_id = '\(user)'"
            ).joined()
        }
        #expect(try await run("2026-11-21T22:00:00Z") == ["unchanged"])  // 07:00 JST, 23:00 in Berlin
        #expect(try await row("opted-out") == "superseded warnings turned off before it could be sent")
        #expect(try await row("traveller") == "deferred -")
        #expect(try await row("sleeper") == "deferred -")
        #expect(
            try await db.count(
                "SELECT count(*) FROM notification_logs WHERE user_id = 'sleeper' AND deliver_after = \(db.ts(instant("2026-11-22T00:00:00Z")))"
            ) == 1)
        #expect(
            try await db.count(
                "SELECT count(*) FROM notification_logs WHERE user_id = 'traveller' AND deliver_after = \(db.ts(instant("2026-11-22T06:00:00Z")))"
            ) == 1)
        #expect(try await run("2026-11-21T23:45:00Z") == [])
        #expect(try await run("2026-11-22T00:00:00Z") == ["sleeper"])  // 09:00 JST
        #expect(try await run("2026-11-22T05:45:00Z") == [])
        #expect(try await run("2026-11-22T06:00:00Z") == ["traveller"])  // 07:00 in Berlin
        #expect(try await run("2026-11-22T06:15:00Z") == [])
        #expect(
            try await db.strings("SELECT user_id || ' ' || status FROM notification_logs ORDER BY user_id") == [
                "opted-out superseded", "sleeper sent", "traveller sent", "unchanged sent",
            ])
        #expect(held == [2, 0, 0, 0, 0, 0])  // held once, then left alone until their quiet hours end
        #expect(withdrawn == [1, 0, 0, 0, 0, 0])  // the one whose user turned warnings off
    }

    /// Measured: a user who hit their free plan's quota at 23:30 and upgraded before morning still got "27 of 30"
    /// at 07:00, when the quiet hours ended: a quota they no longer have. The hook now stores the plan a warning
    /// was counted against, and a run withdraws a held warning whose user's plan has changed since; explain says
    /// so. A warning stored without a plan (before this), or with one that is not a string, goes out as before.
    @Test(arguments: Backend.allCases) func aHeldWarningIsWithdrawnWhenItsUsersPlanChanged(_ backend: Backend)
        async throws
    {
        let db = try await TemporaryDatabase(backend)
        let factory = SenderFactory()
        try await holdWarnings(db, factory, for: ["upgraded", "unchanged", "stored-before", "odd-plan"])
        try await db.execute(
            """
            UPDATE notification_logs SET params = '{"used":"27","limit":"30","percent":"90"}'
            WHERE user_id = 'stored-before'
            """)
        try await db.execute(
            """
            UPDATE notification_logs SET params = '{"used":"27","limit":"30","percent":"90","plan":5}'
            WHERE user_id = 'odd-plan'
            """)
        try await change(db, ["upgraded": .upgraded, "stored-before": .upgraded, "odd-plan": .upgraded])
        let runner = DiaryReminderRunner(store: db.store, sender: factory.sender, logger: quietLogger)
        let morning = ReminderRunOptions(now: instant("2026-11-21T22:00:00Z"))  // 07:00 JST
        #expect(
            try await runner.explain(userID: "upgraded", options: morning).text.contains(
                "quota warning content_limit_90 2026-11 (deferred): a run now withdraws it: "
                    + "the plan changed (free → plus) before it could be sent"))
        // A plan that is not a string is no plan: the row is read (not skipped as malformed) and the warning sent.
        #expect(
            try await runner.explain(userID: "odd-plan", options: morning).text.contains(
                "quota warning content_limit_90 2026-11 (deferred): a run now sends it"))
        let summary = try await runner.run(morning)
        #expect(summary.warningsDelivered == 3 && summary.warningsWithdrawn == 1)
        #expect(
            await factory.sender.sent.map(\.device.userID).sorted() == ["odd-plan", "stored-before", "unchanged"])
        #expect(
            try await db.strings(
                "SELECT user_id || ' ' || status || ' ' || coalesce(detail, '-') FROM notification_logs ORDER BY user_id"
            ) == [
                "odd-plan sent -", "stored-before sent -", "unchanged sent -",
                "upgraded superseded the plan changed (free → plus) before it could be sent",
            ])
    }

    /// Measured: a dry run printed nothing of the quota warnings a real run at the same instant delivers (held
    /// past quiet hours, left for retry): `notifications=0`, where the real run said `warnings_delivered=1`. A dry
    /// run now shows each one it would send, says how many it would send and hold, and writes nothing; the real
    /// run then does just that.
    @Test(arguments: Backend.allCases) func aDryRunShowsTheHeldWarningsARealRunWouldSend(_ backend: Backend)
        async throws
    {
        let db = try await TemporaryDatabase(backend)
        let factory = SenderFactory()
        try await holdWarnings(db, factory, for: ["due", "still-quiet", "opted-out"])
        try await change(db, ["still-quiet": .quietUntilNine, "opted-out": .warningsOff])
        let morning = instant("2026-11-21T22:00:00Z")  // 07:00 JST
        let bytes = try await db.contentDigest()
        let lines = LineBuffer()
        let dry = try await DiaryReminderRunner(
            store: try await db.reopen(.readOnly), sender: DryRunSender(sink: lines, json: false), logger: quietLogger
        ).run(ReminderRunOptions(now: morning, dryRun: true))
        #expect(lines.lines.count == 1)
        let line = lines.lines.first ?? ""
        #expect(line.hasPrefix("would send: user=due type=content_limit_90 device=") && line.contains("27"), "\(line)")
        #expect(dry.notifications == 1)
        #expect(
            dry.text.contains("warnings_would_send=1 warnings_would_hold=1 warnings_would_withdraw=1 notifications=1"),
            "\(dry.text)")
        #expect(dry.json.contains(#""warnings_would_send":1"#) && dry.json.contains(#""warnings_would_hold":1"#))
        #expect(dry.json.contains(#""warnings_would_withdraw":1"#), "\(dry.json)")
        #expect(try await db.contentDigest() == bytes)

        let real = try await DiaryReminderRunner(store: db.store, sender: factory.sender, logger: quietLogger)
            .run(ReminderRunOptions(now: morning))
        #expect(real.warningsDelivered == 1 && real.warningsHeld == 1 && real.warningsWithdrawn == 1)
        #expect(await factory.sender.sent.map(\.device.userID) == ["due"])
    }

    /// `diary-reminder --explain USER` said nothing of the user's quota warnings held for quiet hours or left for
    /// retry: "why did that user not get the warning?" had no answer but the log table. It now lists each one with
    /// what a run at that instant does with it, from the rule the run uses.
    @Test(arguments: Backend.allCases) func explainSaysWhatARunDoesWithEachHeldWarning(_ backend: Backend)
        async throws
    {
        let db = try await TemporaryDatabase(backend)
        let factory = SenderFactory()
        try await holdWarnings(db, factory, for: ["due", "traveller", "opted-out"])
        try await change(db, ["traveller": .movedToBerlin, "opted-out": .warningsOff])
        let runner = DiaryReminderRunner(store: db.store, sender: factory.sender, logger: quietLogger)
        func explained(_ user: String, _ at: String) async throws -> String {
            try await runner.explain(userID: user, options: ReminderRunOptions(now: instant(at))).text
        }
        let night = try await explained("due", "2026-11-21T20:00:00Z")
        #expect(night.contains("quota warning content_limit_90 2026-11 (deferred): held until 2026-11-21T22:00:00Z"))
        let morning = "2026-11-21T22:00:00Z"
        #expect(
            try await explained("due", morning).contains(
                "quota warning content_limit_90 2026-11 (deferred): a run now sends it"))
        #expect(
            try await explained("traveller", morning).contains(
                "quota warning content_limit_90 2026-11 (deferred): a run now holds it again until 2026-11-22T06:00:00Z"
            ))
        #expect(
            try await explained("opted-out", morning).contains(
                "quota warning content_limit_90 2026-11 (deferred): a run now withdraws it: warnings turned off"))
        // Under `--shard`, only the run of the user's shard sends their warnings (as it reminds them).
        let owner = Shard.holding(userID: "due", count: 2)
        var otherShard = ReminderRunOptions(now: instant(morning))
        otherShard.shard = Shard(index: 3 - owner.index, count: 2)
        let sharded = try await runner.explain(userID: "due", options: otherShard).text
        #expect(
            sharded.contains(
                "quota warning content_limit_90 2026-11 (deferred): the run of shard \(owner) now sends it, not this one"
            ),
            "\(sharded)")
        // Once sent, the warning is finished: nothing to list.
        _ = try await runner.run(ReminderRunOptions(now: instant(morning)))
        #expect(!(try await explained("due", "2026-11-21T22:15:00Z").contains("quota warning")))
        let json = try await runner.explain(userID: "traveller", options: ReminderRunOptions(now: instant(morning)))
        #expect(json.json.contains(#""quota_warnings":[{"#), "\(json.json)")
    }

    /// Warnings held for quiet hours that end at the same minute for many users.
    func deferWarnings(_ db: TemporaryDatabase, users count: Int, heldUntil: Int64) async throws {
        for i in 0..<count { try await addWriter(db, id: "w\(1_000 + i)") }
        try await db.execute(
            """
            INSERT INTO notification_logs (user_id, notification_type, period_key, status, message_index, locale,
                run_id, claimed_at, updated_at, deliver_after, params)
            SELECT id, 'content_limit_90', '2026-11', 'deferred', 0, 'en', 'hook', \(db.ts(heldUntil - 3_600)),
                \(db.ts(heldUntil - 3_600)), \(db.ts(heldUntil)), '{"used":"27","limit":"30","percent":"90"}' FROM users
            """)
    }

    /// Measured: a reminder run took the first 1,000 pending warnings and left the rest to later runs, 1,000 a
    /// quarter hour for the whole fleet, however many shards (each read the same 1,000 and kept its own). It now
    /// pages through them all, after its reminders.
    @Test(arguments: Backend.allCases) func aRunDeliversEveryPendingWarning(_ backend: Backend) async throws {
        let db = try await TemporaryDatabase(backend)
        let morning = instant("2026-11-21T22:00:00Z")
        try await deferWarnings(db, users: 1_050, heldUntil: morning)
        let factory = SenderFactory()
        let runner = DiaryReminderRunner(store: db.store, sender: factory.sender, logger: quietLogger)
        let run = try await runner.run(ReminderRunOptions(now: morning))
        #expect(run.warningsDelivered == 1_050 && !run.stoppedEarly)
        #expect(await Set(factory.sender.sent.map(\.device.userID)).count == 1_050)
        #expect(try await db.count("SELECT count(*) FROM notification_logs WHERE status = 'sent'") == 1_050)
    }

    /// Each shard's run delivers its own users' warnings, every one of them, a page at a time; a run asked to
    /// stop leaves them to the next run and says it stopped early.
    @Test(arguments: Backend.allCases) func eachShardDeliversItsOwnPendingWarningsAPageAtATime(_ backend: Backend)
        async throws
    {
        let db = try await TemporaryDatabase(backend)
        let morning = instant("2026-11-21T22:00:00Z")
        try await deferWarnings(db, users: 20, heldUntil: morning)
        let factory = SenderFactory()
        let runner = DiaryReminderRunner(store: db.store, sender: factory.sender, logger: quietLogger)
        var stopped = ReminderRunOptions(now: morning)
        stopped.stop = StopRequest()
        _ = stopped.stop?.request("SIGTERM")
        let first = try await runner.run(stopped)
        #expect(first.warningsDelivered == 0 && first.stoppedEarly && first.stoppedBy == "SIGTERM")
        var delivered: [Int] = []
        for index in 1...2 {
            var options = ReminderRunOptions(now: morning)
            options.shard = Shard(index: index, count: 2)
            options.pageSize = 3
            let run = try await runner.run(options)
            #expect(!run.stoppedEarly)
            delivered.append(run.warningsDelivered)
        }
        let sent = await factory.sender.sent.map(\.device.userID)
        let shardOne = sent.filter { Shard.holding(userID: $0, count: 2) == Shard(index: 1, count: 2) }.count
        #expect(delivered == [shardOne, 20 - shardOne] && shardOne > 0 && shardOne < 20)
        #expect(Set(sent).count == 20 && sent.count == 20)
    }

    /// Where a run's pending warnings come from, counting the reads of quota state and the users each covered.
    actor CountingWarnings: ContentLimitStore, ClaimLedger {
        let store: any JobStore
        var snapshotReads: [Int] = []
        init(_ store: any JobStore) { self.store = store }

        func limitSnapshots(userIDs: [String], periodsFrom: String) async throws(JobError) -> [String: LimitSnapshot] {
            snapshotReads.append(userIDs.count)
            return try await store.limitSnapshots(userIDs: userIDs, periodsFrom: periodsFrom)
        }
        func userExists(id: String) async throws(JobError) -> Bool { try await store.userExists(id: id) }
        func holdDevices(_ holds: [DeviceHold], runID: String, now: Int64) async throws(JobError) {
            try await store.holdDevices(holds, runID: runID, now: now)
        }
        func releaseHeldDevices(provider: Provider) async throws(JobError) -> Int {
            try await store.releaseHeldDevices(provider: provider)
        }
        func heldDevices(userID: String?) async throws(JobError) -> [DeviceHold] {
            try await store.heldDevices(userID: userID)
        }
        func claimLimitWarning(
            _ warning: QuotaWarning, deliverAfter: Int64?, runID: String, now: Int64, staleBefore: Int64
        ) async throws(JobError) -> LimitClaim? {
            try await store.claimLimitWarning(
                warning, deliverAfter: deliverAfter, runID: runID, now: now, staleBefore: staleBefore)
        }
        func pendingWarnings(now: Int64, staleBefore: Int64, afterID: Int64, limit: Int) async throws(JobError)
            -> [PendingWarning]
        {
            try await store.pendingWarnings(now: now, staleBefore: staleBefore, afterID: afterID, limit: limit)
        }
        func claimPendingWarnings(_ ids: [Int64], runID: String, now: Int64, staleBefore: Int64)
            async throws(JobError) -> Set<Int64>
        {
            try await store.claimPendingWarnings(ids, runID: runID, now: now, staleBefore: staleBefore)
        }
        func holdPendingWarnings(_ until: [Int64: Int64], runID: String, now: Int64, staleBefore: Int64)
            async throws(JobError) -> Set<Int64>
        {
            try await store.holdPendingWarnings(until, runID: runID, now: now, staleBefore: staleBefore)
        }
        func deliveredDevices(logIDs: [Int64]) async throws(JobError) -> [Int64: Set<Int64>] {
            try await store.deliveredDevices(logIDs: logIDs)
        }
        func claim(_ requests: [ClaimRequest], runID: String, now: Int64, staleBefore: Int64) async throws(JobError)
            -> [Claim]
        {
            try await store.claim(requests, runID: runID, now: now, staleBefore: staleBefore)
        }
        func activeDevices(userIDs: [String]) async throws(JobError) -> [String: [Device]] {
            try await store.activeDevices(userIDs: userIDs)
        }
        func record(_ deliveries: [DeliveryRecord], resolutions: [ClaimResolution], runID: String, now: Int64)
            async throws(JobError)
        {
            try await store.record(deliveries, resolutions: resolutions, runID: runID, now: now)
        }
    }

    /// A run read each pending warning's quota state on its own, one query after another: a page of 1,000 waited
    /// on 1,000 reads before anything was claimed (`PUSH_FCM_RATE=0 scripts/bench-held-warnings 20000 200`: 3.4 s
    /// for 15,984 warnings, 1.4 s now). A page is now decided from one read of its users.
    @Test(arguments: Backend.allCases) func aPageOfPendingWarningsIsDecidedFromOneRead(_ backend: Backend)
        async throws
    {
        let db = try await TemporaryDatabase(backend)
        let morning = instant("2026-11-21T22:00:00Z")
        try await deferWarnings(db, users: 25, heldUntil: morning)
        let warnings = CountingWarnings(db.store)
        let factory = SenderFactory()
        let runner = DiaryReminderRunner(
            store: db.store, ledger: db.store, warnings: warnings, leases: db.store, sender: factory.sender,
            catalog: .builtIn, logger: quietLogger)
        var options = ReminderRunOptions(now: morning)
        options.pageSize = 10
        let run = try await runner.run(options)
        #expect(run.warningsDelivered == 25 && !run.stoppedEarly)
        #expect(await warnings.snapshotReads == [10, 10, 5])
        #expect(Set(await factory.sender.sent.map(\.device.userID)).count == 25)
    }

    /// The store's read of many users' quota state: each user's own rows, of the periods asked for; unknown users
    /// absent; a user named twice (a page may hold their 90 % and 100 % warnings) is no error.
    @Test(arguments: Backend.allCases) func quotaStateIsReadForManyUsersAtOnce(_ backend: Backend) async throws {
        let db = try await TemporaryDatabase(backend)
        try await addWriter(db, id: "a")
        try await addWriter(db, zone: "Asia/Tokyo", quiet: ("22:00", "07:00"), id: "b")
        try await db.execute(
            """
            INSERT INTO notification_logs (user_id, notification_type, period_key, status, run_id, claimed_at, updated_at)
            VALUES ('a', 'content_limit_90', '2026-11', 'sent', 'r', \(db.ts(1)), \(db.ts(1))),
                   ('a', 'content_limit_100', '2026-10', 'sent', 'r', \(db.ts(1)), \(db.ts(1))),
                   ('b', 'content_limit_100', '2026', 'deferred', 'r', \(db.ts(1)), \(db.ts(1)))
            """)
        let snapshots = try await db.store.limitSnapshots(userIDs: ["a", "b", "a", "nobody"], periodsFrom: "2026-11")
        #expect(Set(snapshots.keys) == ["a", "b"])
        #expect(snapshots["a"]?.logs.keys.map { "\($0.type.rawValue) \($0.period)" } == ["content_limit_90 2026-11"])
        #expect(snapshots["b"]?.logs.isEmpty == true)
        #expect(snapshots["b"]?.timezone == "Asia/Tokyo" && snapshots["b"]?.quietHoursStart == "22:00")
        let wider = try await db.store.limitSnapshots(userIDs: ["b"], periodsFrom: "2026")
        #expect(wider["b"]?.logs.keys.map { "\($0.type.rawValue) \($0.period)" } == ["content_limit_100 2026"])
        #expect(try await db.store.limitSnapshots(userIDs: [], periodsFrom: "2026").isEmpty)
        #expect(try await db.store.limitSnapshot(userID: "a", periodsFrom: "2026-11") == snapshots["a"])
    }

    @Test(arguments: Backend.allCases) func twoConcurrentInvocationsSendOneWarning(_ backend: Backend) async throws {
        let db = try await TemporaryDatabase(backend)
        try await addWriter(db)
        let factory = SenderFactory()
        let summaries = try await withThrowingTaskGroup(of: HookSummary.self) { group in
            for _ in 0..<2 {
                let store = try await db.reopen()
                let hook = hook(db, factory, store: store)
                group.addTask {
                    try await hook.handle(
                        try ContentLimitEvent(userID: "writer", used: 27, limit: 30),
                        options: .init(now: instant("2026-11-21T12:00:00Z")))
                }
            }
            return try await group.reduce(into: []) { $0.append($1) }
        }
        #expect(summaries.filter { $0.action == .sent }.count == 1)
        #expect(await factory.sender.sent.count == 1)
        #expect(try await db.count("SELECT count(*) FROM notification_logs") == 1)
    }

    @Test(arguments: Backend.allCases) func aDryRunDecidesWithoutWriting(_ backend: Backend) async throws {
        let db = try await TemporaryDatabase(backend)
        try await addWriter(db)
        let factory = SenderFactory()
        let summary = try await hook(db, factory).handle(
            try ContentLimitEvent(userID: "writer", used: 29, limit: 30),
            options: .init(now: instant("2026-11-21T12:00:00Z"), dryRun: true, explain: true))
        #expect(summary.action == .sent)
        #expect(summary.reason == "would send")
        #expect(summary.steps.contains { $0.contains("29 of your 30") })
        #expect(factory.calls == 0)
        #expect(try await db.count("SELECT count(*) FROM notification_logs") == 0)
    }
}

/// The hook prepares its sender while it claims; the sender must still be made exactly once.
@Suite struct LazySenderTests {
    actor Counter {
        var made = 0, shutDown = 0, failures = 0
        func make() { made += 1 }
        func shut() { shutDown += 1 }
        func fail() -> Bool {
            failures += 1
            return failures == 1
        }
    }

    struct CountedSender: Sender {
        let counter: Counter
        func send(_ batch: [OutgoingNotification]) async -> [DeliveryReport] { [] }
        func beginRun(finishBy: ContinuousClock.Instant?) async {}
        func shutdown() async { await counter.shut() }
    }

    func lazy(_ counter: Counter, failFirst: Bool = false) -> LazySender {
        LazySender { () async throws(JobError) -> any Sender in
            if failFirst, await counter.fail() { throw .unavailable("first making fails") }
            try? await Task.sleep(for: .milliseconds(20))
            await counter.make()
            return CountedSender(counter: counter)
        }
    }

    @Test func concurrentFirstUsesAndAPreparationShareOneMaking() async throws {
        let counter = Counter()
        let senders = lazy(counter)
        await senders.prepare()
        try await withThrowingTaskGroup(of: Void.self) { group in
            for _ in 0..<8 { group.addTask { _ = try await senders.get() } }
            try await group.waitForAll()
        }
        await senders.prepare()  // already made: nothing new
        #expect(await counter.made == 1)
        await senders.shutdown()
        #expect(await counter.shutDown == 1)
    }

    @Test func aPreparedSenderNeverUsedIsStillShutDown() async {
        let counter = Counter()
        let senders = lazy(counter)
        await senders.prepare()
        await senders.shutdown()
        #expect(await counter.made == 1)
        #expect(await counter.shutDown == 1)
    }

    @Test func aFailedMakingIsNotKept() async throws {
        let counter = Counter()
        let senders = lazy(counter, failFirst: true)
        await senders.prepare()
        await #expect(throws: JobError.self) { _ = try await senders.get() }
        _ = try await senders.get()
        #expect(await counter.made == 1)
    }
}

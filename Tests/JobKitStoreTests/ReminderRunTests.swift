import Foundation
import GRDB
import JobKitTestSupport
import JobKitWiring
import NIOConcurrencyHelpers
import Testing

@testable import JobKit
@testable import JobKitDelivery

@Suite struct ReminderRunTests {
    func runner(_ db: TemporaryDatabase, _ sender: any Sender) -> DiaryReminderRunner {
        DiaryReminderRunner(store: db.store, sender: sender, logger: quietLogger)
    }

    @discardableResult
    func run(_ db: TemporaryDatabase, _ sender: any Sender, at now: String, dryRun: Bool = false) async throws
        -> RunSummary
    {
        try await runner(db, sender).run(ReminderRunOptions(now: instant(now), dryRun: dryRun))
    }

    /// A store whose first `record` fails for good (a database made read-only mid-run; one that may come back,
    /// locked, full or unreachable, is waited for: `answersAreRecordedOnceTheDiskHasRoomAndNothingIsSentTwice`).
    static func firstRecordFails(_ inner: any ReminderStore) -> InterceptingLedger {
        let calls = NIOLockedValueBox(0)
        return InterceptingLedger(inner: inner) { () throws(JobError) in
            if calls.withLockedValue({
                $0 += 1
                return $0
            }) == 1 {
                throw .cantCreate("recording deliveries: the database is read-only")
            }
        }
    }

    /// A sender that takes a while, so that a page is still on the wire when the one before it fails.
    struct SlowSender: Sender {
        let inner = RecordingSender()
        func canDeliver(to provider: Provider) -> Bool { true }
        func send(_ batch: [OutgoingNotification]) async -> [DeliveryReport] {
            try? await Task.sleep(for: .milliseconds(100))
            return await inner.send(batch)
        }
        func beginRun(finishBy: ContinuousClock.Instant?) async {}
        func shutdown() async {}
    }

    /// Pages overlap (two are on their way while the next is claimed). When recording a page fails, the run
    /// fails, but only after the pages already on their way have been sent and recorded: no send is left
    /// unrecorded.
    @Test(arguments: Backend.allCases) func aFailedRecordEndsTheRunOnlyAfterThePagesInFlightAreRecorded(
        _ backend: Backend
    ) async throws {
        let db = try await TemporaryDatabase(backend)
        for i in 0..<12 { try await db.store.addUser("u\(i)", time: "20:00") }
        let sender = SlowSender()
        var options = ReminderRunOptions(now: instant("2026-11-21T20:00:00Z"))
        options.pageSize = 3
        let runner = DiaryReminderRunner(
            remindersOnly: db.store, ledger: Self.firstRecordFails(db.store), sender: sender, logger: quietLogger)
        await #expect(throws: JobError.self) { try await runner.run(options) }
        // Page 1 was sent but its record failed: its claims stay `claimed` for the next run to take over. Pages
        // 2 and 3 were on the wire when that came out (page 3 was submitted as page 1 was collected); they were
        // awaited and recorded before the run returned. Page 4 was never claimed.
        #expect(await sender.inner.sent.count == 9)
        #expect(try await db.count("SELECT count(*) FROM notification_logs WHERE status = 'claimed'") == 3)
        #expect(try await db.count("SELECT count(*) FROM notification_logs WHERE status = 'sent'") == 6)
        #expect(try await db.count("SELECT count(*) FROM notification_logs") == 9)
    }

    /// A database that cannot be reached for a moment while the answers are recorded (a PostgreSQL restart) is
    /// waited for as a locked one is: the answers are recorded once it is back, and the run succeeds. It threw at
    /// once (69), with the answers unrecorded for the run that takes the claims over to send again.
    @Test func answersAreRecordedOnceAnUnreachableDatabaseIsBack() async throws {
        let db = try await TemporaryDatabase(.sqlite)
        for i in 0..<6 { try await db.store.addUser("u\(i)", time: "20:00") }
        let sender = RecordingSender()
        let attempts = NIOLockedValueBox(0)
        let ledger = InterceptingLedger(inner: db.store) { () throws(JobError) in
            let attempt = attempts.withLockedValue {
                $0 += 1
                return $0
            }
            if attempt <= 2 { throw .unavailable("recording deliveries: cannot reach PostgreSQL") }
        }
        let clock = ManualRetryClock()
        var runner = DiaryReminderRunner(remindersOnly: db.store, ledger: ledger, sender: sender, logger: quietLogger)
        runner.clock = clock
        let summary = try await runner.run(ReminderRunOptions(now: instant("2026-11-21T20:00:00Z")))
        #expect(summary.sent == 6 && summary.failure == nil)
        #expect(Array(clock.waits.prefix(2)) == [.milliseconds(100), .milliseconds(200)], "\(clock.waits)")
        #expect(try await db.count("SELECT count(*) FROM notification_deliveries WHERE outcome = 'delivered'") == 6)
        #expect(try await db.count("SELECT count(*) FROM notification_logs WHERE status = 'sent'") == 6)
    }

    /// A sender that, as its first batch is on its way, deletes the first user of the batch and the second
    /// one's device (an account closed, a device row removed by the app's backend). Pages overlap: the first
    /// batch is the one that takes the flag.
    struct DeletingSender: Sender {
        let inner = RecordingSender()
        let db: TemporaryDatabase
        let first = NIOLockedValueBox(true)
        func canDeliver(to provider: Provider) -> Bool { true }
        func send(_ batch: [OutgoingNotification]) async -> [DeliveryReport] {
            let isFirst = first.withLockedValue { flag in
                defer { flag = false }
                return flag
            }
            if isFirst, batch.count >= 2 {
                try? await db.execute("DELETE FROM users WHERE id = '\(batch[0].device.userID)'")
                try? await db.execute("DELETE FROM user_devices WHERE id = \(batch[1].device.id)")
            }
            return await inner.send(batch)
        }
    }

    /// A user or a device deleted while the run sends to it fails nothing: the run succeeds, and every other
    /// claim of the page is recorded as sent (none is left `claimed`, for a later run to send again). On SQLite
    /// the page's recording failed ("FOREIGN KEY constraint failed"): the run failed with the page unrecorded.
    @Test(arguments: Backend.allCases) func aUserDeletedWhileTheRunSendsFailsNothing(_ backend: Backend)
        async throws
    {
        let db = try await TemporaryDatabase(backend)
        for i in 0..<12 { try await db.store.addUser("u\(i)", time: "20:00") }
        let sender = DeletingSender(db: db)
        var options = ReminderRunOptions(now: instant("2026-11-21T20:00:00Z"))
        options.pageSize = 3
        let runner = DiaryReminderRunner(remindersOnly: db.store, ledger: db.store, sender: sender, logger: quietLogger)
        let summary = try await runner.run(options)
        #expect(summary.failure == nil && summary.sent == 12)
        #expect(await sender.inner.sent.count == 12)
        #expect(try await db.count("SELECT count(*) FROM notification_logs WHERE status = 'claimed'") == 0)
        #expect(try await db.count("SELECT count(*) FROM notification_logs WHERE status = 'sent'") == 11)
        #expect(try await db.count("SELECT count(*) FROM users") == 11)
        #expect(
            try await db.count("SELECT count(*) FROM notification_deliveries WHERE device_id IS NULL")
                == (backend == .sqlite ? 1 : 0))
    }

    /// A user deleted after the run read their devices and before it claimed them (an account closed while the
    /// page was being prepared) is neither claimed nor sent to, and the rest of the page is. On PostgreSQL, whose
    /// partitioned history has no foreign key to users, the claim was written for the user who was gone and the
    /// reminder went to the devices read before the delete.
    @Test(arguments: Backend.allCases) func aUserDeletedBeforeTheClaimIsNeitherClaimedNorSentTo(_ backend: Backend)
        async throws
    {
        let db = try await TemporaryDatabase(backend)
        for i in 0..<6 { try await db.store.addUser("u\(i)", time: "20:00") }
        let sender = RecordingSender()
        var ledger = InterceptingLedger(inner: db.store) { () throws(JobError) in }
        ledger.beforeClaim = { requests in
            if requests.contains(where: { $0.userID == "u2" }) {
                try? await db.execute("DELETE FROM users WHERE id = 'u2'")
            }
        }
        var options = ReminderRunOptions(now: instant("2026-11-21T20:00:00Z"))
        options.pageSize = 3
        let runner = DiaryReminderRunner(remindersOnly: db.store, ledger: ledger, sender: sender, logger: quietLogger)
        let summary = try await runner.run(options)
        #expect(summary.failure == nil && summary.sent == 5)
        #expect(await sender.users().sorted() == ["u0", "u1", "u3", "u4", "u5"])
        #expect(try await db.count("SELECT count(*) FROM notification_logs WHERE user_id = 'u2'") == 0)
        #expect(try await db.count("SELECT count(*) FROM notification_logs WHERE status = 'sent'") == 5)
    }

    /// A sender that waits up to a minute per batch, unless its task is cancelled; says whether it was.
    actor WaitingSender: Sender {
        private(set) var cancelled = 0
        private(set) var batches = 0
        nonisolated func canDeliver(to provider: Provider) -> Bool { true }
        func send(_ batch: [OutgoingNotification]) async -> [DeliveryReport] {
            batches += 1
            try? await Task.sleep(for: .seconds(60))
            if Task.isCancelled { cancelled += 1 }
            return batch.map { _ in DeliveryReport(channel: .apns, outcome: .retryLater, reason: "cancelled") }
        }
    }

    /// Pages are delivered as child tasks of the run: cancelling the run reaches every page on its way (as it
    /// did not when each page was an unstructured `Task`, which went on for its minute).
    @Test func cancellingARunCancelsThePagesOnTheirWay() async throws {
        let db = try await TemporaryDatabase(.sqlite)
        for i in 0..<6 { try await db.store.addUser("u\(i)", time: "20:00") }
        let sender = WaitingSender()
        var options = ReminderRunOptions(now: instant("2026-11-21T20:00:00Z"))
        options.pageSize = 2
        let runner = runner(db, sender)
        let started = ContinuousClock.now
        let run = Task { try await runner.run(options) }
        // Both pages the pipeline keeps in delivery are waiting in the sender.
        while await sender.batches < 2, ContinuousClock.now - started < .seconds(30) {
            try await Task.sleep(for: .milliseconds(10))
        }
        run.cancel()
        _ = await run.result
        #expect(await sender.batches >= 2)
        #expect(await sender.cancelled == sender.batches)
        #expect(ContinuousClock.now - started < .seconds(30))
    }

    @Test(arguments: Backend.allCases) func runsEitherSideOfTheSlotRemindExactlyOnce(_ backend: Backend) async throws {
        let db = try await TemporaryDatabase(backend)
        let sender = RecordingSender()
        try await db.store.addUser("u20", time: "20:00")
        let early = try await run(db, sender, at: "2026-11-21T19:59:58Z")
        let late = try await run(db, sender, at: "2026-11-21T20:00:07Z")
        #expect(early.sent == 1)
        #expect(late.sent == 0)
        #expect(late.skipped == [.alreadyReminded: 1])
        #expect(await sender.users() == ["u20"])
        #expect(
            try await db.count(
                "SELECT count(*) FROM notification_logs WHERE status = 'sent' AND period_key = '2026-11-21'") == 1)
    }

    @Test(arguments: Backend.allCases) func skippedRunsAreMadeUpByTheNextOne(_ backend: Backend) async throws {
        let db = try await TemporaryDatabase(backend)
        let sender = RecordingSender()
        try await db.store.addUser("u20", time: "20:00")
        // The 20:00 and 20:15 runs never happened.
        let summary = try await run(db, sender, at: "2026-11-21T20:30:00Z")
        #expect(summary.sent == 1)
        #expect(await sender.sent.map(\.period) == ["2026-11-21"])
    }

    @Test(arguments: Backend.allCases) func aLateReminderAfterMidnightBelongsToThePreviousDay(_ backend: Backend)
        async throws
    {
        let db = try await TemporaryDatabase(backend)
        let sender = RecordingSender()
        try await db.store.addUser("night", time: "23:50")
        try await run(db, sender, at: "2026-11-22T00:20:00Z")
        #expect(try await db.strings("SELECT period_key FROM notification_logs") == ["2026-11-21"])
        // The same user tonight is reminded again: that is the next day's period.
        try await run(db, sender, at: "2026-11-22T23:50:00Z")
        #expect(
            try await db.strings("SELECT period_key FROM notification_logs ORDER BY period_key") == [
                "2026-11-21", "2026-11-22",
            ])
    }

    @Test(arguments: Backend.allCases) func pagesMixZonesAndEachUserKeepsTheirOwnLocalDate(_ backend: Backend)
        async throws
    {
        let db = try await TemporaryDatabase(backend)
        // At 10:00 UTC it is midnight of the 22nd in Kiritimati (UTC+14) and 10:00 on the 21st in London.
        for i in 0..<6 {
            try await db.store.addUser(
                "u\(i)", zone: i % 2 == 0 ? "Pacific/Kiritimati" : "Europe/London",
                time: i % 2 == 0 ? "00:00" : "10:00")
        }
        let sender = RecordingSender()
        var options = ReminderRunOptions(now: instant("2026-11-21T10:00:00Z"))
        options.pageSize = 4  // pages hold users of both zones
        let summary = try await runner(db, sender).run(options)
        #expect(summary.sent == 6)
        #expect(
            try await db.strings("SELECT user_id || ' ' || period_key FROM notification_logs ORDER BY user_id") == [
                "u0 2026-11-22", "u1 2026-11-21", "u2 2026-11-22", "u3 2026-11-21", "u4 2026-11-22", "u5 2026-11-21",
            ])
        // Each notification expires at the end of its user's local day.
        for notification in await sender.sent {
            let kiritimati = ["u0", "u2", "u4"].contains(notification.device.userID)
            #expect(notification.expiresAt == instant(kiritimati ? "2026-11-22T10:00:00Z" : "2026-11-22T00:00:00Z"))
            #expect(notification.period == (kiritimati ? "2026-11-22" : "2026-11-21"))
        }
    }

    @Test(arguments: Backend.allCases) func aPageReadsTheSettingsAgain(_ backend: Backend) async throws {
        let db = try await TemporaryDatabase(backend)
        for user in ["a", "b", "c", "d"] { try await db.store.addUser(user) }
        let queries = [
            DueQuery(
                zone: "UTC", period: "2026-11-21", minutes: 1_200...1_200,
                day: instant("2026-11-21T00:00:00Z")..<instant("2026-11-22T00:00:00Z"), type: .diaryReminder)
        ]
        let keys = try await db.store.dueKeys(queries)
        #expect(keys == ["a", "b", "c", "d"].map { DueKey(userID: $0, query: 0) })
        // Between reading the due set and reading a page, b turns reminders off, c moves the time, d moves away.
        try await db.execute("UPDATE notification_settings SET diary_reminder_enabled = false WHERE user_id = 'b'")
        try await db.execute("UPDATE notification_settings SET reminder_time = '21:00' WHERE user_id = 'c'")
        try await db.execute("UPDATE users SET timezone = 'Asia/Tokyo' WHERE id = 'd'")
        #expect(try await db.store.dueCandidates(keys, of: queries).map(\.userID) == ["a"])
    }

    @Test(arguments: Backend.allCases) func everySkipReasonIsCountedAndNothingCrashes(_ backend: Backend) async throws {
        let db = try await TemporaryDatabase(backend)
        let sender = RecordingSender()
        let now = instant("2026-11-21T20:00:00Z")
        try await db.store.addUser("due")
        try await db.store.addUser("wrote")
        try await db.store.recordEntry(userID: "wrote", at: instant("2026-11-21T08:00:00Z"))
        try await db.store.addUser("wrote-yesterday")
        try await db.store.recordEntry(userID: "wrote-yesterday", at: instant("2026-11-20T23:59:59Z"))
        try await db.store.addUser("reminded")
        try await run(db, RecordingSender(), at: "2026-11-21T20:00:00Z")  // reminds due, reminded, wrote-yesterday
        try await db.store.addUser("disabled", enabled: false)
        try await db.store.addUser("no-device", tokens: [])
        try await db.store.addUser("logged-out", tokens: ["bye"])
        try await db.store.unregister(token: "bye", reason: "logout", now: now)
        try await db.store.addUser("bad-zone", zone: "Mars/Olympus_Mons")
        try await db.store.addUser("bad-time", time: "9pm")
        try await db.store.addUser("not-yet", time: "21:00")
        let summary = try await run(db, sender, at: "2026-11-21T20:00:00Z")
        #expect(
            summary.skipped == [
                .alreadyReminded: 3, .wroteToday: 1, .noActiveDevice: 2,
                .invalidTimezone: 1, .invalidReminderTime: 1,
            ])
        #expect(summary.candidates == 8)
        #expect(summary.due == 0)
        #expect(await sender.sent.isEmpty)
    }

    @Test(arguments: Backend.allCases) func daylightSavingDaysRemindExactlyOnceAtTheRightRun(_ backend: Backend)
        async throws
    {
        let db = try await TemporaryDatabase(backend)
        let sender = RecordingSender()
        try await db.store.addUser("spring", zone: "America/New_York", time: "02:30")
        try await db.store.addUser("fall", zone: "America/New_York", time: "01:30")
        var sendsAt: [String: [Int64]] = [:]
        for day in ["2026-03-08", "2026-11-01"] {
            let start = instant("\(day)T00:00:00Z")
            for now in stride(from: start, to: start + 86_400, by: 900) {
                let before = await sender.sent.count
                _ = try await runner(db, sender).run(ReminderRunOptions(now: now))
                for notification in await sender.sent[before...] {
                    sendsAt[notification.device.userID, default: []].append(now)
                }
            }
        }
        #expect(sendsAt["spring"]?.contains(instant("2026-03-08T07:00:00Z")) == true)  // 03:00 EDT
        #expect(sendsAt["fall"]?.contains(instant("2026-11-01T05:30:00Z")) == true)  // the first 01:30
        // Exactly once per day (the other day has its own reminder at the usual time).
        #expect(
            sendsAt["spring"]?.filter { $0 >= instant("2026-03-08T04:00:00Z") && $0 < instant("2026-03-09T04:00:00Z") }
                .count == 1)
        #expect(
            sendsAt["fall"]?.filter { $0 >= instant("2026-11-01T04:00:00Z") && $0 < instant("2026-11-02T05:00:00Z") }
                .count == 1)
    }

    @Test(arguments: Backend.allCases) func everyKindOfOffsetEndToEnd(_ backend: Backend) async throws {
        let db = try await TemporaryDatabase(backend)
        let sender = RecordingSender()
        let zones = [
            "Asia/Kathmandu": "2026-11-21T14:15:00Z", "Pacific/Chatham": "2026-11-21T06:15:00Z",
            "Pacific/Marquesas": "2026-11-22T05:30:00Z", "Pacific/Kiritimati": "2026-11-21T06:00:00Z",
            "America/St_Johns": "2026-11-21T23:30:00Z",
        ]
        for name in zones.keys { try await db.store.addUser(name, zone: name, time: "20:00") }
        var firstSend: [String: Int64] = [:]
        let start = instant("2026-11-20T12:00:00Z")
        for now in stride(from: start, to: start + 2 * 86_400, by: 900) {
            let before = await sender.sent.count
            _ = try await runner(db, sender).run(ReminderRunOptions(now: now))
            for notification in await sender.sent[before...] where notification.period == "2026-11-21" {
                #expect(firstSend[notification.device.userID] == nil, "sent twice to \(notification.device.userID)")
                firstSend[notification.device.userID] = now
            }
        }
        for (name, expected) in zones {
            #expect(firstSend[name] == instant(expected), "\(name)")
        }
    }

    @Test(arguments: Backend.allCases) func aDryRunWritesNothingAndPrintsWhatItWouldSend(_ backend: Backend)
        async throws
    {
        let db = try await TemporaryDatabase(backend)
        try await db.store.addUser("alice", locale: "ja", tokens: ["a-phone", "a-tablet"])
        let bytes = try await db.contentDigest()
        let lines = LineBuffer()
        let readOnly = try await db.reopen(.readOnly)
        let summary = try await DiaryReminderRunner(
            store: readOnly, sender: DryRunSender(sink: lines, json: false),
            logger: quietLogger
        )
        .run(ReminderRunOptions(now: instant("2026-11-21T20:00:00Z"), dryRun: true))
        #expect(summary.claimed == 1)
        #expect(summary.notifications == 2)
        #expect(lines.lines.count == 2)
        #expect(
            lines.lines.allSatisfy { $0.contains("user=alice") && $0.contains("locale=ja") && !$0.contains("a-phone") })
        #expect(try await db.count("SELECT count(*) FROM notification_logs") == 0)
        #expect(try await db.count("SELECT count(*) FROM job_runs") == 0)
        #expect(try await db.contentDigest() == bytes)
        // Nothing was delivered: the line said `outcomes[delivered=2]`, the dry-run channel's count of what it
        // printed, which `notifications=2` already says.
        #expect(summary.text.contains("would_send=1 notifications=2 skipped[]"), "\(summary.text)")
        #expect(!summary.text.contains("delivered"), "\(summary.text)")
        // And the JSON said `"outcomes":{"delivered":2}`, `"outcomes_by_provider":{"dry-run":{"delivered":2}}`.
        #expect(summary.json.contains(#""outcomes":{},"outcomes_by_provider":{}"#), "\(summary.json)")
        #expect(!summary.json.contains("delivered"), "\(summary.json)")
    }

    @Test(arguments: Backend.allCases) func consecutiveDaysNeverRepeatTheMessage(_ backend: Backend) async throws {
        let db = try await TemporaryDatabase(backend)
        let sender = RecordingSender()
        for i in 0..<20 { try await db.store.addUser("user\(i)", locale: ["en", "ja", "pt-BR", "pt_PT", "xx"][i % 5]) }
        let start = instant("2026-11-01T20:00:00Z")
        for day in 0..<10 {
            _ = try await runner(db, sender).run(ReminderRunOptions(now: start + Int64(day) * 86_400))
        }
        let sent = await sender.sent
        #expect(sent.count == 200)
        let byUser = Dictionary(grouping: sent, by: \.device.userID)
        for (user, notifications) in byUser {
            let ordered = notifications.sorted { $0.period < $1.period }
            for (yesterday, today) in zip(ordered, ordered.dropFirst()) {
                #expect(yesterday.messageIndex != today.messageIndex, "\(user) got message \(today.messageIndex) twice")
            }
        }
        #expect(Set(sent.filter { $0.device.userID == "user2" }.map(\.locale)) == ["pt-BR"])
        #expect(Set(sent.filter { $0.device.userID == "user3" }.map(\.locale)) == ["pt"])
        #expect(Set(sent.filter { $0.device.userID == "user4" }.map(\.locale)) == ["en"])
        #expect(
            sent.filter { $0.device.userID == "user1" }.allSatisfy {
                $0.title.unicodeScalars.contains { $0.value > 0x3000 }
            })
    }

    /// The words not to repeat are those of the user's latest reminder of the 7 days before today: a reminder 3
    /// days ago counts, one 8 days ago does not (the look-up stays in one or two of PostgreSQL's monthly log
    /// partitions).
    @Test(arguments: Backend.allCases) func thePreviousReminderIsTheLatestOfTheLastSevenDays(_ backend: Backend)
        async throws
    {
        let db = try await TemporaryDatabase(backend)
        let today = "2026-11-21"
        #expect(DueQuery.previousPeriods(before: today) == "2026-11-14"..<today)
        let unbiased = { (user: String) in
            CopyCatalog.builtIn.choose(.diaryReminder, locale: "en", userID: user, period: today, previousIndex: nil)
                .index
        }
        for (user, period) in [("recent", "2026-11-18"), ("old", "2026-11-13")] {
            try await db.store.addUser(user)
            try await db.execute(
                """
                INSERT INTO notification_logs
                    (user_id, notification_type, period_key, status, message_index, locale, run_id, claimed_at, updated_at)
                VALUES ('\(user)', 'diary_reminder', '\(period)', 'sent', \(unbiased(user)), 'en', 'r', \(db.ts(0)), \(db.ts(0)))
                """)
        }
        let sender = RecordingSender()
        try await run(db, sender, at: "\(today)T20:00:00Z")
        let sent = Dictionary(uniqueKeysWithValues: await sender.sent.map { ($0.device.userID, $0.messageIndex) })
        #expect(sent["recent"] != unbiased("recent"))
        #expect(sent["old"] == unbiased("old"))
    }

    /// What a due candidate's page reads of the log, on both stores: today's row when there is one, and the words
    /// of the latest earlier row that has words, within the 7 days before (a row without words is passed over).
    @Test(arguments: Backend.allCases) func aCandidateCarriesTodaysRowAndThePreviousWords(_ backend: Backend)
        async throws
    {
        let db = try await TemporaryDatabase(backend)
        let rows: [(user: String, period: String, status: String, index: Int?)] = [
            ("usual", "2026-11-20", "sent", 2),
            ("retry", "2026-11-19", "sent", 3), ("retry", "2026-11-21", "retry", 1),
            ("wordless", "2026-11-18", "sent", 4), ("wordless", "2026-11-20", "failed", nil),
            ("old", "2026-11-13", "sent", 1),
        ]
        for user in ["fresh", "old", "retry", "usual", "wordless"] { try await db.store.addUser(user) }
        for row in rows {
            try await db.execute(
                """
                INSERT INTO notification_logs
                    (user_id, notification_type, period_key, status, message_index, locale, run_id, claimed_at, updated_at)
                VALUES ('\(row.user)', 'diary_reminder', '\(row.period)', '\(row.status)',
                        \(row.index.map(String.init) ?? "NULL"), 'en', 'r', \(db.ts(0)), \(db.ts(0)))
                """)
        }
        let queries = [
            DueQuery(
                zone: "UTC", period: "2026-11-21", minutes: 1_200...1_214,
                day: instant("2026-11-21T00:00:00Z")..<instant("2026-11-22T00:00:00Z"), type: .diaryReminder)
        ]
        let keys = try await db.store.dueKeys(queries)
        let candidates = try await db.store.dueCandidates(keys, of: queries)
        #expect(candidates.map(\.userID) == ["fresh", "old", "retry", "usual", "wordless"])
        let previous = Dictionary(uniqueKeysWithValues: candidates.map { ($0.userID, $0.previousMessageIndex) })
        #expect(previous == ["fresh": nil, "old": nil, "retry": 3, "usual": 2, "wordless": 4])
        let today = candidates.compactMap { c in c.log.map { (c.userID, $0.status, $0.messageIndex) } }
        #expect(today.count == 1)
        #expect(today.first?.0 == "retry" && today.first?.1 == .retry && today.first?.2 == 1)
    }

    @Test(arguments: Backend.allCases) func aDeadRunsClaimIsTakenOverAndOnlyUndeliveredDevicesAreSent(
        _ backend: Backend
    ) async throws {
        let db = try await TemporaryDatabase(backend)
        try await db.store.addUser("crashed", tokens: ["phone", "tablet"])
        try await db.store.addUser("busy")
        let now = instant("2026-11-21T20:15:00Z")
        // A run at 20:00 claimed both, delivered to crashed's phone, then died. Another run is still
        // working on busy (claimed a minute ago).
        let devices = try await db.store.activeDevices(userIDs: ["crashed"])
        let phone = try #require(devices["crashed"]?.first { $0.token == "phone" })
        try await db.execute(
            """
            INSERT INTO notification_logs (user_id, notification_type, period_key, status, message_index, locale, run_id, claimed_at, updated_at)
            VALUES ('crashed', 'diary_reminder', '2026-11-21', 'claimed', 1, 'en', 'dead-run', \(db.ts(now - 900)), \(db.ts(now - 900))),
                   ('busy', 'diary_reminder', '2026-11-21', 'claimed', 0, 'en', 'live-run', \(db.ts(now - 60)), \(db.ts(now - 60)))
            """)
        try await db.execute(
            """
            INSERT INTO notification_deliveries (log_id, device_id, provider, outcome, run_id, created_at)
            SELECT id, \(phone.id), 'fcm', 'delivered', 'dead-run', \(db.ts(now - 899)) FROM notification_logs WHERE user_id = 'crashed'
            """)
        let sender = RecordingSender()
        let summary = try await runner(db, sender).run(ReminderRunOptions(now: now))
        #expect(summary.takenOver == 1)
        #expect(summary.skipped == [.claimInProgress: 1])
        let sent = await sender.sent
        #expect(sent.map(\.device.token) == ["tablet"])
        #expect(sent.first?.messageIndex == 1)  // the words the first run chose
        #expect(
            try await db.strings("SELECT status || ' ' || attempts FROM notification_logs ORDER BY id") == [
                "sent 2", "claimed 1",
            ])
    }

    @Test(arguments: Backend.allCases) func transientFailuresAreRetriedByTheNextRunAndDeliveredOnesAreDone(
        _ backend: Backend
    ) async throws {
        let db = try await TemporaryDatabase(backend)
        try await db.store.addUser("unlucky", tokens: ["flaky-1"])
        try await db.store.addUser("half", tokens: ["ok-1", "flaky-2"])
        try await db.store.addUser("gone", tokens: ["dead-1"])
        let sender = RecordingSender()
        let first = try await run(db, sender, at: "2026-11-21T20:00:00Z")
        // half reached one device and not the other: not final, its pending device is retried.
        #expect(first.retry == 2)
        #expect(first.partial == 0)
        #expect(first.failed == 1)
        #expect(first.devicesPendingRetry == 2)
        #expect(
            try await db.count(
                "SELECT count(*) FROM user_devices WHERE token = 'dead-1' AND NOT is_active AND deactivation_reason = 'Unregistered'"
            ) == 1)
        let second = try await run(db, sender, at: "2026-11-21T20:15:00Z")
        #expect(second.takenOver == 2)
        // gone's only device was deactivated.
        #expect(second.skipped == [.noActiveDevice: 1])
        #expect(await sender.sent.filter { $0.device.userID == "unlucky" }.count == 2)
        // half's reached device is never sent to again; only the pending one is.
        #expect(
            await sender.sent.filter { $0.device.userID == "half" }.map(\.device.token) == [
                "ok-1", "flaky-2", "flaky-2",
            ])
        // Past the catch-up window nothing more is tried.
        let late = try await run(db, sender, at: "2026-11-21T21:00:00Z")
        #expect(late.candidates == 0)
        #expect(try await db.count("SELECT count(*) FROM notification_deliveries") == 6)
    }

    @Test(arguments: Backend.allCases) func twoRunnersOnOneFileClaimEachUserOnce(_ backend: Backend) async throws {
        let db = try await TemporaryDatabase(backend)
        let report = try await Seeder().seed(
            {
                var options = SeedOptions(users: 3_000, now: instant("2026-11-21T20:00:00Z"))
                options.dueAt = instant("2026-11-21T20:00:00Z")
                options.dueCount = 1_500
                return options
            }(), into: db.store)
        #expect(report.due == 1_500)
        let senders = [RecordingSender(), RecordingSender()]
        let summaries = try await withThrowingTaskGroup(of: RunSummary.self) { group in
            for sender in senders {
                let store = try await db.reopen()
                group.addTask {
                    var options = ReminderRunOptions(now: instant("2026-11-21T20:00:00Z"))
                    options.pageSize = 100
                    return try await DiaryReminderRunner(store: store, sender: sender, logger: quietLogger).run(options)
                }
            }
            return try await group.reduce(into: []) { $0.append($1) }
        }
        #expect(summaries.map(\.claimed).reduce(0, +) == 1_500)
        let users = await senders[0].users() + senders[1].users()
        #expect(Set(users).count == 1_500)
        #expect(try await db.count("SELECT count(*) FROM notification_logs") == 1_500)
        #expect(try await db.count("SELECT count(*) FROM notification_deliveries") == users.count)
    }

    @Test(arguments: Backend.allCases) func explainShowsEachRuleAndTheVerdict(_ backend: Backend) async throws {
        let db = try await TemporaryDatabase(backend)
        try await db.store.addUser("tokyo", zone: "Asia/Tokyo", time: "21:00", locale: "ja")
        try await db.store.addUser("off", enabled: false)
        let runner = runner(db, RecordingSender())
        let due = try await runner.explain(
            userID: "tokyo", options: ReminderRunOptions(now: instant("2026-11-21T12:05:00Z")))
        #expect(due.due)
        #expect(due.steps.contains { $0.rule.contains("period key") && $0.value == "2026-11-21" })
        // The rules in the the rules' documented order (docs/JOBS.md): "4. period key" stood between rule 2 and rule 3.
        let numbers = due.steps.compactMap { $0.rule.first?.wholeNumberValue }
        #expect(numbers == numbers.sorted(), "\(due.steps.map(\.rule))")
        let notYet = try await runner.explain(
            userID: "tokyo", options: ReminderRunOptions(now: instant("2026-11-21T11:00:00Z")))
        #expect(notYet.skipReason == .notDue)
        #expect(notYet.text.contains("not yet"))
        let off = try await runner.explain(
            userID: "off", options: ReminderRunOptions(now: instant("2026-11-21T20:00:00Z")))
        #expect(off.skipReason == .disabled)
        // The copy step says when the words are the fallback's because the catalog has none in the user's
        // language: it said `locale pl_PL → en #3`, as for an English reader.
        let words = due.steps.first { $0.rule == "copy" }?.value ?? ""
        #expect(words.hasPrefix("locale ja → ja #"), "\(words)")
        try await db.store.addUser("warsaw", zone: "Europe/Warsaw", time: "13:00", locale: "pl_PL")
        let polish = try await runner.explain(
            userID: "warsaw", options: ReminderRunOptions(now: instant("2026-11-21T12:05:00Z")))
        let fallback = polish.steps.first { $0.rule == "copy" }?.value ?? ""
        #expect(fallback.hasPrefix("locale pl_PL → en (the catalog has no pl words) #"), "\(fallback)")
        await #expect(throws: JobError.dataError("unknown user ghost")) {
            try await runner.explain(userID: "ghost", options: ReminderRunOptions(now: 0))
        }
    }

    @Test(arguments: Backend.allCases) func eachRunIsRecordedInJobRuns(_ backend: Backend) async throws {
        let db = try await TemporaryDatabase(backend)
        try await db.store.addUser("alice")
        let summary = try await run(db, RecordingSender(), at: "2026-11-21T20:00:00Z")
        #expect(
            try await db.strings("SELECT job || ' ' || outcome || ' ' || \(db.epoch("run_at")) FROM job_runs") == [
                "diary-reminder ok \(instant("2026-11-21T20:00:00Z"))"
            ])
        // The stored summary is the run's JSON (PostgreSQL's jsonb keeps the content, not the spelling).
        let stored = try await db.strings("SELECT summary\(backend == .postgres ? "::text" : "") FROM job_runs")
        func object(_ json: String) throws -> NSDictionary? {
            try JSONSerialization.jsonObject(with: Data(json.utf8)) as? NSDictionary
        }
        #expect(stored.count == 1)
        #expect(try object(stored[0]) == object(summary.json))
    }

    /// A sender that holds every batch until it is opened: a run caught mid-send, as a SIGKILL would leave it.
    actor GateSender: Sender {
        private(set) var waiting = 0
        private var open = false
        nonisolated func canDeliver(to provider: Provider) -> Bool { true }
        func send(_ batch: [OutgoingNotification]) async -> [DeliveryReport] {
            waiting += 1
            while !open { try? await Task.sleep(for: .milliseconds(10)) }
            return batch.map { _ in DeliveryReport(channel: .apns, outcome: .delivered) }
        }
        func release() { open = true }
    }

    /// A run killed outright (SIGKILL, out of memory, the host going down) left no `job_runs` row, so the health
    /// report's last run was the one before, `ok`, as if this one had not happened. A run now journals itself
    /// `running` before it claims anything, and its end replaces that row: a run that never ends leaves it.
    @Test(arguments: Backend.allCases) func aRunIsJournaledRunningFromItsStart(_ backend: Backend) async throws {
        let db = try await TemporaryDatabase(backend)
        try await db.store.addUser("alice")
        try await run(db, RecordingSender(), at: "2026-11-21T20:00:00Z")
        let sender = GateSender()
        let runner = runner(db, sender)
        let running = Task { try await runner.run(ReminderRunOptions(now: instant("2026-11-22T20:00:00Z"))) }
        let started = ContinuousClock.now
        while await sender.waiting == 0, ContinuousClock.now - started < .seconds(30) {
            try await Task.sleep(for: .milliseconds(10))
        }
        let outcomes = "SELECT outcome || ' ' || \(db.epoch("run_at")) FROM job_runs ORDER BY run_at"
        #expect(
            try await db.strings(outcomes) == [
                "ok \(instant("2026-11-21T20:00:00Z"))", "running \(instant("2026-11-22T20:00:00Z"))",
            ])
        // What a run killed here leaves is what the report shows.
        let report = try await db.store.healthReport(
            from: instant("2026-11-20T00:00:00Z"), to: instant("2026-11-23T00:00:00Z"))
        #expect(report.lastRuns.map(\.outcome) == ["running"])
        #expect(
            report.text.contains(
                "  diary-reminder: 2026-11-22T20:00:00Z running (no end recorded: still going, or killed)\n"),
            "\(report.text)")
        #expect(report.runsInWindow.map(\.unfinished) == [1])
        #expect(report.runsInWindow.map(\.lastUnfinishedAt) == ["2026-11-22T20:00:00Z"])
        await sender.release()
        let summary = try await running.value
        #expect(summary.sent == 1)
        #expect(
            try await db.strings(outcomes) == [
                "ok \(instant("2026-11-21T20:00:00Z"))", "ok \(instant("2026-11-22T20:00:00Z"))",
            ])
    }

    /// A run killed outright left its `running` row, and only the health report, read by someone, ever told of
    /// it: the runs after it went well, exited 0, and no log line or metric said that one had died. A run now ends
    /// as `failed` every earlier run of its job that recorded no end within the claims' lease (a run records its
    /// last answer before then, so such a run is dead or lost), says so in an error line, and counts them. A run
    /// still inside its lease, and another job's run, are left as they are; a run closed once is not counted again.
    @Test(arguments: Backend.allCases) func aRunEndsEarlierRunsThatRecordedNoEndAsFailed(_ backend: Backend)
        async throws
    {
        let db = try await TemporaryDatabase(backend)
        try await db.store.addUser("alice")
        let now = instant("2026-11-22T20:00:00Z")
        for (id, job, runAt) in [
            ("killed", DiaryReminderRunner.jobName, now - 900), ("going", DiaryReminderRunner.jobName, now - 300),
            ("janitor", TokenJanitor.jobName, now - 6 * 3600),
        ] {
            try await db.store.recordRun(
                id: id, job: job, runAt: runAt, durationMs: nil, outcome: .running, summaryJSON: #"{"job":"\#(job)"}"#)
        }
        let logs = CapturedLogs()
        let runner = DiaryReminderRunner(store: db.store, sender: RecordingSender(), logger: logs.logger)
        let summary = try await runner.run(ReminderRunOptions(now: now))
        #expect(summary.sent == 1)
        #expect(summary.earlierRunsWithoutEnd == 1)
        #expect(summary.text.contains(" earlier_runs_without_end=1 "), "\(summary.text)")
        #expect(summary.json.contains(#""earlier_runs_without_end":1"#), "\(summary.json)")
        let killedLine = logs.lines.filter { $0.contains("an earlier run recorded no end") }
        #expect(killedLine.count == 1, "\(logs.lines)")
        #expect(killedLine.first?.hasPrefix("error ") == true, "\(killedLine)")
        #expect(killedLine.first?.contains("killed") == true, "\(killedLine)")
        #expect(killedLine.first?.contains("2026-11-22T19:45:00Z") == true, "\(killedLine)")
        let outcomes =
            "SELECT id || ' ' || outcome FROM job_runs WHERE id IN ('killed', 'going', 'janitor') ORDER BY id"
        #expect(try await db.strings(outcomes) == ["going running", "janitor running", "killed failed"])

        let report = try await db.store.healthReport(from: now - 86400, to: now + 60)
        let reminder = try #require(report.runsInWindow.first { $0.job == DiaryReminderRunner.jobName })
        #expect(reminder.failed == 1 && reminder.unfinished == 1, "\(report.text)")
        #expect(reminder.lastFailedAt == "2026-11-22T19:45:00Z", "\(report.text)")
        #expect(reminder.lastError?.contains("no end recorded within the claims' lease") == true, "\(report.text)")

        let next = try await DiaryReminderRunner(store: db.store, sender: RecordingSender(), logger: logs.logger)
            .run(ReminderRunOptions(now: now + 900))
        #expect(next.earlierRunsWithoutEnd == 1, "the run 5 minutes old then is 20 minutes old now")
        #expect(try await db.strings(outcomes) == ["going failed", "janitor running", "killed failed"])
        #expect(try await db.strings("SELECT outcome FROM job_runs WHERE id = '\(summary.runID)'") == ["ok"])
        #expect(logs.lines.filter { $0.contains("an earlier run recorded no end") }.count == 2)
    }

    /// A run that left due work undone (devices left to a provider that refused our credentials: exit 77; the
    /// run's time ran out before it claimed every due user: exit 75) was recorded `ok` in `job_runs`, so the
    /// health report's "last run of each job" said `ok` for a run that exited with an error.
    @Test(arguments: Backend.allCases) func aRunThatLeavesDueWorkIsRecordedFailed(_ backend: Backend) async throws {
        struct RefusingSender: Sender {
            func send(_ batch: [OutgoingNotification]) async -> [DeliveryReport] {
                batch.map { _ in DeliveryReport(channel: .apns, outcome: .credentials, reason: "InvalidProviderToken") }
            }
        }
        let db = try await TemporaryDatabase(backend)
        try await db.store.addUser("alice")
        let refused = try await run(db, RefusingSender(), at: "2026-11-21T20:00:00Z")
        #expect(refused.failure?.exitCode == 77)
        var options = ReminderRunOptions(now: instant("2026-11-22T20:00:00Z"))
        options.stopClaimingAt = ContinuousClock.now
        let stopped = try await runner(db, RecordingSender()).run(options)
        #expect(stopped.failure?.exitCode == 75)
        #expect(
            try await db.strings("SELECT outcome || ' ' || \(db.epoch("run_at")) FROM job_runs ORDER BY run_at") == [
                "failed \(instant("2026-11-21T20:00:00Z"))", "failed \(instant("2026-11-22T20:00:00Z"))",
            ])
        let report = try await db.store.healthReport(
            from: instant("2026-11-20T00:00:00Z"), to: instant("2026-11-23T00:00:00Z"))
        #expect(report.lastRuns.map(\.outcome) == ["failed"])
        // Each failed run says why, as its exit code does: the report showed `failed` and nothing more.
        #expect(refused.error == refused.failure?.message && refused.error?.hasPrefix("due work left") == true)
        #expect(
            report.lastRuns.map(\.error) == [
                "the run's time ran out before every due user was claimed (stopped_early): the next run reminds the rest"
            ])
        #expect(report.runsInWindow.map(\.lastError) == [report.lastRuns.first?.error])
    }

    /// A run that ended with an error (here: recording a page's answers failed for good) recorded nothing in
    /// `job_runs`, so the health report's last run was the run before, `ok`, as if this one had not happened.
    /// It is now recorded `failed`, with its error and the counts of what it did before it.
    @Test(arguments: Backend.allCases) func aRunThatEndsWithAnErrorIsRecordedFailedWithTheError(_ backend: Backend)
        async throws
    {
        let db = try await TemporaryDatabase(backend)
        for i in 0..<6 { try await db.store.addUser("u\(i)", time: "20:00") }
        try await run(db, RecordingSender(), at: "2026-11-21T20:00:00Z")
        var options = ReminderRunOptions(now: instant("2026-11-22T20:00:00Z"))
        options.pageSize = 3
        let runner = DiaryReminderRunner(
            remindersOnly: db.store, ledger: Self.firstRecordFails(db.store), sender: RecordingSender(),
            logger: quietLogger)
        await #expect(throws: JobError.cantCreate("recording deliveries: the database is read-only")) {
            try await runner.run(options)
        }
        #expect(
            try await db.strings("SELECT outcome || ' ' || \(db.epoch("run_at")) FROM job_runs ORDER BY run_at") == [
                "ok \(instant("2026-11-21T20:00:00Z"))", "failed \(instant("2026-11-22T20:00:00Z"))",
            ])
        let stored = try await db.strings(
            "SELECT summary\(backend == .postgres ? "::text" : "") FROM job_runs WHERE outcome = 'failed'")
        let summary = try JSONSerialization.jsonObject(with: Data(stored.joined().utf8)) as? [String: Any]
        #expect(summary?["error"] as? String == "recording deliveries: the database is read-only")
        #expect(summary?["run_id"] as? String == options.runID)
        #expect(summary?["claimed"] as? Int == 6, "\(stored)")
        // The health report names the error beside the run.
        let report = try await db.store.healthReport(
            from: instant("2026-11-20T00:00:00Z"), to: instant("2026-11-23T00:00:00Z"))
        #expect(report.lastRuns.map(\.outcome) == ["failed"])
        #expect(report.lastRuns.map(\.error) == ["recording deliveries: the database is read-only"])
        let line = report.text.split(separator: "\n").map { $0.drop { $0 == " " } }
            .first { $0.hasPrefix("diary-reminder: ") }
        #expect(line?.hasPrefix("diary-reminder: 2026-11-22T20:00:00Z failed ") == true, "\(report.text)")
        #expect(line?.hasSuffix(" ms: recording deliveries: the database is read-only") == true, "\(report.text)")
        // A dry run records nothing, even when it fails (here: its store was closed; its ledger would take it).
        let closed = try await db.reopen(.readOnly)
        await closed.close()
        let dryRunner = DiaryReminderRunner(
            remindersOnly: closed, ledger: db.store, sender: RecordingSender(), logger: quietLogger)
        await #expect(throws: JobError.self) {
            try await dryRunner.run(ReminderRunOptions(now: instant("2026-11-23T20:00:00Z"), dryRun: true))
        }
        #expect(try await db.count("SELECT count(*) FROM job_runs") == 2)
    }
}

@Suite struct ShardTests {
    @Test func shardsPartitionEveryUserExactlyOnce() throws {
        let users = (0..<10_000).map { "user-\($0)" }
        for count in [1, 2, 3, 7] {
            let shards = (1...count).map { Shard(index: $0, count: count) }
            let sizes = shards.map { shard in users.filter { shard.contains(userID: $0) }.count }
            #expect(sizes.reduce(0, +) == users.count)
            #expect(users.allSatisfy { user in shards.filter { $0.contains(userID: user) }.count == 1 })
            // Roughly even: within 10 % of the mean.
            #expect(sizes.allSatisfy { abs($0 - users.count / count) < users.count / count / 10 }, "\(sizes)")
        }
        #expect(try Shard.parse("2/4") == Shard(index: 2, count: 4))
        for bad in ["0/4", "5/4", "2", "a/b", "1/0", "1/2/3", "1/2000"] {
            #expect(throws: JobError.self, "\(bad)") { try Shard.parse(bad) }
        }
    }

    @Test(arguments: Backend.allCases) func shardedRunnersTogetherRemindEveryoneOnce(_ backend: Backend) async throws {
        let db = try await TemporaryDatabase(backend)
        for i in 0..<60 { try await db.store.addUser("s\(i)") }
        let sender = RecordingSender()
        var claimed = 0
        for index in 1...3 {
            var options = ReminderRunOptions(now: instant("2026-11-21T20:00:00Z"))
            options.shard = Shard(index: index, count: 3)
            let summary = try await DiaryReminderRunner(store: db.store, sender: sender, logger: quietLogger).run(
                options)
            #expect(summary.shard == "\(index)/3")
            #expect(summary.candidates + summary.otherShards == 60)
            claimed += summary.claimed
        }
        #expect(claimed == 60)
        #expect(Set(await sender.users()).count == 60)
        #expect(await sender.users().count == 60)
    }

    /// `--explain` with `--shard` (or `PUSH_SHARD`) answers for that shard's run: it said "would be reminded now"
    /// to the operator of a shard whose run passes the user over.
    @Test(arguments: Backend.allCases) func explainAnswersForItsShard(_ backend: Backend) async throws {
        let db = try await TemporaryDatabase(backend)
        for i in 0..<12 { try await db.store.addUser("s\(i)") }
        let now = instant("2026-11-21T20:00:00Z")
        var explainedDue: [String: Int] = [:]
        for index in 1...3 {
            var options = ReminderRunOptions(now: now)
            options.shard = Shard(index: index, count: 3)
            for i in 0..<12 {
                let explanation = try await DiaryReminderRunner(
                    store: db.store, sender: RecordingSender(), logger: quietLogger
                )
                .explain(userID: "s\(i)", options: options)
                let owner = Shard.holding(userID: "s\(i)", count: 3)
                #expect(explanation.due == (owner.index == index), "s\(i) in \(owner), asked as \(index)/3")
                if explanation.due {
                    explainedDue["s\(i)"] = index
                } else {
                    #expect(explanation.skipReason == .otherShard)
                    #expect(explanation.verdict == "not reminded by this run: shard \(owner) handles this user")
                    #expect(explanation.text.contains("FAIL shard"), "\(explanation.text)")
                }
            }
        }
        #expect(explainedDue.count == 12)
        // The run of the shard that explain names is the one that reminds the user.
        for index in 1...3 {
            let sender = RecordingSender()
            var options = ReminderRunOptions(now: now)
            options.shard = Shard(index: index, count: 3)
            _ = try await DiaryReminderRunner(store: db.store, sender: sender, logger: quietLogger).run(options)
            #expect(Set(await sender.users()) == Set(explainedDue.filter { $0.value == index }.keys))
        }
    }
}

@Suite struct ReminderPagingTests {
    /// Pages are about `size` keys, cover every key once in order, and never part two keys of one user (a user
    /// due for two periods is decided from the same reads, whichever page is selected ahead).
    @Test(arguments: [
        (["a", "b", "c", "d", "e"], 2, [["a", "b"], ["c", "d"], ["e"]]),
        (["a", "b", "b", "c", "d"], 2, [["a", "b", "b"], ["c", "d"]]),
        (["a", "a", "a", "b"], 1, [["a", "a", "a"], ["b"]]),
        (["a", "b", "c"], 1_000, [["a", "b", "c"]]),
        ([], 3, []),
    ])
    func pagesNeverPartAUsersKeys(_ users: [String], _ size: Int, _ expected: [[String]]) {
        let keys = users.enumerated().map { DueKey(userID: $1, query: $0) }
        let pages = DiaryReminderRunner.pages(of: keys, size: size)
        #expect(pages.map { $0.map(\.userID) } == expected)
        #expect(pages.flatMap { $0 } == keys)
    }
}

import Foundation
import GRDB
import JobKitTestSupport
import NIOConcurrencyHelpers
import PushSimulator
import Testing

@testable import JobKit
@testable import JobKitDelivery
@testable import JobKitSQLite

/// "Nothing lost": a device that failed only transiently or for credentials is sent to again by a later run
/// inside the catch-up window (with the same collapse id), while a device that was reached is never sent to
/// again, whatever its user's other devices did.
@Suite struct NothingLostTests {
    @Test func theLifecycleNeverFinishesAClaimWithADevicePending() {
        let outcomes = DeliveryOutcome.allCases
        // Every combination of up to three device outcomes, after 0 to 2 devices reached by earlier runs.
        var combinations: [[DeliveryOutcome]] = [[]]
        for _ in 0..<3 {
            combinations += combinations.filter { $0.count == combinations.last!.count }.flatMap { c in
                outcomes.map { c + [$0] }
            }
        }
        for previous in 0...2 {
            for combination in Set(combinations) {
                let status = DeliveryLifecycle.resolution(previouslyDelivered: previous, outcomes: combination)
                let pending = combination.contains { !DeliveryLifecycle.isFinal($0) }
                let reached = previous + combination.filter { $0 == .delivered }.count
                let context = "previous \(previous), outcomes \(combination)"
                #expect((status == .retry) == pending, "\(context) → \(status)")
                #expect(
                    (status == .sent) == (!pending && reached > 0 && reached == previous + combination.count),
                    "\(context) → \(status)")
                #expect((status == .failed) == (!pending && reached == 0), "\(context) → \(status)")
                // A status that a later run takes over is exactly one with a device pending.
                let log = LogState(id: 1, status: status, claimedAt: 0, messageIndex: 0, locale: "en", runID: "r")
                #expect(DeliveryLifecycle.canTakeOver(log, staleBefore: -1) == pending, "\(context) → \(status)")
            }
        }
    }

    @Test func whoMayTakeAClaimOver() {
        func log(_ status: ClaimStatus, at claimedAt: Int64) -> LogState {
            LogState(id: 1, status: status, claimedAt: claimedAt, messageIndex: 0, locale: "en", runID: "r")
        }
        #expect(DeliveryLifecycle.canTakeOver(log(.claimed, at: 100), staleBefore: 100))  // lease run out
        #expect(!DeliveryLifecycle.canTakeOver(log(.claimed, at: 101), staleBefore: 100))  // lease running
        #expect(DeliveryLifecycle.canTakeOver(log(.retry, at: 500), staleBefore: 100))
        for status in [ClaimStatus.sent, .partial, .failed, .superseded, .deferred] {
            #expect(!DeliveryLifecycle.canTakeOver(log(status, at: 0), staleBefore: 100), "\(status)")
        }
        let devices = (1...3).map {
            Device(id: $0, userID: "u", token: "t\($0)", provider: .fcm, platform: .android, apnsEnvironment: nil)
        }
        #expect(DeliveryLifecycle.devicesToSend(devices, alreadyDelivered: [2]).map(\.id) == [1, 3])
        #expect(DeliveryLifecycle.devicesToSend(devices, alreadyDelivered: []).map(\.id) == [1, 2, 3])
    }

    @Test func aNinetyPercentWarningNeverFollowsTheHundred() {
        func logs(_ entries: [(NotificationType, ClaimStatus, Int64)]) -> [LimitLogKey: LogState] {
            Dictionary(
                uniqueKeysWithValues: entries.map { type, status, at in
                    (
                        LimitLogKey(type: type, period: "2026-11"),
                        LogState(id: 1, status: status, claimedAt: at, messageIndex: 0, locale: "en", runID: "r")
                    )
                })
        }
        func order(_ type: NotificationType, _ entries: [(NotificationType, ClaimStatus, Int64)])
            -> DeliveryLifecycle.WarningOrder
        {
            DeliveryLifecycle.warningOrder(type, period: "2026-11", logs: logs(entries), staleBefore: 100)
        }
        #expect(order(.contentLimit90, []) == .send)
        #expect(order(.contentLimit90, [(.contentLimit100, .sent, 0)]) == .overtaken)
        #expect(order(.contentLimit90, [(.contentLimit100, .claimed, 200)]) == .overtaken)
        #expect(order(.contentLimit100, []) == .send)
        #expect(order(.contentLimit100, [(.contentLimit90, .claimed, 200)]) == .waitForLowerWarning)
        #expect(order(.contentLimit100, [(.contentLimit90, .claimed, 100)]) == .send)  // its sender died
        for status in [ClaimStatus.sent, .retry, .partial, .failed, .superseded, .deferred] {
            #expect(order(.contentLimit100, [(.contentLimit90, status, 200)]) == .send, "\(status)")
        }
        #expect(
            DeliveryLifecycle.warningOrder(
                .contentLimit100, period: "2026-12",
                logs: logs([(.contentLimit90, .claimed, 200)]), staleBefore: 100) == .send)
    }

    /// Measured case 2: a wrong APNs key id for one run, fixed before the next. The Android device is reached
    /// in the first run and the iPhone in the second; neither gets the reminder twice.
    @Test(arguments: Backend.allCases) func aWrongAPNsKeyForOneRunIsMadeUpByTheNextRun(_ backend: Backend) async throws
    {
        let (harness, first, iPhone) = try await runWithAWrongAPNsKey(backend)
        #expect(first.retry == 1 && first.partial == 0 && first.sent == 0)
        #expect(first.devicesPendingRetry == 1)
        #expect(try await harness.db.strings("SELECT status FROM notification_logs") == ["retry"])
        // --explain tells the pending device from the reached one, and what the next run will do.
        let explainer = DiaryReminderRunner(store: harness.db.store, sender: RecordingSender(), logger: quietLogger)
        let options = ReminderRunOptions(now: instant("2026-11-21T20:10:00Z"), dryRun: true)
        let pending = try await explainer.explain(userID: "both", options: options)
        #expect(
            Dictionary(uniqueKeysWithValues: pending.devices.map { ($0.device.prefix(4), $0.state) }) == [
                "apns": "pending", "fcm/": "delivered",
            ])
        #expect(pending.devices.first { $0.state == "pending" }?.lastOutcome == "credentials")
        #expect(
            pending.verdict
                == "due: would send again to 1 pending device(s) with the same collapse id (1 already reached)")
        #expect(
            pending.text.contains("pending, sent again by the runs until 2026-11-21T21:00:00Z (credentials, 1 attempt"),
            "\(pending.text)")
        let second = try await harness.run(at: "2026-11-21T20:15:00Z", sender: try await harness.sender())
        #expect(second.takenOver == 1 && second.sent == 1 && second.devicesPendingRetry == 0)
        #expect(harness.simulator.accepted().map(\.token) == ["pixel-1", iPhone])
        #expect(Set(harness.simulator.accepted().map(\.collapseID)) == ["diary_reminder:2026-11-21"])
        #expect(try await harness.db.strings("SELECT status FROM notification_logs") == ["sent"])
        let done = try await explainer.explain(
            userID: "both", options: ReminderRunOptions(now: instant("2026-11-21T20:20:00Z"), dryRun: true))
        #expect(done.devices.map(\.state) == ["delivered", "delivered"] && done.skipReason == .alreadyReminded)
        await harness.stop()
    }

    /// User "both" (an iPhone and an Android phone, reminded at 20:00 UTC) and the 20:00 run with a wrong APNs key
    /// id: the Android phone is reached, the iPhone left pending.
    func runWithAWrongAPNsKey(_ backend: Backend) async throws -> (DeliveryHarness, RunSummary, iPhone: String) {
        let harness = try await DeliveryHarness.start(backend)
        let iPhone = hexToken("ab", 1)
        try await harness.addUser("both", devices: [(iPhone, .apns, .ios), ("pixel-1", .fcm, .android)])
        var wrongKey = harness.delivery()
        wrongKey.apns?.keyID = "WRONGKEY01"
        let first = try await harness.run(at: "2026-11-21T20:00:00Z", sender: try await harness.sender(wrongKey))
        return (harness, first, iPhone)
    }

    /// A device still pending when the window closes is not sent to again, and `--explain` says it was missed:
    /// not "will be taken over", not "sent again by the runs until" a time already past, and not "the reminder
    /// time has not come" for a user whose other device was reached.
    @Test(arguments: Backend.allCases) func aDeviceStillPendingWhenTheWindowClosesIsExplainedAsMissed(
        _ backend: Backend
    ) async throws {
        let (harness, first, _) = try await runWithAWrongAPNsKey(backend)
        #expect(first.retry == 1 && first.devicesPendingRetry == 1)
        let late = try await harness.run(at: "2026-11-21T21:05:00Z", sender: try await harness.sender())
        #expect(late.takenOver == 0 && late.sent == 0)
        #expect(harness.simulator.accepted().map(\.token) == ["pixel-1"])
        let explainer = DiaryReminderRunner(store: harness.db.store, sender: RecordingSender(), logger: quietLogger)
        let closed = try await explainer.explain(
            userID: "both", options: ReminderRunOptions(now: instant("2026-11-21T21:05:00Z"), dryRun: true))
        #expect(
            Dictionary(uniqueKeysWithValues: closed.devices.map { ($0.device.prefix(4), $0.state) }) == [
                "apns": "missed", "fcm/": "delivered",
            ])
        #expect(closed.text.contains("missed: the window closed at 2026-11-21T21:00:00Z (credentials, 1 attempt"))
        #expect(!closed.text.contains("will be taken over") && !closed.text.contains("sent again"), "\(closed.text)")
        #expect(closed.skipReason == .notDue && !closed.due)
        #expect(
            closed.verdict
                == "not reminded: the window closed at 2026-11-21T21:00:00Z with 1 device(s) not reached (1 reached)")
        // With no claim, the verdict says the window closed, not that the reminder time has not come.
        try await harness.addUser("quiet", devices: [("pixel-2", .fcm, .android)])
        let none = try await explainer.explain(
            userID: "quiet", options: ReminderRunOptions(now: instant("2026-11-21T21:05:00Z"), dryRun: true))
        #expect(none.verdict == "not reminded: the window closed at 2026-11-21T21:00:00Z", "\(none.text)")
        await harness.stop()
    }

    /// Measured case 2 under provider errors: a device whose retries ran out in one run (503 four times) is
    /// sent to by the next run in the window; its user's other device is not sent to again.
    @Test(arguments: Backend.allCases) func aDeviceWhoseRetriesRanOutIsRetriedByTheNextRunOnly(_ backend: Backend)
        async throws
    {
        let harness = try await DeliveryHarness.start(backend) {
            $0.rules = [SimulatorRule(prefix: "fa11", kind: .flaky, times: RetryPolicy().maxAttempts)]
        }
        let flaky = hexToken("fa11", 1)
        try await harness.addUser("both", devices: [(flaky, .apns, .ios), ("pixel-1", .fcm, .android)])
        let first = try await harness.run(at: "2026-11-21T20:00:00Z", sender: try await harness.sender())
        #expect(first.outcomes == [.delivered: 1, .retryLater: 1])
        #expect(first.retry == 1)
        let second = try await harness.run(at: "2026-11-21T20:15:00Z", sender: try await harness.sender())
        #expect(second.outcomes == [.delivered: 1])
        #expect(harness.simulator.accepted().map(\.token) == ["pixel-1", flaky])
        #expect(try await harness.db.strings("SELECT status FROM notification_logs") == ["sent"])
        // Done: a third run in the window sends nothing.
        let third = try await harness.run(at: "2026-11-21T20:30:00Z", sender: try await harness.sender())
        #expect(third.notifications == 0 && third.skipped == [.alreadyReminded: 1])
        await harness.stop()
    }
}

extension ContentLimitHookTests {
    /// A quota warning that reached one device and not another (transient error) is retried by the reminder
    /// run to the other device only.
    @Test(arguments: Backend.allCases) func aWarningIsRetriedOnlyToTheDevicesItDidNotReach(_ backend: Backend)
        async throws
    {
        let db = try await TemporaryDatabase(backend)
        try await addWriter(db)
        _ = try await db.store.register(
            DeviceRegistration(
                userID: "writer", token: "flaky-tablet", provider: .fcm,
                platform: .android), now: 0)
        let factory = SenderFactory()
        #expect(try await fire(db, factory, used: 27).action == .sent)
        #expect(try await db.strings("SELECT status FROM notification_logs") == ["retry"])
        let runner = DiaryReminderRunner(store: db.store, sender: factory.sender, logger: quietLogger)
        _ = try await runner.run(ReminderRunOptions(now: instant("2026-11-21T12:15:00Z")))
        #expect(
            await factory.sender.sent.map(\.device.token).sorted() == ["flaky-tablet", "flaky-tablet", "phone-writer"])
    }

    /// The hook's summary said `action=sent reason="claim retry"` when every device was left for a later run and
    /// `action=sent reason="claim failed"` when every token was dead: a warning that reached nobody read as sent.
    /// The action is now `sent` only when a device was reached, and the reason says what happened.
    @Test(arguments: Backend.allCases) func theHookSaysWhetherItsWarningReachedAnyone(_ backend: Backend)
        async throws
    {
        let cases: [(tokens: [String], action: ContentLimitAction, reason: String)] = [
            (["phone"], .sent, "sent to every device"),
            (["phone", "dead-tablet"], .sent, "sent; the other devices' tokens are dead or were refused"),
            (["phone", "flaky-tablet"], .sent, "sent to some devices; the others are left for the next reminder run"),
            (["flaky-phone"], .retry, "no device reached yet: left for the next reminder run"),
            (["dead-phone", "dead-tablet"], .failed, "no device took it: every token is dead or was refused"),
        ]
        for (index, testCase) in cases.enumerated() {
            let db = try await TemporaryDatabase(backend)
            let user = "writer\(index)"
            try await db.store.upsertUser(UserProfile(id: user, timezone: "UTC"), now: 0)
            for token in testCase.tokens {
                _ = try await db.store.register(
                    DeviceRegistration(userID: user, token: token, provider: .fcm, platform: .android), now: 0)
            }
            let summary = try await fire(db, SenderFactory(), used: 27, user: user)
            #expect(summary.action == testCase.action, "\(testCase.tokens): \(summary.text)")
            #expect(summary.reason == testCase.reason, "\(testCase.tokens): \(summary.text)")
            #expect(summary.text.contains(" action=\(testCase.action.rawValue) "), "\(summary.text)")
            #expect(summary.json.contains(#""action":"\#(testCase.action.rawValue)""#), "\(summary.json)")
        }
        // Devices only of a provider this host has no credentials for: sent to none.
        let unconfigured = ContentLimitHook.account(of: .failed, reached: 0, attempts: 0)
        #expect(unconfigured.action == .failed)
        #expect(unconfigured.reason == "no device it can be sent to: none of a provider configured here")
    }

    /// A writer whose 90 % warning of 2026-11 another invocation claimed at 12:00 and is still sending.
    func writerWithNinetyPercentOnItsWay(_ backend: Backend) async throws -> (TemporaryDatabase, SenderFactory, Int64) {
        let db = try await TemporaryDatabase(backend)
        try await addWriter(db)
        let now = instant("2026-11-21T12:00:00Z")
        try await insertNinetyPercentClaim(db, at: now)
        return (db, SenderFactory(), now)
    }

    func insertNinetyPercentClaim(_ db: TemporaryDatabase, at now: Int64) async throws {
        try await db.execute(
            """
            INSERT INTO notification_logs (user_id, notification_type, period_key, status, message_index, locale, run_id,
                                           attempts, claimed_at, updated_at, params)
            VALUES ('writer', 'content_limit_90', '2026-11', 'claimed', 0, 'en', 'another-invocation', 1, \(db.ts(now)),
                    \(db.ts(now)), '{"limit":"30","percent":"90","used":"27"}')
            """)
    }

    /// Measured case 7: another invocation is sending the 90 % warning when usage reaches 100 %. The 100 %
    /// warning waits until the 90 % one is recorded; the 90 % one, left `retry`, never goes out afterwards.
    @Test(arguments: Backend.allCases) func theHundredPercentWarningWaitsForTheNinetyOnItsWay(_ backend: Backend)
        async throws
    {
        let (db, factory, now) = try await writerWithNinetyPercentOnItsWay(backend)
        // After 20 of the hook's waits (1 s on its clock), the other invocation records its 90 % warning: it
        // reached no device, for a transient reason. Until then the 100 % warning is claimed and not sent.
        let seen = NIOLockedValueBox<(claimed: Int, sent: Int)?>(nil)
        let clock = ManualRetryClock { waits in
            guard waits == 20 else { return }
            let claimed = try? await db.count(
                "SELECT count(*) FROM notification_logs WHERE notification_type = 'content_limit_100'")
            let sent = await factory.sender.sent.count
            seen.withLockedValue { $0 = (claimed ?? -1, sent) }
            try? await db.execute(
                "UPDATE notification_logs SET status = 'retry' WHERE notification_type = 'content_limit_90'")
        }
        var hook = hook(db, factory)
        hook.clock = clock
        let full = try await hook.handle(
            try ContentLimitEvent(userID: "writer", used: 30, limit: 30), options: ContentLimitHook.Options(now: now))
        #expect(seen.withLockedValue { $0 }.map { $0 == (1, 0) } == true, "\(String(describing: seen))")
        // Sent once the 90 % warning was recorded: the next look after the 20th wait.
        #expect(full.action == .sent)
        #expect(clock.waits.count == 20)
        let runner = DiaryReminderRunner(store: db.store, sender: factory.sender, logger: quietLogger)
        let run = try await runner.run(ReminderRunOptions(now: now + 900))
        #expect(run.warningsDelivered == 0)
        #expect(await factory.sender.sent.map(\.type) == [.contentLimit100])
        #expect(
            try await db.strings(
                "SELECT notification_type || ' ' || status FROM notification_logs ORDER BY notification_type")
                == ["content_limit_100 sent", "content_limit_90 superseded"])
    }

    /// Under Lambda (3 s by default), the wait for the 90 % warning ends by the invocation's deadline, less time
    /// to answer, and leaves the 100 % one to the reminder run as after the whole wait. It waited its 10 s, and the
    /// platform ended the invocation mid-wait with its claim unresolved.
    @Test func theWaitForTheNinetyEndsByTheInvocationsDeadline() async throws {
        let clock = ManualRetryClock()
        let deadline = clock.now + .seconds(3)
        let handler = try await hundredPercentWarning(
            on: clock, context: { InvocationContext(now: $0, deadline: deadline) })
        #expect(clock.moved > .zero && clock.now <= deadline - handler.deadlines.reportReserve, "\(clock.moved)")
    }

    /// A hook asked to stop (SIGTERM) ends the wait for the 90 % warning at once, and leaves the 100 % one to the
    /// reminder run as after the whole wait; it had no stop request and waited its 10 s.
    @Test func theWaitForTheNinetyEndsWhenTheHookIsAskedToStop() async throws {
        let clock = ManualRetryClock()
        let stop = StopRequest()
        #expect(stop.request("SIGTERM"))
        _ = try await hundredPercentWarning(on: clock, context: { InvocationContext(now: $0, stop: stop) })
        #expect(clock.moved == .zero, "\(clock.moved)")
    }

    /// The 100 % warning of a writer whose 90 % one is on its way, handled in `context` with the hook's waits on
    /// `clock`: it is held back (`deferred`, its claim left `retry`). Returns the handler.
    private func hundredPercentWarning(on clock: ManualRetryClock, context: (Int64) -> InvocationContext)
        async throws -> ContentLimitHookHandler
    {
        let (db, factory, now) = try await writerWithNinetyPercentOnItsWay(.sqlite)
        var hook = hook(db, factory)
        hook.clock = clock
        let handler = ContentLimitHookHandler(
            hook: hook, senders: LazySender { () async throws(JobError) in factory.make() })
        let summary = try await handler.handle(
            try ContentLimitEvent(userID: "writer", used: 30, limit: 30), context: context(now))
        #expect(summary.action == .deferred)
        #expect(
            try await db.strings("SELECT status FROM notification_logs WHERE notification_type = 'content_limit_100'")
                == ["retry"])
        return handler
    }

    /// When the 90 % warning is still on its way after the wait, the 100 % one is left for the reminder run,
    /// which sends it once the 90 % one is recorded.
    @Test(arguments: Backend.allCases) func aHundredPercentWarningHeldBackIsSentByTheRunAfterTheNinety(
        _ backend: Backend
    ) async throws {
        let (db, factory, now) = try await writerWithNinetyPercentOnItsWay(backend)
        // The whole wait (10 s) on the hook's clock: the test does not wait through it.
        let clock = ManualRetryClock()
        var hook = hook(db, factory)
        hook.clock = clock
        let summary = try await hook.handle(
            try ContentLimitEvent(userID: "writer", used: 30, limit: 30), options: ContentLimitHook.Options(now: now))
        #expect(summary.action == .deferred)
        #expect(clock.moved >= .seconds(10) && clock.moved < .seconds(10) + .milliseconds(100), "\(clock.moved)")
        #expect(
            try await db.strings("SELECT status FROM notification_logs WHERE notification_type = 'content_limit_100'")
                == ["retry"])
        let runner = DiaryReminderRunner(store: db.store, sender: factory.sender, logger: quietLogger)
        #expect(try await runner.run(ReminderRunOptions(now: now + 60)).warningsDelivered == 0)
        #expect(await factory.sender.sent.isEmpty)
        try await db.execute(
            "UPDATE notification_logs SET status = 'sent' WHERE notification_type = 'content_limit_90'")
        #expect(try await runner.run(ReminderRunOptions(now: now + 120)).warningsDelivered == 1)
        #expect(await factory.sender.sent.map(\.type) == [.contentLimit100])
    }
}

extension NothingLostTests {
    /// A SQLite slot of 30 due users, a store on it that gives up on a lock after 100 ms, and a sender that
    /// locks the database as its first batch goes out (until released).
    func lockedSlot() async throws -> (TemporaryDatabase, SQLiteStore, LockingSender) {
        let db = try await TemporaryDatabase(.sqlite)
        for i in 0..<30 { try await db.store.addUser("u\(String(format: "%02d", i))") }
        let impatient = try SQLiteStore.open(path: db.path, mode: .readWrite, busyTimeout: 0.1)
        return (db, impatient, LockingSender(path: db.path))
    }
}

extension NothingLostTests {
    /// Measured case 5 (the lock part): answers the providers accepted are recorded once the database is free
    /// again, within the claims' lease, instead of the run failing with them unrecorded (the run that took the
    /// claims over then sent every one of them again). A claim that meets the lock ends the run with 75; either
    /// way the next run sends only to the users nobody sent to.
    @Test func answersAreRecordedAfterALockAndNothingIsSentTwice() async throws {
        let (db, impatient, sender) = try await lockedSlot()
        // The other transaction ends after the run's third wait to record (100, 200, 400 ms on its clock).
        let clock = ManualRetryClock { waits in if waits == 3 { await sender.release() } }
        // The first page's answers meet the lock; a later page's claim may meet it too (then the run ends 75).
        try await expectAnswersRecordedAfterAWait(
            db, runStore: impatient, sender: sender, sent: { await sender.sent }, clock: clock, failure: 75, waits: 3)
        await impatient.close()
    }
}

extension NothingLostTests {
    /// A run that stops claiming because its time ran out (its budget, or a Lambda deadline) leaves due users
    /// to the next run, and says so in its exit code (75, "try again") and its metrics, not only in a log line
    /// (it exited 0 and its metrics looked like a finished run's). The next run reminds them.
    @Test(arguments: Backend.allCases) func aRunOutOfTimeSaysItLeftDueUsers(_ backend: Backend) async throws {
        let db = try await TemporaryDatabase(backend)
        for i in 0..<3 { try await db.store.addUser("u\(i)") }
        let sender = RecordingSender()
        let runner = DiaryReminderRunner(store: db.store, sender: sender, logger: quietLogger)
        func stoppedEarlyMetric(_ summary: RunSummary) -> Double? {
            let sample = #"diary_push_run_stopped_early{job="diary-reminder"} "#
            return MetricsFile.text(
                summary, job: "diary-reminder", now: 0, exitCode: summary.failure?.exitCode ?? 0, durationSeconds: 1,
                previousLastSuccess: nil
            ).split(separator: "\n").first { $0.hasPrefix(sample) }.flatMap { Double($0.dropFirst(sample.count)) }
        }
        var options = ReminderRunOptions(now: instant("2026-11-21T20:00:00Z"))
        options.stopClaimingAt = ContinuousClock.now
        let late = try await runner.run(options)
        #expect(late.stoppedEarly && late.claimed == 0)
        #expect(late.failure?.exitCode == 75, "\(String(describing: late.failure))")
        #expect(late.failure?.message.contains("next run") == true, "\(String(describing: late.failure))")
        #expect(stoppedEarlyMetric(late) == 1)
        let next = try await runner.run(ReminderRunOptions(now: instant("2026-11-21T20:15:00Z")))
        #expect(next.sent == 3 && !next.stoppedEarly && next.failure == nil)
        #expect(stoppedEarlyMetric(next) == 0)
    }

    /// The run's time budget (half the claim lease: 300 s) is kept on the runner's clock, so it is tested
    /// without waiting for it: a provider that takes 200 s a page leaves the later pages to the next run,
    /// which reminds exactly the users left.
    @Test func theTimeBudgetIsKeptOnTheRunnersClock() async throws {
        let db = try await TemporaryDatabase(.sqlite)
        for i in 0..<30 { try await db.store.addUser("u\(String(format: "%02d", i))") }
        let clock = ManualRetryClock()
        let slow = ClockAdvancingSender(clock: clock, takes: .seconds(200))
        var runner = DiaryReminderRunner(store: db.store, sender: slow, logger: quietLogger)
        runner.clock = clock
        var options = ReminderRunOptions(now: instant("2026-11-21T20:00:00Z"))
        options.pageSize = 10
        let first = try await runner.run(options)
        #expect(first.stoppedEarly && first.failure?.exitCode == 75)
        #expect(first.sent >= 10 && first.sent < 30, "\(first.text)")
        #expect(clock.moved >= .seconds(300), "\(clock.moved)")
        let sender = RecordingSender()
        let next = try await DiaryReminderRunner(store: db.store, sender: sender, logger: quietLogger)
            .run(ReminderRunOptions(now: instant("2026-11-21T20:15:00Z")))
        #expect(next.sent == 30 - first.sent && !next.stoppedEarly)
        let users = await slow.sent.map(\.device.userID) + sender.users()
        #expect(users.count == 30 && Set(users).count == 30)
    }
}

extension NothingLostTests {
    /// Measured case 5 (the kill part): answers are recorded as they arrive, not once the page is done, so a
    /// run killed while a page waits for its retries leaves its delivered answers recorded (the run that takes
    /// the claims over then sends only to the other devices). Here one device's 429 with Retry-After: 2 keeps
    /// the page waiting; the other answers must be recorded meanwhile.
    @Test(arguments: Backend.allCases) func answersAreRecordedWhileTheirPageStillWaitsForRetries(_ backend: Backend)
        async throws
    {
        let harness = try await DeliveryHarness.start(backend) {
            $0.rules = [SimulatorRule(prefix: "7407", kind: .throttle, retryAfter: 2)]
        }
        for i in 0..<9 { try await harness.addUser("u\(i)", devices: [(hexToken("ab", i), .apns, .ios)]) }
        try await harness.addUser("u9", devices: [(hexToken("7407", 9), .apns, .ios)])
        var delivery = harness.delivery(fcm: false)
        delivery.retry.maxAttempts = 2
        let sender = try await harness.sender(delivery)
        let finished = NIOLockedValueBox(false)
        let run = Task {
            defer { finished.withLockedValue { $0 = true } }
            return try await harness.run(at: "2026-11-21T20:00:00Z", sender: sender)
        }
        // Delivered rows while every claim is still open, read at one instant: a page recorded only at its end
        // writes its deliveries and its resolutions in one transaction, so this count stays 0 for it.
        let recordedWhileOpen = """
            SELECT count(*) FROM notification_deliveries
            WHERE outcome = 'delivered' AND (SELECT count(*) FROM notification_logs WHERE status = 'claimed') = 10
            """
        var recordedWhileWaiting = 0
        for _ in 0..<800 where recordedWhileWaiting < 9 && !finished.withLockedValue({ $0 }) {
            try await Task.sleep(for: .milliseconds(25))
            recordedWhileWaiting = try await harness.db.count(recordedWhileOpen)
        }
        #expect(recordedWhileWaiting == 9)
        let summary = try await run.value
        #expect(summary.sent == 9 && summary.retry == 1)
        // Each answer recorded once.
        #expect(try await harness.db.count("SELECT count(*) FROM notification_deliveries") == 10)
        await harness.stop()
    }

    /// Measured case 5, the unrecorded window: answers are recorded as they are read, not once every request
    /// sent with them is answered. Here one device's answer takes 4 s (a slow request, not a retry: the
    /// connection answers everything else at once); the other nine answers must be in the database within
    /// that time, while the run still waits for the tenth. A kill at that moment then costs one device.
    @Test(arguments: Backend.allCases) func answersAreRecordedAsTheyAreReadNotWhenTheirBatchIsDone(_ backend: Backend)
        async throws
    {
        let harness = try await DeliveryHarness.start(backend) {
            $0.rules = [SimulatorRule(prefix: "5104", kind: .slow, delayMs: 4_000)]
        }
        for i in 0..<9 { try await harness.addUser("u\(i)", devices: [(hexToken("ab", i), .apns, .ios)]) }
        try await harness.addUser("u9", devices: [(hexToken("5104", 9), .apns, .ios)])
        let sender = try await harness.sender(harness.delivery(fcm: false))
        let finished = NIOLockedValueBox(false)
        let run = Task {
            defer { finished.withLockedValue { $0 = true } }
            return try await harness.run(at: "2026-11-21T20:00:00Z", sender: sender)
        }
        // Delivered rows while the slow device has none, read at one instant: a batch recorded when it is done
        // writes all ten in one transaction, so this count stays 0 for it.
        let recordedBeforeTheSlowOne = """
            SELECT count(*) FROM notification_deliveries WHERE outcome = 'delivered' AND NOT EXISTS (
                SELECT 1 FROM notification_deliveries d JOIN user_devices u ON u.id = d.device_id
                WHERE u.token LIKE '5104%')
            """
        var recordedWhileWaiting = 0
        for _ in 0..<1_200 where recordedWhileWaiting < 9 && !finished.withLockedValue({ $0 }) {
            try await Task.sleep(for: .milliseconds(25))
            recordedWhileWaiting = try await harness.db.count(recordedBeforeTheSlowOne)
        }
        #expect(recordedWhileWaiting == 9)
        let summary = try await run.value
        #expect(summary.sent == 10)
        #expect(try await harness.db.count("SELECT count(*) FROM notification_deliveries") == 10)
        await harness.stop()
    }
}

/// The stores claim in SQL; the rules they apply are the lifecycle's (its SQL renderings of them). Every status
/// a log row can have, at each side of the lease and of the end of quiet hours, on both stores: each store
/// takes over, claims and supersedes exactly what `DeliveryLifecycle` says.
@Suite struct LifecycleAgreementTests {
    static let now: Int64 = 1_800_000_000
    static let staleBefore = now - 600
    static let statuses: [ClaimStatus] = [.claimed, .sent, .partial, .failed, .retry, .deferred, .superseded]

    struct Row {
        let user: String
        let status: ClaimStatus
        let claimedAt: Int64
        let deliverAfter: Int64?
        var log: LogState {
            LogState(id: 0, status: status, claimedAt: claimedAt, messageIndex: 0, locale: "en", runID: "old")
        }
    }

    /// One log row per combination, each for a user of its own.
    static func rows() -> [Row] {
        var rows: [Row] = []
        for status in statuses {
            for claimedAt in [staleBefore - 1, staleBefore, staleBefore + 1] {
                for deliverAfter in [nil, now - 1, now, now + 1] as [Int64?] {
                    rows.append(
                        Row(user: "u\(rows.count)", status: status, claimedAt: claimedAt, deliverAfter: deliverAfter))
                }
            }
        }
        return rows
    }

    static func insert(_ rows: [Row], type: NotificationType, period: String, into db: TemporaryDatabase) async throws {
        for row in rows {
            try await db.store.addUser(row.user, tokens: [])
            try await db.execute(
                """
                INSERT INTO notification_logs (user_id, notification_type, period_key, status, message_index, locale, run_id,
                                               claimed_at, updated_at, deliver_after)
                VALUES ('\(row.user)', '\(type.rawValue)', '\(period)', '\(row.status)', 0, 'en', 'old', \(db.ts(row.claimedAt)),
                        \(db.ts(row.claimedAt)), \(row.deliverAfter.map { db.ts($0) } ?? "NULL"))
                """)
        }
    }

    @Test(arguments: Backend.allCases) func reminderTakeOversAreTheLifecycles(_ backend: Backend) async throws {
        let db = try await TemporaryDatabase(backend)
        let rows = Self.rows().filter { $0.deliverAfter == nil }
        try await Self.insert(rows, type: .diaryReminder, period: "2026-11-21", into: db)
        let requests = rows.map {
            ClaimRequest(userID: $0.user, type: .diaryReminder, period: "2026-11-21", messageIndex: 0, locale: "en")
        }
        let won = Set(
            try await db.store.claim(requests, runID: "new", now: Self.now, staleBefore: Self.staleBefore).map(\.userID)
        )
        for row in rows {
            #expect(
                won.contains(row.user) == DeliveryLifecycle.canTakeOver(row.log, staleBefore: Self.staleBefore),
                "\(row.status) claimed at lease\(row.claimedAt - Self.staleBefore >= 0 ? "+" : "")\(row.claimedAt - Self.staleBefore)"
            )
        }
        #expect(!won.isEmpty && won.count < rows.count)
    }

    @Test(arguments: Backend.allCases) func warningClaimsAndSupersedesAreTheLifecycles(_ backend: Backend) async throws
    {
        let db = try await TemporaryDatabase(backend)
        let store: any ContentLimitStore = db.store
        let rows = Self.rows()
        try await Self.insert(rows, type: .contentLimit90, period: "2026-11", into: db)
        func describe(_ row: Row) -> String {
            "\(row.status), lease\(row.claimedAt - Self.staleBefore), deliver_after \(row.deliverAfter.map { "\($0 - Self.now)" } ?? "none")"
        }

        // A diary-reminder run claims the deferred and pending warnings.
        let ids = try await db.strings(
            "SELECT user_id || ':' || id FROM notification_logs WHERE notification_type = 'content_limit_90'")
        let idByUser = Dictionary(
            uniqueKeysWithValues: ids.map { entry in
                let parts = entry.split(separator: ":")
                return (String(parts[0]), Int64(parts[1])!)
            })
        let won = try await store.claimPendingWarnings(
            Array(idByUser.values), runID: "new", now: Self.now, staleBefore: Self.staleBefore)
        for row in rows {
            let expected = DeliveryLifecycle.canClaimWarning(
                row.log, deliverAfter: row.deliverAfter, now: Self.now,
                staleBefore: Self.staleBefore)
            #expect(won.contains(idByUser[row.user]!) == expected, "claim pending: \(describe(row))")
        }

        // On a fresh copy: the hook's 100 % warning supersedes exactly the 90 % rows not yet on their way.
        let fresh = try await TemporaryDatabase(backend)
        let freshStore: any ContentLimitStore = fresh.store
        try await Self.insert(rows, type: .contentLimit90, period: "2026-11", into: fresh)
        for row in rows {
            _ = try await freshStore.claimLimitWarning(
                QuotaWarning(
                    userID: row.user, type: .contentLimit100, period: "2026-11", messageIndex: 0, locale: "en",
                    params: [:]),
                deliverAfter: nil, runID: "new", now: Self.now, staleBefore: Self.staleBefore)
        }
        let statuses = try await fresh.strings(
            "SELECT user_id || ':' || status FROM notification_logs WHERE notification_type = 'content_limit_90'")
        let statusByUser = Dictionary(
            uniqueKeysWithValues: statuses.map { entry in
                let parts = entry.split(separator: ":")
                return (String(parts[0]), String(parts[1]))
            })
        for row in rows {
            let expected = DeliveryLifecycle.canSupersede(row.status) ? ClaimStatus.superseded : row.status
            #expect(statusByUser[row.user] == expected.rawValue, "supersede: \(describe(row))")
        }
    }
}

/// A dry run and `--explain` answer "who would get what" as the real run with the same providers would:
/// a device of a provider without credentials is skipped by all three.
@Suite struct DryRunAgreementTests {
    @Test(arguments: Backend.allCases) func aDryRunAndExplainSkipWhatTheRealRunSkips(_ backend: Backend) async throws {
        let harness = try await DeliveryHarness.start(backend)
        try await harness.addUser("ios-only", devices: [(hexToken("ab", 1), .apns, .ios)])
        try await harness.addUser(
            "both", devices: [(hexToken("ab", 2), .apns, .ios), ("pixel-both", .fcm, .android)])
        // Only a device of the unconfigured provider, and an entry today: the run passes them over as having
        // written (its plan's first step), before it looks at providers; explain says the same.
        try await harness.addUser("ios-wrote", devices: [(hexToken("ab", 3), .apns, .ios)])
        try await harness.db.store.recordEntry(userID: "ios-wrote", at: instant("2026-11-21T19:00:00Z"))
        let lines = LineBuffer()
        // The dry run's sender from the same configuration as the real run's, by the factory the CLI uses.
        let fcmOnly = harness.delivery(apns: false)
        let dry = DiaryReminderRunner(
            store: harness.db.store,
            sender: try await fcmOnly.sender(
                for: .dryRun(outbox: nil, sink: lines, json: true), credentials: harness.db.store,
                logger: quietLogger),
            logger: quietLogger)
        let options = ReminderRunOptions(now: instant("2026-11-21T20:00:00Z"), dryRun: true)
        let preview = try await dry.run(options)
        let explained = try await dry.explain(userID: "ios-only", options: options)
        let both = try await dry.explain(userID: "both", options: options)
        let wrote = try await dry.explain(userID: "ios-wrote", options: options)
        // FCM only: the real run with the same providers.
        let real = try await harness.run(at: "2026-11-21T20:00:00Z", sender: try await harness.sender(fcmOnly))

        #expect(
            preview.skipped == real.skipped && preview.skipped[.noConfiguredProvider] == 1
                && preview.skipped[.wroteToday] == 1,
            "\(preview.skipped) \(real.skipped)")
        #expect(wrote.skipReason == .wroteToday && !wrote.due, "\(wrote.text)")
        #expect(preview.notifications == real.notifications && real.notifications == 1)
        #expect(
            lines.lines.count == 1 && lines.lines[0].contains(#""provider":"fcm""#),
            "\(lines.lines)")
        #expect(explained.skipReason == .noConfiguredProvider && !explained.due, "\(explained.text)")
        #expect(explained.text.contains("not configured for this run"))
        #expect(both.due && both.verdict == "due: would be reminded now on 1 device(s)", "\(both.text)")
        await harness.stop()
    }
}

extension NothingLostTests {
    /// "A full disk … may cost time, never a reminder, and never a second one." Answers the providers accepted
    /// while the disk was full are recorded once it has room again, within the claims' lease, as after a lock.
    /// The run threw the full disk's error (74) with them unrecorded, and the run that took the claims over sent
    /// every one of them again. A claim that meets the full disk ends the run with 74; either way the next run
    /// sends only to the users nobody sent to.
    @Test(arguments: Backend.allCases) func answersAreRecordedOnceTheDiskHasRoomAndNothingIsSentTwice(
        _ backend: Backend
    ) async throws {
        let db = try await TemporaryDatabase(backend)
        for i in 0..<30 { try await db.store.addUser("u\(String(format: "%02d", i))") }
        let disk = try await FullDisk(db)
        let sender = DeliveringSender { try? await disk.set(full: true) }
        // Room again after the run's second wait to record (100, 200 ms on its clock).
        let clock = ManualRetryClock { waits in if waits == 2 { try? await disk.set(full: false) } }
        // A claim of a later page may meet the full disk too (then the run ends 74). The next run comes once the
        // disk has room, whatever this run did.
        try await expectAnswersRecordedAfterAWait(
            db, runStore: db.store, sender: sender, sent: { await sender.sent }, clock: clock, failure: 74, waits: 2,
            beforeNextRun: { try await disk.set(full: false) })
    }
}

extension NothingLostTests {
    /// Runs the slot of 30 due users seeded by the caller, in pages of 10, on `runStore` and `clock`, where
    /// recording meets a fault that passes after `waits` waits; then checks that the run ended 0 or `failure`,
    /// waited from 100 ms on, and recorded every answer it was given, and that the next run in the window (after
    /// `beforeNextRun`, once the claims' lease has passed) sends to the other users only, nobody twice.
    func expectAnswersRecordedAfterAWait(
        _ db: TemporaryDatabase, runStore: any JobStore, sender: any Sender,
        sent: () async -> [OutgoingNotification], clock: ManualRetryClock, failure: Int32, waits: Int,
        beforeNextRun: () async throws -> Void = {}
    ) async throws {
        let logs = CapturedLogs()
        var options = ReminderRunOptions(now: instant("2026-11-21T20:00:00Z"))
        options.pageSize = 10
        var runner = DiaryReminderRunner(store: runStore, sender: sender, logger: logs.logger)
        runner.clock = clock
        do {
            _ = try await runner.run(options)
        } catch {
            #expect(error.exitCode == failure, "\(error)")
        }
        #expect(clock.waits.count >= waits && clock.waits.first == .milliseconds(100), "\(clock.waits)")
        let sentFirst = await sent().count
        #expect(sentFirst >= 10)
        #expect(
            try await db.count("SELECT count(*) FROM notification_deliveries WHERE outcome = 'delivered'") == sentFirst,
            "\(logs.lines)")
        #expect(try await db.count("SELECT count(*) FROM notification_logs WHERE status = 'sent'") == sentFirst)
        #expect(logs.lines.contains { $0.contains("cannot record provider answers yet") }, "\(logs.lines)")
        try await beforeNextRun()
        let next = try await DiaryReminderRunner(store: db.store, sender: sender, logger: quietLogger)
            .run(ReminderRunOptions(now: instant("2026-11-21T20:15:00Z")))
        #expect(next.sent == 30 - sentFirst)
        let users = await sent().map(\.device.userID)
        #expect(users.count == 30 && Set(users).count == 30, "\(users.sorted())")
    }
}

extension NothingLostTests {
    /// Under Lambda, a wait to record ends by the invocation's deadline (less time to report the error), not
    /// by the claims' lease: a lock that outlasts the invocation ends it with 75 and the run's own error. The
    /// wait went on for nine tenths of the lease (540 s), past any invocation's time, and the platform ended
    /// the invocation mid-wait with nothing reported.
    @Test func aWaitToRecordEndsByTheInvocationsDeadline() async throws {
        let (_, impatient, sender) = try await lockedSlot()
        let clock = ManualRetryClock()
        var runner = DiaryReminderRunner(store: impatient, sender: sender, logger: quietLogger)
        runner.clock = clock
        var settings = DiaryReminderHandler.Settings()
        settings.pageSize = 10
        let handler = DiaryReminderHandler(runner: runner, settings: settings)
        let now = instant("2026-11-21T20:00:00Z")
        let deadline = clock.now + .seconds(60)
        do {
            let summary = try await handler.handle(
                ScheduledEvent(time: now), context: InvocationContext(now: now, deadline: deadline))
            Issue.record("expected the lock's 75, got \(summary.text)")
        } catch {
            #expect(error.exitCode == 75, "\(error)")
        }
        #expect(!clock.waits.isEmpty)
        #expect(clock.now <= deadline - handler.settings.deadlines.reportReserve, "waited \(clock.moved)")
        await sender.release()
        await impatient.close()
    }
}

extension NothingLostTests {
    /// A run asked to stop (SIGTERM from systemd or a container runtime, an operator's Ctrl-C) claims nothing
    /// more, finishes and records the pages already on their way, and ends with 75 saying why; the next run
    /// reminds the others, nobody twice. The signal used to end the process at once, with the answers of every
    /// notification in flight unrecorded (the run that took the claims over sent them again).
    @Test(arguments: Backend.allCases) func aRunAskedToStopFinishesWhatIsOnItsWayAndClaimsNoMore(
        _ backend: Backend
    ) async throws {
        let db = try await TemporaryDatabase(backend)
        for i in 0..<50 { try await db.store.addUser("u\(String(format: "%02d", i))") }
        let stop = StopRequest()
        let sender = DeliveringSender { stop.request("SIGTERM") }
        var settings = DiaryReminderHandler.Settings()
        settings.pageSize = 10
        let handler = DiaryReminderHandler(
            runner: DiaryReminderRunner(store: db.store, sender: sender, logger: quietLogger), settings: settings)
        let now = instant("2026-11-21T20:00:00Z")
        let first = try await handler.handle(
            ScheduledEvent(time: now), context: InvocationContext(now: now, stop: stop))
        let sentFirst = await sender.sent.count
        #expect(first.stoppedEarly && first.stoppedBy == "SIGTERM", "\(first.text)")
        #expect(first.text.contains("STOPPED EARLY (SIGTERM)"), "\(first.text)")
        #expect(first.failure?.exitCode == 75 && first.failure?.message.contains("SIGTERM") == true)
        // The pages claimed before the request (the pipeline keeps up to three) went out, and nothing else.
        #expect(sentFirst >= 10 && sentFirst <= 30 && first.claimed == sentFirst && first.sent == sentFirst)
        #expect(try await db.count("SELECT count(*) FROM notification_logs WHERE status = 'sent'") == sentFirst)
        #expect(
            try await db.count("SELECT count(*) FROM notification_deliveries WHERE outcome = 'delivered'") == sentFirst)
        let next = try await DiaryReminderRunner(store: db.store, sender: sender, logger: quietLogger)
            .run(ReminderRunOptions(now: now + 900))
        #expect(next.sent == 50 - sentFirst && !next.stoppedEarly)
        let users = await sender.sent.map(\.device.userID)
        #expect(users.count == 50 && Set(users).count == 50, "\(users.sorted())")
    }
}

import Foundation
import JobKitTestSupport
import NIOCore
import NIOHPACK
import Testing

@testable import JobKit
@testable import JobKitDelivery
@testable import PushSimulator

@Suite struct DeliveryTests {
    @Test(arguments: Backend.allCases) func bothProvidersReceiveTheRightShape(_ backend: Backend) async throws {
        let harness = try await DeliveryHarness.start(backend)
        let apnsToken = hexToken("a1", 1)
        try await harness.addUser(
            "tokyo",
            devices: [
                (apnsToken, .apns, .ios), ("droid-1", .fcm, .android),
                ("fire-ios-1", .fcm, .ios),
            ], zone: "Asia/Tokyo", time: "21:00")
        let summary = try await harness.run(at: "2026-11-21T12:00:00Z", sender: try await harness.sender())
        #expect(summary.sent == 1)
        #expect(summary.outcomes == [.delivered: 3])
        let accepted = Dictionary(uniqueKeysWithValues: harness.simulator.accepted().map { ($0.token, $0) })
        let endOfTokyoDay = instant("2026-11-21T15:00:00Z")
        let apns = try #require(accepted[apnsToken])
        #expect(apns.collapseID == "diary_reminder:2026-11-21")
        #expect(apns.expiration == String(endOfTokyoDay))
        let payload = try #require(try JSONSerialization.jsonObject(with: Data(apns.payload.utf8)) as? [String: Any])
        let aps = try #require(payload["aps"] as? [String: Any])
        #expect(aps["sound"] as? String == "default")
        #expect(aps["badge"] as? Int == 1)
        #expect(aps["thread-id"] as? String == "diary_reminder")
        #expect(payload["period"] as? String == "2026-11-21")
        #expect((payload["link"] as? String)?.hasPrefix("diary://") == true)
        let android = try #require(accepted["droid-1"])
        #expect(android.collapseID == "diary_reminder:2026-11-21")
        #expect(
            android.expiration == "\(endOfTokyoDay - instant("2026-11-21T12:00:00Z"))s"
                || android.expiration?.hasSuffix("s") == true)
        #expect(android.payload.contains(#""channel_id":"diary_reminders""#))
        #expect(android.payload.contains(#""priority":"high""#))
        let fireIOS = try #require(accepted["fire-ios-1"])
        #expect(fireIOS.payload.contains(#""apns-collapse-id":"diary_reminder:2026-11-21""#))
        // An iOS app that uses Firebase gets the `aps` members an APNs device gets (FCM writes the alert itself
        // from `notification`): its reminders had no thread id, so iOS did not group them as it groups the same
        // app's through APNs.
        let fireMessage = try #require(
            (try JSONSerialization.jsonObject(with: Data(fireIOS.payload.utf8)) as? [String: Any])?["message"]
                as? [String: Any])
        let fireAPS = try #require(
            ((fireMessage["apns"] as? [String: Any])?["payload"] as? [String: Any])?["aps"] as? [String: Any])
        #expect(Set(fireAPS.keys) == Set(aps.keys).subtracting(["alert"]), "\(fireAPS)")
        #expect(fireAPS["sound"] as? String == "default")
        #expect(fireAPS["badge"] as? Int == 1)
        #expect(fireAPS["thread-id"] as? String == "diary_reminder")
        #expect(
            try await harness.db.count(
                "SELECT count(*) FROM notification_deliveries WHERE outcome = 'delivered' AND provider_message_id IS NOT NULL"
            ) == 3)
        await harness.stop()
    }

    @Test(arguments: Backend.allCases) func everyClassificationUpdatesDevicesAndDeliveries(_ backend: Backend)
        async throws
    {
        let harness = try await DeliveryHarness.start(backend)
        let devices: [(String, Provider, Platform)] = [
            (hexToken("dead", 1), .apns, .ios), (hexToken("bad0", 2), .apns, .ios),
            (hexToken("fa11", 3), .apns, .ios),
            ("dead-fcm", .fcm, .android), ("bad0-fcm", .fcm, .android), ("fa11-fcm", .fcm, .android),
            (hexToken("7407", 4), .apns, .ios), (hexToken("cafe", 5), .apns, .ios),
        ]
        for (i, device) in devices.enumerated() { try await harness.addUser("u\(i)", devices: [device]) }
        var delivery = harness.delivery()
        delivery.retry.maxAttempts = 3
        // Every dead answer believed, however few the deliveries beside it: the guard's own cases are
        // MisconfigurationTests'.
        delivery.deadTokenGuard = DeadTokenGuard(sharePercent: 100, minDelivered: 0)
        let summary = try await harness.run(at: "2026-11-21T20:00:00Z", sender: try await harness.sender(delivery))
        let rows = try await harness.db.strings(
            """
            SELECT d.token || ' ' || x.outcome || ' ' || coalesce(x.reason, '-') || ' ' || x.attempts || ' ' || CASE WHEN d.is_active THEN 1 ELSE 0 END || ' ' || coalesce(d.deactivation_reason, '-')
            FROM notification_deliveries x JOIN user_devices d ON d.id = x.device_id ORDER BY d.id
            """)
        #expect(
            rows == [
                "\(devices[0].0) token_dead Unregistered 1 0 Unregistered",
                "\(devices[1].0) token_dead BadDeviceToken 1 0 BadDeviceToken",
                "\(devices[2].0) delivered - 3 1 -",
                "dead-fcm token_dead UNREGISTERED 1 0 UNREGISTERED",
                "bad0-fcm token_dead INVALID_ARGUMENT (token) 1 0 INVALID_ARGUMENT (token)",
                "fa11-fcm delivered - 3 1 -",
                "\(devices[6].0) retry_later TooManyRequests 3 1 -",
                "\(devices[7].0) delivered - 1 1 -",
            ])
        #expect(summary.sent == 3)
        #expect(summary.failed == 4)
        #expect(summary.retry == 1)
        #expect(try await harness.db.strings("SELECT status FROM notification_logs WHERE user_id = 'u6'") == ["retry"])
        await harness.stop()
    }

    @Test(arguments: Backend.allCases) func retryAfterIsHonouredAndTheNextRunRetries(_ backend: Backend) async throws {
        let harness = try await DeliveryHarness.start(backend) {
            $0.rules = [SimulatorRule(prefix: "7407", kind: .throttle, retryAfter: 1)]
        }
        try await harness.addUser("throttled", devices: [(hexToken("7407", 1), .apns, .ios)])
        var delivery = harness.delivery()
        delivery.retry.maxAttempts = 2
        let clock = ManualRetryClock()
        delivery.retryClock = clock
        let first = try await harness.run(at: "2026-11-21T20:00:00Z", sender: try await harness.sender(delivery))
        #expect(clock.waits == [.seconds(1)], "the one retry waited the server's Retry-After")
        #expect(first.retry == 1)
        #expect(harness.simulator.stats.errors["TooManyRequests"] == 2)
        // The throttle lifts; the next run inside the window delivers.
        harness.simulator.setRules([])
        let second = try await harness.run(at: "2026-11-21T20:15:00Z", sender: try await harness.sender(delivery))
        #expect(second.takenOver == 1)
        #expect(second.sent == 1)
        #expect(harness.simulator.accepted().count == 1)
        await harness.stop()
    }

    /// One reminder, outside any run's log, to user u1's device `token`.
    static func reminder(to token: String, _ provider: Provider) -> OutgoingNotification {
        OutgoingNotification(
            logID: nil,
            device: Device(
                id: 1, userID: "u1", token: token, provider: provider, platform: provider == .apns ? .ios : .android,
                apnsEnvironment: provider == .apns ? .production : nil),
            type: .diaryReminder, period: "2026-11-21", locale: "en", messageIndex: 0, title: "t", body: "b",
            expiresAt: 4_000_000_000)
    }

    /// An FCM quota refusal pauses the whole provider until its Retry-After on the sender's clock, the one its
    /// retries wait on: the retry waits the 2 s, and the pause, over then, costs only the pacing's wait for the
    /// bucket to refill (it was kept on the process's clock: 2 s of sleeping, and a retry clock that knew
    /// nothing of it).
    @Test func aQuotaPauseIsKeptOnTheSendersClock() async throws {
        let harness = try await DeliveryHarness.start {
            $0.rules = [SimulatorRule(prefix: "fcm-quota", kind: .projectQuota, times: 1, retryAfter: 2)]
        }
        var delivery = harness.delivery(apns: false)
        delivery.fcm?.rate = ProviderRate(perSecond: 10, ramp: .zero)
        let clock = ManualRetryClock()
        delivery.retryClock = clock
        let sender = try await harness.sender(delivery)
        await sender.beginRun(finishBy: nil)
        let reports = await sender.send([Self.reminder(to: "fcm-quota-1", .fcm)])
        await sender.shutdown()
        #expect(reports.map(\.outcome) == [.delivered])
        #expect(reports.map(\.attempts) == [2])
        // The retry's wait, then one request's interval at 10 a second, as the bucket restarts empty.
        #expect(clock.waits == [.seconds(2), .milliseconds(100)], "\(clock.waits)")
        #expect(harness.simulator.stats.errors["QUOTA_EXCEEDED"] == 1)
        await harness.stop()
    }

    /// The retry budget counts on the sender's clock: with Retry-After 2 and a 5 s budget, the attempts at 0 s
    /// and 2 s are retried, and the one at 4 s is not (its retry would end past the budget), however many
    /// attempts remain. The test's clock only moves when the sender waits: no wall-clock time passes.
    @Test func theRetryBudgetEndsRetriesOnTheSendersClock() async throws {
        let harness = try await DeliveryHarness.start {
            $0.rules = [SimulatorRule(prefix: "7407", kind: .throttle, retryAfter: 2)]
        }
        var delivery = harness.delivery(fcm: false)
        delivery.retry.maxAttempts = 10
        delivery.retry.budget = .seconds(5)
        let clock = ManualRetryClock()
        delivery.retryClock = clock
        let sender = try await harness.sender(delivery)
        await sender.beginRun(finishBy: nil)
        let reports = await sender.send([Self.reminder(to: hexToken("7407", 1), .apns)])
        await sender.shutdown()
        #expect(reports.map(\.outcome) == [.retryLater])
        #expect(reports.map(\.attempts) == [3])
        #expect(clock.waits == [.seconds(2), .seconds(2)])
        #expect(harness.simulator.stats.errors["TooManyRequests"] == 3)
        await harness.stop()
    }

    /// The backoff doubles from `baseDelay` up to `maxDelay`, scaled by the jitter (clamped to 0.5…1.0); a
    /// Retry-After replaces it.
    @Test(
        arguments: [
            (1, nil, 1.0, 250), (2, nil, 1.0, 500), (3, nil, 1.0, 1_000), (3, nil, 0.5, 500), (8, nil, 1.0, 30_000),
            (20, nil, 0.75, 22_500), (1, nil, 0.1, 125), (1, nil, 3.0, 250), (4, 7, 0.5, 7_000), (1, 0, 1.0, 0),
        ] as [(Int, Int?, Double, Int64)])
    func theBackoffDoublesWithJitterUnlessTheServerSaysWhen(attempt: Int, retryAfter: Int?, jitter: Double, ms: Int64) {
        let delay = RetryPolicy().delay(attempt: attempt, retryAfter: retryAfter, jitter: jitter)
        let milliseconds =
            delay.components.seconds * 1_000 + Int64((Double(delay.components.attoseconds) / 1e15).rounded())
        #expect(milliseconds == ms)
    }

    @Test(arguments: Backend.allCases) func goAwayMidRunLosesAndDuplicatesNothing(_ backend: Backend) async throws {
        let harness = try await DeliveryHarness.start(backend) {
            $0.goAwayAfterStreams = 37
            $0.maxConcurrentStreams = 25
        }
        for i in 0..<300 {
            try await harness.addUser(
                "g\(i)", devices: [(hexToken("ab", i), .apns, .ios), ("fcm-\(i)", .fcm, .android)])
        }
        let sender = try await harness.sender()
        let summary = try await DiaryReminderRunner(store: harness.db.store, sender: sender, logger: quietLogger)
            .run(ReminderRunOptions(now: instant("2026-11-21T20:00:00Z")))
        #expect(summary.sent == 300)
        let accepted = harness.simulator.accepted()
        #expect(accepted.count == 600)
        #expect(Set(accepted.map(\.token)).count == 600)
        #expect(harness.simulator.stats.goAways >= 10)
        // Each connection the server sent GOAWAY on closed once its last stream was answered: with the sender
        // still up (a warm Lambda's), only the current connection per provider is open.
        var open = harness.simulator.openConnections
        for _ in 0..<50 where open > 2 {
            try await Task.sleep(for: .milliseconds(20))
            open = harness.simulator.openConnections
        }
        #expect(open <= 2, "\(open) connections open after \(harness.simulator.stats.connections) were made")
        await sender.shutdown()
        await harness.stop()
    }

    @Test(arguments: Backend.allCases) func consecutiveRunsShareOneProviderTokenAndOneAccessToken(_ backend: Backend)
        async throws
    {
        let harness = try await DeliveryHarness.start(backend)
        try await harness.addUser(
            "a", devices: [(hexToken("ab", 1), .apns, .ios), ("f-1", .fcm, .android)], time: "20:00")
        try await harness.addUser(
            "b", devices: [(hexToken("ab", 2), .apns, .ios), ("f-2", .fcm, .android)], time: "20:15")
        // Two runs, each with its own sender, as two cron processes would be.
        try await harness.run(at: "2026-11-21T20:00:00Z", sender: try await harness.sender())
        try await harness.run(at: "2026-11-21T20:15:00Z", sender: try await harness.sender())
        #expect(harness.simulator.accepted().count == 4)
        #expect(harness.simulator.stats.apnsProviderTokens == 1)
        #expect(harness.simulator.stats.oauthExchanges == 1)
        await harness.stop()
    }

    @Test func providerTokensAreRenewedBetweenTwentyAndFiftyMinutes() async throws {
        let clock = ManualClock(start: Int64(Date().timeIntervalSince1970))
        let harness = try await DeliveryHarness.start { $0.clock = { clock.now } }
        var delivery = harness.delivery(fcm: false)
        delivery.credentialClock = { clock.now }
        for (minute, expectedMints) in [(0, 1), (19, 1), (39, 1), (41, 2), (60, 2), (82, 3)] {
            clock.set(clock.start + Int64(minute) * 60)
            let user = "m\(minute)"
            try await harness.addUser(user, devices: [(hexToken("ab", minute), .apns, .ios)], time: "20:00")
            try await harness.run(
                at: "2026-11-\(10 + minute / 10)T20:00:00Z", sender: try await harness.sender(delivery))
            #expect(harness.simulator.stats.apnsProviderTokens == expectedMints, "after \(minute) minutes")
        }
        #expect(harness.simulator.stats.errors.isEmpty)
        await harness.stop()
    }

    @Test(arguments: Backend.allCases) func concurrentSendersMintOneToken(_ backend: Backend) async throws {
        let harness = try await DeliveryHarness.start(backend)
        // Four "hosts": each its own store connection(s), one database.
        var senders: [PushSender] = []
        for _ in 0..<4 {
            senders.append(
                try await PushSender(
                    configuration: harness.delivery(), credentials: try await harness.db.reopen(),
                    logger: quietLogger))
        }
        let notifications = (0..<4).map { i in
            OutgoingNotification(
                logID: nil,
                device: Device(
                    id: Int64(i), userID: "u", token: hexToken("ab", i), provider: .apns,
                    platform: .ios, apnsEnvironment: .production),
                type: .diaryReminder, period: "2026-11-21", locale: "en", messageIndex: 0, title: "t",
                body: "b", expiresAt: Int64(Date().timeIntervalSince1970) + 3600)
        }
        await withTaskGroup(of: Void.self) { group in
            for (sender, notification) in zip(senders, notifications) {
                group.addTask { _ = await sender.send([notification]) }
            }
        }
        for sender in senders { await sender.shutdown() }
        #expect(harness.simulator.accepted().count == 4)
        #expect(harness.simulator.stats.apnsProviderTokens == 1)
        await harness.stop()
    }

    /// The run sends one page while it claims the next, so sends overlap: they share one connection per
    /// endpoint, opened once.
    @Test func overlappingSendsShareOneConnection() async throws {
        let harness = try await DeliveryHarness.start(.sqlite)
        let sender = try await harness.sender()
        let batches = (0..<4).map { batch in
            (0..<50).map { i in
                OutgoingNotification(
                    logID: nil,
                    device: Device(
                        id: Int64(batch * 100 + i), userID: "u\(batch)-\(i)",
                        token: hexToken("c\(batch)", i), provider: .apns, platform: .ios,
                        apnsEnvironment: .production),
                    type: .diaryReminder, period: "2026-11-21", locale: "en", messageIndex: 0, title: "t",
                    body: "b", expiresAt: Int64(Date().timeIntervalSince1970) + 3600)
            }
        }
        let outcomes = await withTaskGroup(of: [DeliveryReport].self) { group in
            for batch in batches { group.addTask { await sender.send(batch) } }
            return await group.reduce(into: [DeliveryOutcome]()) { $0 += $1.map(\.outcome) }
        }
        #expect(outcomes.count == 200 && outcomes.allSatisfy { $0 == .delivered })
        #expect(harness.simulator.stats.connections == 1)
        #expect(harness.simulator.accepted().count == 200)
        await sender.shutdown()
        await harness.stop()
    }

    @Test func aDeviceThatReRegisteredAfterThe410IsKept() async throws {
        let registered = instant("2026-11-21T12:00:00Z")
        let harness = try await DeliveryHarness.start {
            $0.rules = [
                SimulatorRule(prefix: "dead0", kind: .dead, timestampMs: (registered - 3600) * 1000),
                SimulatorRule(prefix: "dead1", kind: .dead, timestampMs: (registered + 3600) * 1000),
            ]
        }
        try await harness.addUser("back", devices: [(hexToken("dead0", 1), .apns, .ios)], registeredAt: registered)
        try await harness.addUser("gone", devices: [(hexToken("dead1", 2), .apns, .ios)], registeredAt: registered)
        try await harness.run(at: "2026-11-21T20:00:00Z", sender: try await harness.sender())
        #expect(
            try await harness.db.strings("SELECT user_id || ' ' || is_active FROM user_devices ORDER BY user_id") == [
                "back 1", "gone 0",
            ])
        #expect(
            try await harness.db.count("SELECT count(*) FROM notification_deliveries WHERE outcome = 'token_dead'") == 2
        )
        await harness.stop()
    }

    @Test func refusedCredentialsAreRefreshedOnceThenTheProviderStopsAndNoDeviceIsDeactivated() async throws {
        // The simulator's clock runs two hours ahead: every provider token looks expired to it.
        let harness = try await DeliveryHarness.start { $0.clock = { Int64(Date().timeIntervalSince1970) + 7200 } }
        for i in 0..<5 { try await harness.addUser("c\(i)", devices: [(hexToken("ab", i), .apns, .ios)]) }
        try await harness.addUser("android", devices: [("fcm-ok", .fcm, .android)])
        let logs = CapturedLogs()
        let summary = try await harness.run(
            at: "2026-11-21T20:00:00Z", sender: try await harness.sender(logger: logs.logger))
        // FCM's OAuth assertion is also "from the past" for this simulator: its user is held back too.
        #expect(summary.outcomes[.credentials] == 6)
        #expect(summary.retry == 6)
        #expect(summary.sent == 0)
        #expect(harness.simulator.stats.errors["ExpiredProviderToken"] == 10)  // first try and one refresh
        #expect(harness.simulator.stats.apnsProviderTokens == 0)
        #expect(try await harness.db.count("SELECT count(*) FROM user_devices WHERE NOT is_active") == 0)
        #expect(logs.lines.contains { $0.contains("stopped sending to this provider") })
        await harness.stop()
    }

    @Test(arguments: Backend.allCases) func thirdPartyAuthErrorsNeverDeactivate(_ backend: Backend) async throws {
        let harness = try await DeliveryHarness.start(backend)
        try await harness.addUser("ios-via-firebase", devices: [("a0th-token", .fcm, .ios)])
        let summary = try await harness.run(at: "2026-11-21T20:00:00Z", sender: try await harness.sender())
        #expect(summary.outcomes == [.credentials: 1])
        #expect(try await harness.db.count("SELECT count(*) FROM user_devices WHERE is_active") == 1)
        #expect(
            try await harness.db.strings("SELECT reason FROM notification_deliveries") == ["THIRD_PARTY_AUTH_ERROR"])
        await harness.stop()
    }

    @Test(arguments: Backend.allCases) func noSecretAndNoFullTokenInAnyLogLine(_ backend: Backend) async throws {
        let harness = try await DeliveryHarness.start(backend)
        let tokens = [hexToken("dead", 1), hexToken("bad0", 2), hexToken("fa11", 3), hexToken("cafe", 4)]
        for (i, token) in tokens.enumerated() { try await harness.addUser("s\(i)", devices: [(token, .apns, .ios)]) }
        try await harness.addUser(
            "f", devices: [("dead-fcm-token-0123456789", .fcm, .android), ("a0th-fcm-token-0123456789", .fcm, .ios)])
        let logs = CapturedLogs()
        try await harness.run(
            at: "2026-11-21T20:00:00Z", sender: try await harness.sender(logger: logs.logger), logger: logs.logger)
        let secrets = try await harness.db.strings("SELECT token FROM provider_credentials")
        #expect(secrets.count == 2)
        let keyLines = try String(contentsOfFile: harness.simulator.credentials.apnsKeyFile, encoding: .utf8)
            .split(separator: "\n").filter { !$0.hasPrefix("-----") }.map(String.init)
        let forbidden =
            tokens + ["dead-fcm-token-0123456789", "a0th-fcm-token-0123456789"] + secrets + keyLines + ["PRIVATE KEY"]
        #expect(!logs.lines.isEmpty)
        // Issue 24: the trouble lines (the FCM project's APNs key refused: THIRD_PARTY_AUTH_ERROR) are among those checked.
        #expect(
            logs.lines.contains { $0.contains("FCM refused our credentials") && $0.contains("advice") }, "\(logs.lines)"
        )
        for line in logs.lines {
            for secret in forbidden { #expect(!line.contains(secret), "leaked in: \(line)") }
        }
        await harness.stop()
    }

    @Test(arguments: Backend.allCases) func aProviderWithoutCredentialsIsSkippedBeforeClaiming(_ backend: Backend)
        async throws
    {
        let harness = try await DeliveryHarness.start(backend)
        try await harness.addUser("apple-only", devices: [(hexToken("ab", 1), .apns, .ios)])
        try await harness.addUser("both", devices: [(hexToken("ab", 2), .apns, .ios), ("fcm-2", .fcm, .android)])
        let summary = try await harness.run(
            at: "2026-11-21T20:00:00Z", sender: try await harness.sender(harness.delivery(apns: false)))
        #expect(summary.skipped == [.noConfiguredProvider: 1])
        #expect(summary.sent == 1)
        #expect(try await harness.db.strings("SELECT user_id FROM notification_logs") == ["both"])
        #expect(harness.simulator.accepted().map(\.token) == ["fcm-2"])
        await harness.stop()
    }

    @Test(arguments: Backend.allCases) func validateOnlyChecksWithFCMAndDeliversNothing(_ backend: Backend) async throws
    {
        let harness = try await DeliveryHarness.start(backend)
        try await harness.addUser("v1", devices: [("fcm-live", .fcm, .android), ("dead-fcm", .fcm, .android)])
        var delivery = harness.delivery(apns: false)
        delivery.fcm?.validateOnly = true
        let lines = LineBuffer()
        let sender = ReportingSender(inner: try await harness.sender(delivery), sink: lines, json: false)
        let summary = try await DiaryReminderRunner(store: harness.db.store, sender: sender, logger: quietLogger)
            .run(ReminderRunOptions(now: instant("2026-11-21T20:00:00Z"), dryRun: true))
        await sender.shutdown()
        #expect(summary.outcomes == [.delivered: 1, .tokenDead: 1])
        // Issue 24: nothing was claimed or sent, and the summary says so.
        #expect(
            summary.text.contains("would_claim=1 would_send=") && !summary.text.contains(" claimed=")
                && !summary.text.contains(" sent="),
            "\(summary.text)")
        #expect(summary.json.contains(#""would_claim":1"#) && !summary.json.contains(#""claimed":"#), "\(summary.json)")
        // FCM's answers are real ones, and stay in the JSON: only the dry-run channel's own counts are left out.
        #expect(
            summary.json.contains(#""outcomes":{"delivered":1,"token_dead":1}"#)
                && summary.json.contains(#""outcomes_by_provider":{"fcm":{"delivered":1,"token_dead":1}}"#),
            "\(summary.json)")
        #expect(harness.simulator.stats.validated == 1)
        #expect(harness.simulator.accepted().isEmpty)
        #expect(lines.lines.count == 2)
        #expect(try await harness.db.count("SELECT count(*) FROM notification_logs") == 0)
        #expect(try await harness.db.count("SELECT count(*) FROM user_devices WHERE NOT is_active") == 0)
        await harness.stop()
    }

    @Test(arguments: Backend.allCases) func inFlightStreamsStayWithinTheServerLimit(_ backend: Backend) async throws {
        let harness = try await DeliveryHarness.start(backend) { $0.maxConcurrentStreams = 3 }
        for i in 0..<200 { try await harness.addUser("l\(i)", devices: [("limit-\(i)", .fcm, .android)]) }
        let summary = try await harness.run(at: "2026-11-21T20:00:00Z", sender: try await harness.sender())
        #expect(summary.sent == 200)
        #expect(harness.simulator.stats.errors.isEmpty)
        await harness.stop()
    }

    /// Each request's DATA frame leaves right behind its HEADERS, so requests end at the server in the order
    /// they were written: NIOHTTP2 sends DATA frames flushed together in the order of a `Set`, and every
    /// stream answered out of order costs it a shift of its stream maps.
    ///
    /// Unpaced: FCM's pacing sends the slices it grants from tasks of their own, which reach the connection in the
    /// order the scheduler runs them (on a loaded machine a slice of six came in behind the next one).
    @Test func requestsEndAtTheServerInTheOrderTheyWereWritten() async throws {
        let harness = try await DeliveryHarness.start()
        let tokens = (0..<64).map { String(format: "order-%02d", $0) }
        for (i, token) in tokens.enumerated() {
            try await harness.addUser(String(format: "o%02d", i), devices: [(token, .fcm, .android)])
        }
        var delivery = harness.delivery()
        delivery.fcm?.rate = nil
        let summary = try await harness.run(at: "2026-11-21T20:00:00Z", sender: try await harness.sender(delivery))
        #expect(summary.sent == 64)
        #expect(harness.simulator.accepted().map(\.token) == tokens)
        await harness.stop()
    }

    /// The system's roots come from its hashed directory when it has one (read per handshake, not parsed
    /// whole in every process); only `c_rehash` names count as such a directory's certificates.
    @Test func systemRootsAreReadFromTheHashedDirectory() throws {
        for name in ["4042bcee.0", "002c0b4f.1", "ffffffff.12"] {
            #expect(TLSSettings.isHashedCertificateName(name), "\(name)")
        }
        for name in [
            "ca-certificates.crt", "4042bcee", "4042bcee.", "4042BCEE.0", "4042bce.0", "4042bcee.0.pem", "g042bcee.0",
            "4042bcee.x",
        ] {
            #expect(!TLSSettings.isHashedCertificateName(name), "\(name)")
        }
        let names = (try? FileManager.default.contentsOfDirectory(atPath: "/etc/ssl/certs")) ?? []
        #expect(
            TLSSettings.hashedSystemCADirectory
                == (names.contains(where: TLSSettings.isHashedCertificateName) ? "/etc/ssl/certs" : nil))
        _ = try TLSSettings().makeContext()
    }

    /// The simulator serves streams without a channel each, so it returns flow-control credit itself: a body
    /// larger than the initial stream and connection windows (64 KiB) must still arrive whole and be answered.
    @Test func theSimulatorReadsTheSchemeAndThePathByteWise() {
        #expect(SimulatorState.bearerToken("bearer a.b.c") == "a.b.c")
        #expect(SimulatorState.bearerToken("Bearer a.b.c") == "a.b.c")
        #expect(SimulatorState.bearerToken("BEARER a") == "a")
        #expect(SimulatorState.bearerToken("Basic abc") == nil)
        #expect(SimulatorState.bearerToken("bearer") == nil)
        #expect(SimulatorState.bearerToken("bearer\u{0}abc") == nil)
        #expect(SimulatorState.fcmProject("/v1/projects/demo-project/messages:send") == "demo-project")
        #expect(SimulatorState.fcmProject("/v1/projects/messages:send") == nil)
        #expect(SimulatorState.fcmProject("/v1/projects/p/messages:sendx") == nil)
        #expect(SimulatorState.fcmProject("/v2/projects/p/messages:send") == nil)
        #expect("0123456789abcdefABCDEF".utf8.allSatisfy(SimulatorState.isHexDigit))
        #expect(!"gG -".utf8.contains(where: SimulatorState.isHexDigit))
    }

    /// A CA file that cannot be read says why (it said "cannot read the CA file …" and no more).
    @Test func anUnreadableCAFileSaysWhy() throws {
        for (path, reason) in [("/nonexistent.pem", "No such file or directory"), ("/", "Is a directory")] {
            #expect(throws: JobError.noInput("cannot read the CA file \(path): \(reason)")) {
                try TLSSettings(additionalCAFile: path).makeContext()
            }
        }
    }

    @Test func theSimulatorReadsBodiesLargerThanTheFlowControlWindows() async throws {
        let harness = try await DeliveryHarness.start()
        let tls = try TLSSettings(additionalCAFile: harness.simulator.credentials.caFile).makeContext()
        let connection = try await HTTP2Connection.connect(
            to: Endpoint(host: "127.0.0.1", port: harness.simulator.port),
            tls: tls, options: .init(requestTimeout: .seconds(20)))
        let headers: HPACKHeaders = [
            ":method": "POST", ":scheme": "https", ":authority": "127.0.0.1",
            ":path": "/3/device/\(hexToken("b1", 1))",
        ]
        let requests = (0..<3).map { _ in
            HTTP2Request(headers: headers, body: ByteBuffer(repeating: UInt8(ascii: "x"), count: 300_000))
        }
        let results = await connection.send(requests)
        for result in results {
            let response = try result.get()
            #expect(response.status == 403)
            #expect(String(buffer: response.body) == #"{"reason":"MissingProviderToken"}"#)
        }
        #expect(harness.simulator.stats.requests == 3)
        await connection.close()
        await harness.stop()
    }
}

@Suite struct ProviderRulesTests {
    func apns(_ status: Int, _ body: String, headers: HPACKHeaders = [:]) -> ProviderVerdict {
        APNs.classify(status: status, headers: headers, body: ByteBuffer(string: body))
    }

    func fcm(_ status: Int, code: String?, message: String = "", headers: HPACKHeaders = [:]) -> ProviderVerdict {
        let details =
            code.map {
                #","details":[{"@type":"type.googleapis.com/google.firebase.fcm.v1.FcmError","errorCode":"\#($0)"}]"#
            } ?? ""
        return FCM.classify(
            status: status, headers: headers,
            body: ByteBuffer(string: #"{"error":{"code":\#(status),"message":"\#(message)","status":"X"\#(details)}}"#))
    }

    @Test func apnsAnswers() {
        #expect(apns(200, "", headers: ["apns-id": "abc"]) == ProviderVerdict(.delivered, providerMessageID: "abc"))
        #expect(
            apns(410, #"{"reason":"Unregistered","timestamp":1700000000000}"#)
                == ProviderVerdict(.tokenDead, reason: "Unregistered", tokenInvalidSince: 1_700_000_000))
        #expect(apns(410, #"{"reason":"ExpiredToken"}"#).outcome == .tokenDead)
        #expect(apns(400, #"{"reason":"BadDeviceToken"}"#).outcome == .tokenDead)
        #expect(apns(400, #"{"reason":"DeviceTokenNotForTopic"}"#).outcome == .tokenDead)
        #expect(
            apns(429, #"{"reason":"TooManyRequests"}"#, headers: ["retry-after": "7"])
                == ProviderVerdict(.retryLater, reason: "TooManyRequests", retryAfter: 7, scope: .device))
        // The provider's own transient answers count towards an outage; a throttle of one device never does.
        #expect(apns(503, #"{"reason":"ServiceUnavailable"}"#).scope == .provider)
        #expect(apns(429, #"{"reason":"SomethingNew"}"#).scope == .provider)
        #expect(apns(500, #"{"reason":"InternalServerError"}"#).outcome == .retryLater)
        #expect(apns(503, #"{"reason":"ServiceUnavailable"}"#).outcome == .retryLater)
        #expect(apns(503, #"{"reason":"Shutdown"}"#).outcome == .retryLater)
        for reason in [
            "ExpiredProviderToken", "InvalidProviderToken", "MissingProviderToken", "BadEnvironmentKeyIdInToken",
        ] {
            #expect(apns(403, #"{"reason":"\#(reason)"}"#).outcome == .credentials, "\(reason)")
        }
        #expect(apns(429, #"{"reason":"TooManyProviderTokenUpdates"}"#).outcome == .credentials)
        for (status, reason) in [
            (403, "Forbidden"), (413, "PayloadTooLarge"), (400, "BadCollapseId"), (400, "BadExpirationDate"),
            (400, "BadPriority"), (400, "BadTopic"), (400, "MissingTopic"), (400, "TopicDisallowed"),
            (400, "PayloadEmpty"),
        ] {
            #expect(apns(status, #"{"reason":"\#(reason)"}"#).outcome == .rejected, "\(reason)")
        }
        #expect(apns(502, "<html>").outcome == .retryLater)
        #expect(apns(418, "").outcome == .rejected)
    }

    @Test func fcmAnswers() {
        #expect(
            FCM.classify(status: 200, headers: [:], body: ByteBuffer(string: #"{"name":"projects/p/messages/1"}"#))
                == ProviderVerdict(.delivered, providerMessageID: "projects/p/messages/1"))
        #expect(fcm(404, code: "UNREGISTERED").outcome == .tokenDead)
        #expect(fcm(403, code: "SENDER_ID_MISMATCH").outcome == .tokenDead)
        #expect(
            fcm(400, code: "INVALID_ARGUMENT", message: "The registration token is not a valid FCM registration token")
                .outcome == .tokenDead)
        #expect(
            fcm(400, code: "INVALID_ARGUMENT", message: "Invalid value at 'message.android.ttl'").outcome == .rejected)
        #expect(
            fcm(429, code: "QUOTA_EXCEEDED")
                == ProviderVerdict(
                    .retryLater, reason: "QUOTA_EXCEEDED", retryAfter: 60, pausesProvider: true, scope: .provider))
        #expect(fcm(429, code: nil).pausesProvider)  // any 429 from FCM is about the project
        #expect(!fcm(503, code: "UNAVAILABLE").pausesProvider)
        #expect(fcm(429, code: "QUOTA_EXCEEDED", headers: ["retry-after": "5"]).retryAfter == 5)
        #expect(fcm(503, code: "UNAVAILABLE").outcome == .retryLater)
        #expect(fcm(500, code: "INTERNAL").outcome == .retryLater)
        #expect(fcm(401, code: "THIRD_PARTY_AUTH_ERROR").outcome == .credentials)
        #expect(fcm(401, code: nil).outcome == .credentials)
        #expect(fcm(403, code: nil).outcome == .rejected)
    }

    @Test func oversizedPayloadsAreShortenedAtAGraphemeBoundary() throws {
        let body = String(repeating: "👩‍👩‍👧‍👦 family ", count: 400)
        let notification = OutgoingNotification(
            logID: nil,
            device: Device(
                id: 1, userID: "u", token: "ab", provider: .apns, platform: .ios, apnsEnvironment: .production),
            type: .diaryReminder, period: "2026-11-21", locale: "en", messageIndex: 0, title: "Title", body: body,
            expiresAt: 0)
        let data = APNs.payload(for: notification, links: DeepLinks(), badge: .number(1))
        #expect(data.count <= 4096)
        #expect(data.count > 3800)
        let object = try #require(try JSONSerialization.jsonObject(with: data) as? [String: Any])
        let alert = try #require((object["aps"] as? [String: Any])?["alert"] as? [String: Any])
        let shortened = try #require(alert["body"] as? String)
        #expect(shortened.hasSuffix("…"))
        #expect(body.hasPrefix(String(shortened.dropLast()).trimmingCharacters(in: .whitespaces)))
        #expect(shortened.unicodeScalars.last != "\u{200D}")
        let fcmData = FCM.message(
            for: notification, configuration: FCMConfiguration(serviceAccountFile: ""), links: DeepLinks(),
            badge: .number(1), now: 0)
        #expect(fcmData.count <= 4096 + 200)
        let small = APNs.payload(
            for: OutgoingNotification(
                logID: nil, device: notification.device, type: .diaryReminder,
                period: "p", locale: "en", messageIndex: 0, title: "t", body: "short",
                expiresAt: 0), links: DeepLinks(), badge: .number(1))
        #expect(String(decoding: small, as: UTF8.self).contains(#""body":"short""#))
    }

    /// Android silences a notification channel as a whole: quota warnings go to a channel of their own when one
    /// is set, so that a person who silences the reminders still hears that their diary is full.
    /// An app that shows no badge, or sets it itself, leaves it alone (`--ios-badge none`); another clears it
    /// (`0`). Every iOS notification carried `badge: 1`, through APNs and through FCM alike, and the icon kept a
    /// "1" until the app reset it.
    @Test func theIOSBadgeIsWhatTheSettingSays() async throws {
        let harness = try await DeliveryHarness.start(.sqlite)
        let apnsToken = hexToken("ba", 1)
        try await harness.addUser(
            "u", devices: [(apnsToken, .apns, .ios), ("fire-ios-1", .fcm, .ios), ("droid-1", .fcm, .android)],
            zone: "Asia/Tokyo", time: "21:00")
        for (day, badge, expected) in [
            ("2026-11-21", AppBadge.unchanged, nil as Int?), ("2026-11-22", .number(0), 0),
            ("2026-11-23", .number(7), 7),
        ] {
            var delivery = harness.delivery()
            delivery.badge = badge
            let summary = try await harness.run(at: "\(day)T12:00:00Z", sender: try await harness.sender(delivery))
            #expect(summary.outcomes == [.delivered: 3], "\(day)")
            let sent = Dictionary(
                uniqueKeysWithValues: harness.simulator.accepted().filter { $0.payload.contains(day) }.map {
                    ($0.token, $0)
                })
            func object(_ token: String) throws -> [String: Any] {
                let payload = try #require(sent[token]?.payload, "\(day) \(token)")
                return try #require(try JSONSerialization.jsonObject(with: Data(payload.utf8)) as? [String: Any])
            }
            let apns = try #require(try object(apnsToken)["aps"] as? [String: Any])
            let message = try #require(try object("fire-ios-1")["message"] as? [String: Any])
            let fcm = try #require(
                ((message["apns"] as? [String: Any])?["payload"] as? [String: Any])?["aps"] as? [String: Any])
            for aps in [apns, fcm] {
                #expect(aps["badge"] as? Int == expected, "\(day)")
                #expect(aps.keys.contains("badge") == (expected != nil), "\(day)")
                #expect(aps["sound"] as? String == "default", "\(day)")
            }
            #expect(try object("droid-1")["message"].map { !"\($0)".contains("badge") } == true)
        }
        await harness.stop()
    }

    @Test func quotaWarningsGoToTheirOwnAndroidChannelWhenOneIsSet() throws {
        func channel(_ type: NotificationType, _ configuration: FCMConfiguration) throws -> String? {
            let notification = OutgoingNotification(
                logID: nil,
                device: Device(
                    id: 1, userID: "u", token: "droid", provider: .fcm, platform: .android, apnsEnvironment: nil),
                type: type, period: type == .diaryReminder ? "2026-11-21" : "2026-11", locale: "en",
                messageIndex: 0, title: "t", body: "b", expiresAt: 100)
            let data = FCM.message(
                for: notification, configuration: configuration, links: DeepLinks(), badge: .number(1), now: 0)
            let object = try #require(try JSONSerialization.jsonObject(with: data) as? [String: Any])
            let message = try #require(object["message"] as? [String: Any])
            let android = try #require(message["android"] as? [String: Any])
            return (android["notification"] as? [String: Any])?["channel_id"] as? String
        }
        var configuration = FCMConfiguration(serviceAccountFile: "")
        for type in NotificationType.allCases { #expect(try channel(type, configuration) == "diary_reminders") }
        configuration.androidChannelID = "reminders"
        configuration.androidWarningChannelID = "quota"
        #expect(try channel(.diaryReminder, configuration) == "reminders")
        #expect(try channel(.contentLimit90, configuration) == "quota")
        #expect(try channel(.contentLimit100, configuration) == "quota")
        configuration.androidWarningChannelID = nil
        #expect(try channel(.contentLimit100, configuration) == "reminders")
    }

    /// Only what repeats goes into HPACK's dynamic table: the path (the device token) and the length are sent literally, so the
    /// provider token and the other repeating headers stay indexed however many devices a run reaches.
    @Test func theAPNsPathStaysOutOfTheHPACKTable() {
        let notification = OutgoingNotification(
            logID: nil,
            device: Device(
                id: 1, userID: "u", token: "ab12", provider: .apns, platform: .ios, apnsEnvironment: .production),
            type: .diaryReminder, period: "2026-11-21", locale: "en", messageIndex: 0, title: "Title", body: "Body",
            expiresAt: 7)
        let request = APNs.request(
            for: notification, topic: "app.example", authority: "api.push.apple.com",
            authorization: APNs.authorization(jwt: "j.w.t"), links: DeepLinks(), badge: .number(1))
        let indexing = Dictionary(uniqueKeysWithValues: request.headers.map { ($0.name, $0.indexable) })
        #expect(indexing[":path"] == .nonIndexable)
        #expect(indexing["content-length"] == .nonIndexable)
        #expect(indexing["authorization"] == .indexable)
        #expect(request.headers.first(name: "authorization") == "bearer j.w.t")
        #expect(request.headers.first(name: ":path") == "/3/device/ab12")
        #expect(
            request.headers.map(\.name) == [
                ":method", ":scheme", ":path", ":authority", "authorization", "apns-push-type",
                "apns-priority", "apns-topic", "apns-expiration", "apns-collapse-id",
                "content-type", "content-length",
            ])
    }
}

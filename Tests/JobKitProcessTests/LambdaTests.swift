import Foundation
import JobCLI
import JobKitTestSupport
import LambdaRuntimeSimulator
import NIOConcurrencyHelpers
import PushSimulator
import Testing

@testable import JobKit
@testable import JobKitDelivery

/// The jobs as Lambda custom runtimes, against a local Runtime API: several invocations per execution
/// environment, warm reuse, errors, deadlines.
@Suite struct LambdaTests {
    /// The wall clock the runtime loop reads, set by the test before each invocation.
    final class WallClock: Sendable {
        private let box = NIOLockedValueBox<Int64>(0)
        func set(_ text: String) { box.withLockedValue { $0 = instant(text) * 1000 } }
        var ms: Int64 { box.withLockedValue { $0 } }
    }

    struct Fields: Decodable {
        let claimed: Int
        let sent: Int
        let notifications: Int
        let stoppedEarly: Bool
        let notRun: String?
        let runId: String
    }

    static func fields(_ outcome: InvocationOutcome?) throws -> Fields {
        let body = try #require(outcome?.response, "expected a response, got \(String(describing: outcome))")
        let decoder = JSONDecoder()
        decoder.keyDecodingStrategy = .convertFromSnakeCase
        return try decoder.decode(Fields.self, from: Data(body.utf8))
    }

    static func scheduled(_ time: String, detail: String = "{}") -> String {
        #"{"version":"0","id":"53dc4d37-cffa-4f76-80c9-8b7d4a4d2eaa","detail-type":"Scheduled Event","source":"aws.events","account":"123456789012","time":"\#(time)","region":"eu-west-1","resources":["arn:aws:events:eu-west-1:123456789012:rule/diary-reminder"],"detail":\#(detail)}"#
    }

    @Test(arguments: Backend.allCases) func diaryReminderServesManyInvocationsOnWarmConnectionsAndCredentials(
        _ backend: Backend
    ) async throws {
        let harness = try await DeliveryHarness.start(backend)
        for i in 0..<4 {
            try await harness.addUser(
                "eight-\(i)", devices: [(hexToken("a1", i), .apns, .ios), ("droid-\(i)", .fcm, .android)],
                time: "20:00")
            try await harness.addUser("nine-\(i)", devices: [(hexToken("b2", i), .apns, .ios)], time: "21:00")
        }
        let sender = try await harness.sender()
        let handler = DiaryReminderHandler(
            runner: DiaryReminderRunner(store: harness.db.store, sender: sender, logger: quietLogger),
            settings: .init())
        let api = try await LambdaRuntimeSimulator.start()
        let wall = WallClock()
        let client = try await RuntimeAPIClient.connect(api.address)
        let loop = Task {
            try await LambdaRuntime.serve(
                handler, client: client, logger: quietLogger, wallClockMs: { wall.ms }, limit: 6,
                exportsTraceID: false)
        }

        // 1. On time, a five-minute invocation: everyone due at 20:00 is reminded on every device.
        wall.set("2026-11-21T20:00:03Z")
        let first = try Self.fields(
            await api.invoke(Self.scheduled("2026-11-21T20:00:00Z"), deadlineMs: wall.ms + 300_000))
        #expect(first.claimed == 4 && first.sent == 4 && first.notifications == 8 && !first.stoppedEarly)
        let warm = harness.simulator.stats

        // 2. EventBridge retries the same event: the log's claims make it a no-op.
        let retried = try Self.fields(
            await api.invoke(Self.scheduled("2026-11-21T20:00:00Z"), deadlineMs: wall.ms + 300_000))
        #expect(retried.claimed == 0 && retried.notifications == 0)

        // 3. A malformed event is the invocation's error, typed and without the payload.
        let bad = await api.invoke(
            #"{"detail-type":"Scheduled Event","secret":"s3cr3t"}"#, deadlineMs: wall.ms + 300_000)
        guard case .error(let type, let message, let header)? = bad else {
            Issue.record("expected an error, got \(String(describing: bad))")
            return
        }
        #expect(type == "JobError.dataError" && header == "JobError.dataError")
        #expect(message.contains("missing \"time\"") && !message.contains("s3cr3t"))

        // 4. 21:00 with 5 s left before the deadline (less than the 15 s reserve): nothing is claimed, and the
        // invocation fails as a temporary failure, with its summary, since it left due users to the next run.
        wall.set("2026-11-21T21:00:02Z")
        let lateOutcome = await api.invoke(Self.scheduled("2026-11-21T21:00:00Z"), deadlineMs: wall.ms + 5_000)
        guard case .error(let lateType, let lateMessage, _)? = lateOutcome,
            let lateSummary = lateMessage.range(of: "summary: ").map({ String(lateMessage[$0.upperBound...]) })
        else {
            Issue.record("expected an error with the summary, got \(String(describing: lateOutcome))")
            return
        }
        #expect(lateType == "JobError.tempFailure", "\(lateMessage)")
        let late = try Self.fields(.response(lateSummary))
        #expect(late.stoppedEarly && late.claimed == 0 && late.notifications == 0)
        #expect(
            try await harness.db.count(
                "SELECT count(*) FROM notification_logs WHERE period_key = '2026-11-21' AND user_id LIKE 'nine-%'") == 0
        )

        // 5. The next invocation, with time to spare, takes them all.
        wall.set("2026-11-21T21:15:01Z")
        let next = try Self.fields(
            await api.invoke(Self.scheduled("2026-11-21T21:15:00Z"), deadlineMs: wall.ms + 300_000))
        #expect(next.claimed == 4 && next.sent == 4 && !next.stoppedEarly)

        // 6. An event retried two hours after its time would remind people at an hour they did not choose.
        wall.set("2026-11-21T23:15:00Z")
        let stale = try Self.fields(
            await api.invoke(Self.scheduled("2026-11-21T21:15:00Z"), deadlineMs: wall.ms + 300_000))
        #expect(stale.notRun?.hasPrefix("stale event") == true && stale.claimed == 0)

        try await loop.value
        // Warm: the later invocations opened no connection and minted no credential.
        let stats = harness.simulator.stats
        #expect(stats.connections == warm.connections)
        #expect(stats.apnsProviderTokens == 1 && warm.apnsProviderTokens == 1)
        #expect(stats.oauthExchanges == 1 && warm.oauthExchanges == 1)
        #expect(harness.simulator.accepted().count == 12)
        #expect(try await harness.db.count("SELECT count(*) FROM notification_logs WHERE status = 'sent'") == 8)
        await sender.shutdown()
        await client.close()
        await api.stop()
        await harness.stop()
    }

    @Test(arguments: Backend.allCases) func hookServesWritesAndReportsAnUnknownUserAsAnError(_ backend: Backend)
        async throws
    {
        let db = try await TemporaryDatabase(backend)
        try await db.store.addUser("writer", zone: "Europe/Paris")
        let outbox = db.directory.appendingPathComponent("outbox.jsonl").path
        let senders = LazySender { () async throws(JobError) -> any Sender in try OutboxSender(path: outbox) }
        let hook = ContentLimitHook(store: db.store, logger: quietLogger) { () async throws(JobError) -> any Sender in
            try await senders.get()
        }
        let handler = ContentLimitHookHandler(hook: hook, senders: senders)
        let api = try await LambdaRuntimeSimulator.start()
        let wall = WallClock()
        wall.set("2026-11-21T12:00:00Z")
        let client = try await RuntimeAPIClient.connect(api.address)
        let loop = Task {
            try await LambdaRuntime.serve(
                handler, client: client, logger: quietLogger, wallClockMs: { wall.ms }, limit: 4,
                exportsTraceID: false)
        }
        let deadline = wall.ms + 3_000
        let quiet = try #require(
            await api.invoke(#"{"user_id":"writer","used":10,"limit":100}"#, deadlineMs: deadline)?.response)
        #expect(quiet.contains(#""action":"none""#) && quiet.contains(#""reason":"below 90 %""#))
        let warned = try #require(
            await api.invoke(#"{"user_id":"writer","used":90,"limit":100}"#, deadlineMs: deadline)?.response)
        #expect(warned.contains(#""action":"sent""#) && warned.contains(#""period":"2026-11""#))
        let again = try #require(
            await api.invoke(#"{"user_id":"writer","used":91,"limit":100}"#, deadlineMs: deadline)?.response)
        #expect(again.contains("already warned this period"))
        let unknown = await api.invoke(#"{"user_id":"nobody","used":95,"limit":100}"#, deadlineMs: deadline)
        #expect(
            unknown == .error(type: "JobError.dataError", message: "unknown user nobody", header: "JobError.dataError"))
        try await loop.value
        let lines = try String(contentsOfFile: outbox, encoding: .utf8).split(separator: "\n")
        #expect(lines.count == 1)
        await senders.shutdown()
        await client.close()
        await api.stop()
    }

    /// Issue 24: an invocation that did its work but left a warning to a provider that refused our credentials
    /// fails, with the error type the CLI's exit code stands for and the summary in its message.
    @Test func anInvocationThatLeavesDueWorkToAProviderFails() async throws {
        struct RefusingSender: Sender {
            func send(_ batch: [OutgoingNotification]) async -> [DeliveryReport] {
                batch.map { _ in DeliveryReport(channel: .apns, outcome: .credentials, reason: "InvalidProviderToken")
                }
            }
        }
        let db = try await TemporaryDatabase(.sqlite)
        try await db.store.addUser("writer", zone: "Europe/Paris")
        let senders = LazySender { () async throws(JobError) -> any Sender in RefusingSender() }
        let hook = ContentLimitHook(store: db.store, logger: quietLogger) { () async throws(JobError) -> any Sender in
            try await senders.get()
        }
        let api = try await LambdaRuntimeSimulator.start()
        let wall = WallClock()
        wall.set("2026-11-21T12:00:00Z")
        let client = try await RuntimeAPIClient.connect(api.address)
        let loop = Task {
            try await LambdaRuntime.serve(
                ContentLimitHookHandler(hook: hook, senders: senders), client: client, logger: quietLogger,
                wallClockMs: { wall.ms }, limit: 1,
                exportsTraceID: false)
        }
        let answer = await api.invoke(#"{"user_id":"writer","used":90,"limit":100}"#, deadlineMs: wall.ms + 3_000)
        guard case .error(let type, let message, let header) = answer else {
            Issue.record("not an error: \(String(describing: answer))")
            return
        }
        #expect(type == "JobError.noPermission" && header == "JobError.noPermission")
        #expect(
            message.contains("APNs refused our credentials: 1 device") && message.contains("summary: {"), "\(message)")
        try await loop.value
        await client.close()
        await api.stop()
    }

    /// The platform going away between invocations ends the loop with an error (the process then exits);
    /// a request written after the connection closed must fail too, not wait forever.
    @Test(.timeLimit(.minutes(1))) func aDroppedConnectionFailsEveryLaterRequest() async throws {
        let api = try await LambdaRuntimeSimulator.start()
        let client = try await RuntimeAPIClient.connect(api.address)
        let answered = Task { await api.invoke("{}", deadlineMs: 0) }
        let invocation = try await client.next()
        try await client.respond(to: invocation.requestID, json: "{}")
        #expect(await answered.value == .response("{}"))
        await api.stop()
        for _ in 0..<3 {
            await #expect(throws: JobError.self) { try await client.next() }
            await #expect(throws: JobError.self) { try await client.respond(to: invocation.requestID, json: "{}") }
        }
        await client.close()
    }

    @Test func janitorTakesItsOptionsFromTheEventDetailAndRejectsUnknownOnes() async throws {
        let db = try await TemporaryDatabase(.sqlite)
        try await db.store.addUser("old", now: instant("2026-06-01T00:00:00Z"))
        try await db.store.addUser("recent", now: instant("2026-11-01T00:00:00Z"))
        let senders = LazySender { () async throws(JobError) -> any Sender in throw .config("no probing here") }
        let janitor = TokenJanitor(store: db.store, logger: quietLogger) { () async throws(JobError) -> any Sender in
            try await senders.get()
        }
        let handler = TokenJanitorHandler(janitor: janitor, senders: senders, base: JanitorOptions(now: 0))
        let api = try await LambdaRuntimeSimulator.start()
        let wall = WallClock()
        wall.set("2026-11-21T03:00:00Z")
        let client = try await RuntimeAPIClient.connect(api.address)
        let loop = Task {
            try await LambdaRuntime.serve(
                handler, client: client, logger: quietLogger, wallClockMs: { wall.ms }, limit: 3,
                exportsTraceID: false)
        }
        let typo = await api.invoke(
            Self.scheduled("2026-11-21T03:00:00Z", detail: #"{"stale_dayz":30}"#), deadlineMs: wall.ms + 60_000)
        #expect(
            typo
                == .error(
                    type: "JobError.dataError",
                    message:
                        "event: token-janitor does not know detail.stale_dayz (accepted: batch_size, delivery_retention_days, dry_run, keep_partitions, log_retention_days, probe, probe_after_days, probe_max, probe_rate, purge, purge_after_days, run_retention_days, stale_days)",
                    header: "JobError.dataError"))
        let dry = try #require(
            await api.invoke(
                Self.scheduled("2026-11-21T03:00:00Z", detail: #"{"stale_days":30,"dry_run":true}"#),
                deadlineMs: wall.ms + 60_000)?.response)
        #expect(dry.contains(#""stale_deactivated":1"#) && dry.contains(#""dry_run":true"#))
        let real = try #require(
            await api.invoke(Self.scheduled("2026-11-21T03:00:00Z"), deadlineMs: wall.ms + 60_000)?.response)
        #expect(real.contains(#""stale_deactivated":1"#) && real.contains(#""dry_run":false"#))
        try await loop.value
        #expect(
            try await db.strings("SELECT user_id FROM user_devices WHERE is_active = 0 OR is_active = false") == ["old"]
        )
        await client.close()
        await api.stop()
    }

    @Test func scheduledEventsParseTheShapesEventBridgeSends() throws {
        let rule = try ScheduledEvent.decode(lambdaPayload: Array(Self.scheduled("2026-11-21T20:00:00Z").utf8))
        #expect(rule == ScheduledEvent(time: instant("2026-11-21T20:00:00Z")))
        // EventBridge Scheduler: the input the docs give, with the scheduled time substituted.
        let scheduler = try ScheduledEvent.decode(
            lambdaPayload: Array(#"{"time":"2026-11-21T20:15:00Z","detail":{"probe":true,"probe_max":10}}"#.utf8))
        #expect(scheduler.time == instant("2026-11-21T20:15:00Z"))
        #expect(try scheduler.bool("probe") == true && scheduler.int("probe_max", in: 1...100) == 10)
        #expect(throws: JobError.dataError("event: detail.probe_max must be a whole number within 1…5")) {
            try scheduler.int("probe_max", in: 1...5)
        }
        #expect(throws: JobError.dataError("event: \"time\" is not an ISO 8601 instant: yesterday")) {
            try ScheduledEvent.decode(lambdaPayload: Array(#"{"time":"yesterday"}"#.utf8))
        }
        #expect(throws: JobError.self) { try ScheduledEvent.decode(lambdaPayload: Array("[1,2]".utf8)) }
        // A key given twice is refused, wherever it is: which of the two a reader would take is not for us to guess.
        for (event, message) in [
            (#"{"time":"2026-11-21T20:15:00Z","time":"2026-11-22T20:15:00Z"}"#, "event: time appears twice"),
            (
                #"{"time":"2026-11-21T20:15:00Z","detail":{"dry_run":false,"dry_run":true}}"#,
                "event: detail.dry_run appears twice"
            ),
            (
                #"{"time":"2026-11-21T20:15:00Z","detail":{"probe_max":2.5}}"#,
                "event: detail.probe_max must be true, false, a whole number or a string, got 2.5"
            ),
        ] {
            #expect(throws: JobError.dataError(message), "\(event)") {
                try ScheduledEvent.decode(lambdaPayload: Array(event.utf8))
            }
        }
        #expect(throws: JobError.dataError("event: diary-reminder does not know detail.probe (accepted: none)")) {
            try scheduler.checkDetail(known: [], job: "diary-reminder")
        }
    }
}

/// The built executables as `bootstrap`: the same binary serves the Runtime API when the platform sets
/// `AWS_LAMBDA_RUNTIME_API`.
@Suite struct LambdaProcessTests {
    @Test func diaryReminderBinaryServesInvocationsUntilTheEnvironmentGoesAway() async throws {
        let db = try await TemporaryDatabase(.sqlite)
        let outbox = db.directory.appendingPathComponent("outbox.jsonl").path
        let api = try await LambdaRuntimeSimulator.start()
        let process = try Executables.start(
            "diary-reminder", [],
            environment: [
                "AWS_LAMBDA_RUNTIME_API": api.address, "PUSH_DATABASE_URL": db.path, "PUSH_OUTBOX": outbox,
            ])
        // Inside Lambda the real clock decides staleness and turns the deadline into a duration: the event is
        // "now" and the deadline far, so nothing here depends on what the clock says.
        let now = Int64(Date().timeIntervalSince1970)
        try await db.store.upsertUser(UserProfile(id: "u-now", timezone: "UTC", reminderTime: Self.slot(now)), now: 0)
        _ = try await db.store.register(
            DeviceRegistration(userID: "u-now", token: "token-now", provider: .fcm, platform: .android), now: 0)
        let event = LambdaTests.scheduled(Timestamps.format(now))
        let first = try LambdaTests.fields(await api.invoke(event, deadlineMs: (now + 300) * 1000))
        #expect(first.claimed == 1 && first.sent == 1)
        let second = try LambdaTests.fields(await api.invoke(event, deadlineMs: (now + 300) * 1000))
        #expect(second.claimed == 0)
        let bad = await api.invoke("not json", deadlineMs: (now + 300) * 1000)
        await api.stop()
        let result = await Executables.finish(process)
        guard case .error(let type, _, _)? = bad else {
            Issue.record("expected an error, got \(String(describing: bad))")
            return
        }
        #expect(type == "JobError.dataError")
        #expect(result.status == 69, "\(result.stderr)")
        #expect(result.stderr.contains("Runtime API"))
        #expect(try String(contentsOfFile: outbox, encoding: .utf8).split(separator: "\n").count == 1)
    }

    @Test(arguments: [
        ("token-janitor", [String: String](), "JobError.config", 78),
        ("content-limit-hook", ["PUSH_DATABASE_URL": "<db>"], "JobError.config", 78),
        ("diary-reminder", ["PUSH_DATABASE_URL": "<missing>"], "JobError.noInput", 66),
    ])
    func initialisationErrorsArePostedAndEndTheProcess(
        _ job: String, _ environment: [String: String], _ type: String,
        _ status: Int32
    ) async throws {
        let db = try await TemporaryDatabase(.sqlite)
        let api = try await LambdaRuntimeSimulator.start()
        var env = environment.mapValues {
            $0 == "<db>" ? db.path : $0 == "<missing>" ? db.directory.appendingPathComponent("none.db").path : $0
        }
        env["AWS_LAMBDA_RUNTIME_API"] = api.address
        let process = try Executables.start(job, [], environment: env)
        let error = try #require(await api.initError())
        #expect(error.type == type && error.header == type)
        let result = await Executables.finish(process)
        #expect(result.status == status, "\(result.stderr)")
        #expect(result.stderr.contains(error.message))
        await api.stop()
    }

    /// `HH:MM` of the 15-minute slot containing `instant` (UTC).
    static func slot(_ instant: Int64) -> String {
        let minute = (instant % 86_400) / 60 / 15 * 15
        return String(format: "%02d:%02d", minute / 60, minute % 60)
    }
}

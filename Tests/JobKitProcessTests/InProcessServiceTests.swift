import Foundation
import JobKitTestSupport
import PushSimulator
import Testing

@testable import JobKit
@testable import JobKitDelivery
@testable import JobKitPostgres
@testable import JobKitWiring

/// The jobs as a Swift backend runs them in-process: built by `JobService` from the `PUSH_*` settings alone,
/// reused for many calls, closed at the end.
@Suite struct InProcessServiceTests {
    static func environment(_ harness: DeliveryHarness) -> [String: String] {
        let credentials = harness.simulator.credentials
        let live = "https://127.0.0.1:\(harness.simulator.port)"
        return [
            "PUSH_DATABASE_URL": harness.db.path,
            "PUSH_APNS_KEY_FILE": credentials.apnsKeyFile, "PUSH_APNS_KEY_ID": SimulatorCredentials.keyID,
            "PUSH_APNS_TEAM_ID": SimulatorCredentials.teamID, "PUSH_APNS_TOPIC": SimulatorCredentials.topic,
            "PUSH_APNS_ENDPOINT": live, "PUSH_APNS_SANDBOX_ENDPOINT": live,
            "PUSH_FCM_SERVICE_ACCOUNT_FILE": credentials.serviceAccountFile, "PUSH_FCM_ENDPOINT": live,
            "PUSH_CA_FILE": credentials.caFile,
        ]
    }

    @Test(arguments: Backend.allCases) func theHookAndTheReminderRunInProcessFromTheEnvironment(_ backend: Backend)
        async throws
    {
        let harness = try await DeliveryHarness.start(backend)
        try await harness.addUser(
            "u1", devices: [(hexToken("aa", 1), .apns, .ios), ("android-u1", .fcm, .android)],
            time: "20:00")
        let environment = Self.environment(harness)
        let now = instant("2026-11-21T12:00:00Z")

        let hook = try await JobService.contentLimitHook(
            stores: .sqliteOrPostgres, environment: environment, logger: quietLogger)
        // Many writes on one service: below 90 % nothing is sent; the 90 % warning once; then 100 % once.
        var actions: [ContentLimitAction] = []
        for used in [10, 26, 27, 28, 30, 30] {
            let summary = try await hook.handle(try ContentLimitEvent(userID: "u1", used: used, limit: 30), now: now)
            #expect(summary.failure == nil)
            actions.append(summary.action)
        }
        #expect(actions == [.none, .none, .sent, .none, .sent, .none])
        await hook.close()
        #expect(harness.simulator.accepted().count == 4)

        let reminder = try await JobService.diaryReminder(
            stores: .sqliteOrPostgres, environment: environment, logger: quietLogger)
        // A backend shutting down asks the run to stop: it claims no more (here: nothing) and says so.
        let stop = StopRequest()
        stop.request("shutdown")
        let stopped = try await reminder.handle(
            ScheduledEvent(time: instant("2026-11-21T20:00:00Z")), now: instant("2026-11-21T20:00:01Z"), stop: stop)
        #expect(stopped.claimed == 0 && stopped.stoppedBy == "shutdown" && stopped.failure?.exitCode == 75)
        let run = try await reminder.handle(
            ScheduledEvent(time: instant("2026-11-21T20:00:00Z")),
            now: instant("2026-11-21T20:00:05Z"))
        #expect(run.claimed == 1 && run.notifications == 2)
        // The same slot again (a retried event): the notification log makes it a no-op.
        let again = try await reminder.handle(
            ScheduledEvent(time: instant("2026-11-21T20:00:00Z")),
            now: instant("2026-11-21T20:00:30Z"))
        #expect(again.claimed == 0 && again.notifications == 0)
        await reminder.close()
        #expect(harness.simulator.accepted().count == 6)

        let janitor = try await JobService.tokenJanitor(
            stores: .sqliteOrPostgres, environment: environment, logger: quietLogger)
        let cleaned = try await janitor.handle(
            ScheduledEvent(time: instant("2026-11-22T03:30:00Z"), detail: ["dry_run": .bool(true)]))
        #expect(cleaned.dryRun)
        await janitor.close()
        await harness.stop()
    }

    /// A mistake in the settings fails at start-up with the CLI's meaning, not at the first write that warns.
    @Test func badSettingsFailAtStartUp() async throws {
        let harness = try await DeliveryHarness.start(.sqlite)
        let environment = Self.environment(harness)
        let cases: [(String, [String: String], Int32, String)] = [
            ("no database", environment.filter { $0.key != "PUSH_DATABASE_URL" }, 78, "PUSH_DATABASE_URL"),
            (
                "no provider", environment.filter { !$0.key.hasPrefix("PUSH_APNS") && !$0.key.hasPrefix("PUSH_FCM") },
                78,
                "no provider configured"
            ),
            ("APNs half set", environment.filter { $0.key != "PUSH_APNS_TOPIC" }, 78, "PUSH_APNS_TOPIC"),
            (
                "unreadable key", environment.merging(["PUSH_APNS_KEY_FILE": "/nonexistent/AuthKey.p8"]) { $1 }, 66,
                "AuthKey.p8"
            ),
            (
                "bad catalog", environment.merging(["PUSH_COPY_CATALOG": "/nonexistent/copy.json"]) { $1 }, 66,
                "copy.json"
            ),
        ]
        for (name, settings, code, mention) in cases {
            do {
                let hook = try await JobService.contentLimitHook(
                    stores: .sqliteOrPostgres, environment: settings, logger: quietLogger)
                await hook.close()
                Issue.record("\(name): the hook started")
            } catch {
                #expect(error.exitCode == code, "\(name): \(error.message)")
                #expect(error.message.contains(mention), "\(name): \(error.message)")
            }
        }
        await harness.stop()
    }

    /// What the executables print, with the run's id and durations blanked: those differ between any two runs.
    static func comparable(_ text: String) -> String {
        text.replacingOccurrences(
            of: #"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}"#, with: "RUN",
            options: .regularExpression
        )
        .replacingOccurrences(of: #"\b[0-9]+(\.[0-9]+)?ms\b"#, with: "Nms", options: .regularExpression)
        .replacingOccurrences(of: #"("[a-z_]+_ms"):[0-9.]+"#, with: "$1:N", options: .regularExpression)
        .replacingOccurrences(of: #""phases_ms":\{[^}]*\}"#, with: "PHASES", options: .regularExpression)
    }

    /// A Swift program that depends on JobKit runs each job through ``JobInvocation`` with the command line's
    /// behaviour: the same output for the same settings and flags (the executables only parse their flags into
    /// it). A user reachable only through FCM, which is left unconfigured, is skipped by both.
    @Test func eachJobRunInProcessPrintsWhatItsExecutablePrints() async throws {
        let harness = try await DeliveryHarness.start(.sqlite)
        try await harness.addUser("u1", devices: [(hexToken("aa", 1), .apns, .ios)], time: "20:00")
        try await harness.addUser("u2", devices: [("android-u2", .fcm, .android)], time: "20:00")
        let environment = Self.environment(harness).filter { !$0.key.hasPrefix("PUSH_FCM") }
        let now = "2026-11-21T20:00:05Z"
        func inProcess(_ job: String, json: Bool = false, _ body: (JobInvocation) async throws(JobError) -> Void)
            async throws -> String
        {
            let lines = LineBuffer()
            var invocation = JobInvocation(
                job: job, config: ConfigResolver(environment: environment), logger: quietLogger, now: instant(now))
            invocation.output = lines
            invocation.json = json
            try await body(invocation)
            return lines.lines.map { $0 + "\n" }.joined()
        }
        func cli(_ name: String, _ arguments: [String]) async throws -> String {
            let result = try await Executables.run(name, arguments + ["--now", now], environment: environment)
            #expect(result.status == 0, "\(name) \(arguments): \(result.stderr)")
            return result.stdout
        }

        var explain = DiaryReminderRequest()
        explain.explain = "u2"
        let explained = try await inProcess("diary-reminder") { run throws(JobError) in
            try await run.diaryReminder(explain)
        }
        #expect(explained.contains("fcm, not configured for this run"))
        #expect(explained == (try await cli("diary-reminder", ["--explain", "u2"])))

        var dryRun = DiaryReminderRequest()
        dryRun.dryRun = true
        let previewed = try await inProcess("diary-reminder", json: true) { run throws(JobError) in
            try await run.diaryReminder(dryRun)
        }
        #expect(previewed.contains("u1") && !previewed.contains("android-u2"))
        let previewedByCLI = try await cli("diary-reminder", ["--dry-run", "--format", "json"])
        #expect(Self.comparable(previewed) == Self.comparable(previewedByCLI), "\(previewed)\n\(previewedByCLI)")

        var warning = ContentLimitHookRequest(event: try ContentLimitEvent(userID: "u1", used: 27, limit: 30))
        warning.explain = true
        let hook = try await inProcess("content-limit-hook") { run throws(JobError) in
            try await run.contentLimitHook(warning)
        }
        #expect(hook.contains("threshold=content_limit_90"))
        #expect(
            Self.comparable(hook)
                == Self.comparable(
                    try await cli(
                        "content-limit-hook-full", ["--user", "u1", "--used", "27", "--limit", "30", "--explain"])))

        let janitor = try await inProcess("token-janitor") { run throws(JobError) in
            try await run.tokenJanitor(["dry_run": .flag(true), "stale_days": .number(30)])
        }
        #expect(janitor.contains("dry run"))
        #expect(
            Self.comparable(janitor)
                == Self.comparable(try await cli("token-janitor", ["run", "--dry-run", "--stale-days", "30"])))

        let report = try await inProcess("token-janitor report") { run throws(JobError) in
            try await run.healthReport(days: 7, format: .text, path: nil)
        }
        #expect(report.contains("delivery health"))
        #expect(report == (try await cli("token-janitor", ["report", "--days", "7"])))

        // Nothing above claimed or sent.
        #expect(harness.simulator.accepted().isEmpty)
        await harness.stop()
    }

    /// An unlimited plan is answered without a store, and `--explain` says why, as every other verdict does.
    @Test func anUnlimitedPlanIsExplainedWithoutADatabase() async throws {
        let result = try await Executables.run(
            "content-limit-hook-full",
            ["--database", "/nonexistent/push.sqlite", "--user", "u", "--used", "5", "--limit", "0", "--explain"])
        #expect(result.status == 0, "\(result.stderr)")
        #expect(result.stdout.hasPrefix("  limit: 0 → unlimited plan\n"), "\(result.stdout)")
        #expect(result.stdout.contains(#"reason="unlimited plan""#))
    }
}

import Foundation
import PushSimulator
import Testing

@testable import JobKit
@testable import JobKitPostgres

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
            "u1", devices: [(hexToken("aa", 1), .apns, "ios"), ("android-u1", .fcm, "android")],
            time: "20:00")
        let environment = Self.environment(harness)
        let now = instant("2026-11-21T12:00:00Z")

        let hook = try await JobService.contentLimitHook(environment: environment, logger: quietLogger)
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

        let reminder = try await JobService.diaryReminder(environment: environment, logger: quietLogger)
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

        let janitor = try await JobService.tokenJanitor(environment: environment, logger: quietLogger)
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
                let hook = try await JobService.contentLimitHook(environment: settings, logger: quietLogger)
                await hook.close()
                Issue.record("\(name): the hook started")
            } catch {
                #expect(error.exitCode == code, "\(name): \(error.message)")
                #expect(error.message.contains(mention), "\(name): \(error.message)")
            }
        }
        await harness.stop()
    }
}

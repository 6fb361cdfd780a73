import Foundation
import JobKitTestSupport
import Logging
import PushSimulator
import Testing

@testable import JobKit

/// SIGTERM is how systemd, a container runtime or a deploy stops a process, and Ctrl-C (SIGINT) how an operator
/// does: a reminder run that gets one must not end with notifications in flight unrecorded.
@Suite struct StopSignalTests {
    static let now = "2026-11-21T20:00:00Z"

    /// A signal that comes as soon as the handlers are installed is a request to stop. Dispatch registers a
    /// signal source later, on a thread of its own, and until then the signal was ignored: a SIGTERM in that
    /// window was lost, and the run went on as if nobody had asked (a CI run saw the hook finish its warning
    /// without a word of the SIGTERM sent to it). SIGUSR2 stands in for SIGTERM, which would reach the test
    /// runner; no other test uses it, so its handler is installed here for the first time in the process.
    @Test func aSignalThatComesRightAfterTheHandlersAreInstalledIsARequest() async throws {
        let stop = StopRequest()
        stop.install(
            [(SIGUSR2, "SIGUSR2")], logger: Logger(label: "test") { _ in SwiftLogNoOpLogHandler() }, effect: "")
        kill(getpid(), SIGUSR2)
        for _ in 0..<250 where stop.reason == nil { try await Task.sleep(for: .milliseconds(20)) }
        #expect(stop.reason == "SIGUSR2")
    }

    /// `diary-reminder` sent SIGTERM mid-run claims nothing more, writes out and records the pages already on
    /// their way, and exits 75 with its summary; the next run reminds the others, nobody twice. The signal
    /// ended the process at once: the notifications the outbox had taken were not recorded, and the run that
    /// took their claims over would have sent them again.
    @Test func sigtermMidRunRecordsWhatIsOnItsWayAndExits75() async throws {
        let due = 6000
        let (db, run) = try await Self.runWaitingOnItsOutbox(due: due)
        kill(run.process.processIdentifier, SIGTERM)
        let first = await Executables.finish(run)

        #expect(
            first.signal == nil && first.status == 75,
            "status \(first.status), signal \(String(describing: first.signal)): \(first.stderr)")
        #expect(first.stderr.contains("SIGTERM"), "\(first.stderr)")
        #expect(first.stdout.contains("STOPPED EARLY (SIGTERM)"), "\(first.stdout.suffix(400))")
        let written = try Self.users(first.stdout)
        #expect(!written.isEmpty)
        #expect(
            try await db.count("SELECT count(*) FROM notification_deliveries WHERE outcome = 'delivered'")
                == written.count)
        #expect(try await db.count("SELECT count(*) FROM notification_logs WHERE status <> 'sent'") == 0)
        let remindedFirst = Set(written)
        #expect(remindedFirst.count < due, "every due user was claimed before the signal")

        let second = try await Executables.run(
            "diary-reminder", ["--database", db.path, "--now", "2026-11-21T20:15:00Z", "--outbox", "-"])
        #expect(second.status == 0, "\(second.stderr)")
        let remindedNext = Set(try Self.users(second.stdout))
        #expect(remindedFirst.isDisjoint(with: remindedNext))
        #expect(remindedFirst.count + remindedNext.count == due)
    }

    /// A second signal ends the process at once, as the signal does by default: an operator's second Ctrl-C
    /// is not made to wait.
    @Test func aSecondSignalEndsTheRunAtOnce() async throws {
        let (_, run) = try await Self.runWaitingOnItsOutbox(due: 3000)
        kill(run.process.processIdentifier, SIGINT)
        try await Task.sleep(for: .milliseconds(300))
        kill(run.process.processIdentifier, SIGINT)
        let result = await Executables.finish(run)
        #expect(result.signal == SIGINT, "status \(result.status): \(result.stderr)")
        #expect(result.stderr.contains("SIGINT: claiming no more"), "\(result.stderr)")
    }

    /// `diary-reminder` killed outright (SIGKILL: the out-of-memory killer, `kill -9`, a host going down) cannot
    /// record its end. Its `running` row, written before it claimed anything, stayed `running`, and only the health
    /// report told of it: the next run went well, exited 0, and neither its log nor its metrics said that the run
    /// before had died. The next run past the killed run's lease now records it `failed`, with an error line and
    /// a gauge, and still exits 0: its own work is done (it took the killed run's claims over).
    @Test func aRunKilledOutrightIsToldOfByTheNextRun() async throws {
        let (db, run) = try await Self.runWaitingOnItsOutbox(due: 3000)
        kill(run.process.processIdentifier, SIGKILL)
        let killed = await Executables.finish(run)
        #expect(killed.signal == SIGKILL, "status \(killed.status): \(killed.stderr)")
        let metrics = db.directory.appendingPathComponent("diary-reminder.prom")
        let next = try await Executables.run(
            "diary-reminder",
            [
                "--database", db.path, "--now", "2026-11-21T20:15:00Z", "--outbox", "/dev/null", "--metrics-file",
                metrics.path,
            ])
        #expect(next.status == 0, "\(next.stderr)")
        #expect(
            next.stderr.contains("an earlier run recorded no end within the claims' lease")
                && next.stderr.contains(Self.now), "\(next.stderr)")
        #expect(next.stdout.contains(" earlier_runs_without_end=1 "), "\(next.stdout)")
        #expect(
            try String(contentsOf: metrics, encoding: .utf8).contains(
                #"diary_push_run_earlier_runs_without_end{job="diary-reminder"} 1"#))
        #expect(
            try await db.strings("SELECT outcome FROM job_runs ORDER BY run_at") == ["failed", "ok"])
        let report = try await Executables.run(
            "token-janitor", ["report", "--database", db.path, "--now", "2026-11-22T00:00:00Z", "--days", "1"])
        #expect(report.status == 0, "\(report.stderr)")
        #expect(
            report.stdout.contains(
                "  diary-reminder: 2 runs, 1 failed, the last at \(Self.now): no end recorded within the claims' lease"
            ), "\(report.stdout)")
    }

    /// `content-limit-hook` sent SIGTERM while its warning is on its way (the provider answers after 8 s)
    /// finishes it: sent, answered, recorded, and the usual summary and exit. The signal ended it mid-send with
    /// the claim open and nothing recorded, and the reminder run that took the claim over after the lease would
    /// have sent the warning again.
    ///
    /// 8 s, under the 10 s request timeout: with 3 s, a CI run whose test task was starved that long signalled a
    /// hook that had already finished (no SIGTERM line; everything else held).
    @Test func theHookFinishesAWarningOnItsWayWhenStopped() async throws {
        let harness = try await DeliveryHarness.start(.sqlite) { configuration in
            configuration.rules = [SimulatorRule(prefix: "slow-", kind: .slow, delayMs: 8_000)]
        }
        defer { Task { await harness.stop() } }
        try await harness.addUser("w", devices: [("slow-phone-w", .fcm, .android)])
        let credentials = harness.simulator.credentials
        let environment = [
            "PUSH_FCM_SERVICE_ACCOUNT_FILE": credentials.serviceAccountFile,
            "PUSH_FCM_ENDPOINT": "https://127.0.0.1:\(harness.simulator.port)", "PUSH_CA_FILE": credentials.caFile,
        ]
        let hook = try Executables.start(
            "content-limit-hook",
            ["--database", harness.db.path, "--now", Self.now, "--user", "w", "--used", "9", "--limit", "10"],
            environment: environment)
        var sending = false
        for _ in 0..<1500 where !sending {
            try await Task.sleep(for: .milliseconds(20))
            let claimed = (try? await harness.db.count("SELECT count(*) FROM notification_logs")) ?? 0
            sending = claimed == 1 && harness.simulator.stats.requests > 0
        }
        #expect(sending, "the hook did not reach the provider in 30 s")
        try await Task.sleep(for: .milliseconds(300))
        kill(hook.process.processIdentifier, SIGTERM)
        let result = await Executables.finish(hook)

        #expect(
            result.signal == nil && result.status == 0,
            "status \(result.status), signal \(String(describing: result.signal)): \(result.stderr)")
        #expect(result.stdout.contains("action=sent") && result.stdout.contains("delivered=1"), "\(result.stdout)")
        #expect(result.stderr.contains("SIGTERM: the warning is finished and recorded"), "\(result.stderr)")
        #expect(try await harness.db.count("SELECT count(*) FROM notification_logs WHERE status = 'sent'") == 1)
        #expect(
            try await harness.db.count("SELECT count(*) FROM notification_deliveries WHERE outcome = 'delivered'")
                == 1)
    }

    /// Issue 63, the bound of `kill -9`: a run killed outright while it sends may have had requests in flight that
    /// the provider delivered and the run never recorded. The next run past the lease resends those, with the same
    /// collapse id (so the device replaces the first copy), and nothing else: one connection's stream window (20
    /// here), plus the answers read in the moment before the kill that the journal had not yet written (its last
    /// write or two; 0 or 1 in six runs here, so 5 is a bound with room), and every device is reached.
    @Test func aRunKilledMidSendResendsNoMoreThanItHadInFlight() async throws {
        let window = 20
        let harness = try await DeliveryHarness.start(.sqlite) { configuration in
            configuration.maxConcurrentStreams = window
            // Answers a second late: 20 a second, so that the few the journal has not yet written when the kill
            // comes stay few even on a loaded machine.
            configuration.rules = [SimulatorRule(prefix: "", kind: .slow, delayMs: 1_000)]
        }
        defer { Task { await harness.stop() } }
        let users = 300
        for n in 0..<users { try await harness.addUser("u\(n)", devices: [("phone-\(n)", .fcm, .android)]) }
        let credentials = harness.simulator.credentials
        let environment = [
            "PUSH_FCM_SERVICE_ACCOUNT_FILE": credentials.serviceAccountFile,
            "PUSH_FCM_ENDPOINT": "https://127.0.0.1:\(harness.simulator.port)", "PUSH_CA_FILE": credentials.caFile,
            "PUSH_FCM_RATE": "0",
        ]
        let run = try Executables.start(
            "diary-reminder", ["--database", harness.db.path, "--now", Self.now], environment: environment)
        for _ in 0..<1500 where harness.simulator.stats.accepted < 40 {
            try await Task.sleep(for: .milliseconds(20))
        }
        kill(run.process.processIdentifier, SIGKILL)
        let killed = await Executables.finish(run)
        #expect(killed.signal == SIGKILL, "the run ended before the kill: \(killed.status) \(killed.stderr)")
        let atKill = harness.simulator.accepted().count
        #expect(atKill >= 40 && atKill < users, "the kill did not land mid-send: \(atKill) of \(users) accepted")
        let next = try await Executables.run(
            "diary-reminder", ["--database", harness.db.path, "--now", "2026-11-21T20:15:00Z"], environment: environment
        )
        #expect(next.status == 0, "\(next.stderr)")
        let accepted = harness.simulator.accepted()
        let byToken = Dictionary(grouping: accepted, by: \.token)
        #expect(byToken.count == users, "devices never reached: \(users - byToken.count)")
        let resent = accepted.count - byToken.count
        let unjournaled = 5
        #expect(
            resent <= window + unjournaled,
            "\(resent) devices got the reminder twice; the stream window is \(window)")
        #expect(byToken.values.allSatisfy { Set($0.map(\.collapseID)).count == 1 }, "a resend had another collapse id")
    }

    /// A run of `due` seeded users whose outbox is its stdout, left unread: the first page's lines fill the pipe
    /// and the run waits there, with its pages claimed (three at most: the one being written and two more) and
    /// the others not. Returned once it has claimed its first page.
    static func runWaitingOnItsOutbox(due: Int) async throws -> (TemporaryDatabase, Executables.Started) {
        let db = try await TemporaryDatabase(.sqlite)
        let seeded = try await Executables.run(
            "pushctl", ["seed", "--database", db.path, "--users", "\(due)", "--due-at", now, "--due-count", "\(due)"])
        #expect(seeded.status == 0, "\(seeded.stderr)")
        let run = try Executables.start("diary-reminder", ["--database", db.path, "--now", now, "--outbox", "-"])
        var claimed = 0
        for _ in 0..<3000 where claimed < 1000 {
            try await Task.sleep(for: .milliseconds(20))
            claimed = (try? await db.count("SELECT count(*) FROM notification_logs")) ?? 0
        }
        #expect(claimed >= 1000, "the run claimed \(claimed) users in 60 s")
        try await Task.sleep(for: .milliseconds(300))
        return (db, run)
    }

    /// The user of each outbox line (a JSON object) in `output`.
    static func users(_ output: String) throws -> [String] {
        try output.split(separator: "\n").filter { $0.hasPrefix("{") }.map { line in
            let object = try JSONSerialization.jsonObject(with: Data(line.utf8)) as? [String: Any]
            return try #require(object?["user_id"] as? String, "no user_id in \(line)")
        }
    }
}

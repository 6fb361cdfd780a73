import Foundation
import JobKitTestSupport
import NIOConcurrencyHelpers
import Testing

@testable import JobKit
@testable import JobKitDelivery

/// A model-based test of the delivery lifecycle: random sequences of runs inside one slot's catch-up window
/// (at shifting minutes, some at the same instant), runs killed between sending and recording, and
/// per-device provider answers, through the real run and the real stores. After the window, what every
/// device received is checked against what it must end with:
///
/// - **nothing lost**: a device whose provider answered the last run of the window (a healthy one) received
///   the reminder, unless its token was dead (runs are killed only where a later run of the window comes at
///   least one claim lease later: a run killed in the window's last 10 minutes is not made up for);
/// - **nothing twice**: once an answer `delivered` was recorded for a device, it is never sent to again; a
///   device receives the reminder more than once only through attempts whose outcome was not recorded (its
///   run was killed) or was ambiguous (a timeout after which the provider delivered after all);
/// - **tokens**: only a token answered dead (and recorded) is deactivated, and it is sent nothing afterwards.
///
/// A failing case is shrunk (fewer users, devices and runs, plainer answers, no kills) before it is reported.
@Suite struct DeliveryModelTests {
    enum Answer: CaseIterable, Sendable, CustomStringConvertible {
        /// 200: delivered.
        case ok
        /// 410 Unregistered / FCM UNREGISTERED.
        case dead
        /// 429 with Retry-After, or 503, outlasting the run's retries.
        case unavailable
        /// A timeout after which the provider delivered all the same (the sender cannot know).
        case timeoutDelivered
        /// A timeout after which nothing arrived.
        case timeoutLost
        /// 401/403: our credentials refused.
        case credentials

        var description: String {
            switch self {
            case .ok: "ok"
            case .dead: "dead"
            case .unavailable: "503"
            case .timeoutDelivered: "timeout+delivered"
            case .timeoutLost: "timeout"
            case .credentials: "401"
            }
        }

        /// What the device got from this attempt.
        var received: Bool { self == .ok || self == .timeoutDelivered }

        func report(_ notification: OutgoingNotification) -> DeliveryReport {
            let channel = DeliveryChannel(notification.device.provider)
            switch self {
            case .ok: return DeliveryReport(channel: channel, outcome: .delivered)
            case .dead: return DeliveryReport(channel: channel, outcome: .tokenDead, reason: "Unregistered")
            case .unavailable:
                return DeliveryReport(channel: channel, outcome: .retryLater, reason: "ServiceUnavailable")
            case .timeoutDelivered, .timeoutLost:
                return DeliveryReport(channel: channel, outcome: .retryLater, reason: "no answer", ambiguousAttempts: 1)
            case .credentials:
                return DeliveryReport(channel: channel, outcome: .credentials, reason: "InvalidProviderToken")
            }
        }
    }

    struct Run: Sendable, CustomStringConvertible {
        /// Minutes after the reminder time (the catch-up window is 60).
        var minute: Int
        /// Killed after sending, before anything is recorded.
        var killed: Bool
        /// Answers by device token; a device not named answers `ok`.
        var answers: [String: Answer]

        var description: String {
            let odd = answers.filter { $0.value != .ok }.sorted { $0.key < $1.key }.map { "\($0.key)=\($0.value)" }
            return "+\(minute)m\(killed ? " KILLED" : "")\(odd.isEmpty ? "" : " " + odd.joined(separator: " "))"
        }
    }

    struct Scenario: Sendable, CustomStringConvertible {
        /// Devices of each user (users u0, u1, …; devices u0-d0, …).
        var devices: [Int]
        /// In order of time; the last is healthy (not killed, every device answers `ok` or `dead`).
        var runs: [Run]

        var tokens: [String] { devices.enumerated().flatMap { user, count in (0..<count).map { "u\(user)-d\($0)" } } }
        var description: String { "devices \(devices); runs: " + runs.map(\.description).joined(separator: " | ") }

        static func random(_ rng: inout some RandomNumberGenerator) -> Scenario {
            let devices = (0..<Int.random(in: 1...4, using: &rng)).map { _ in Int.random(in: 1...3, using: &rng) }
            var minutes = Set([45])
            for _ in 0..<Int.random(in: 1...4, using: &rng) {
                minutes.insert([0, 0, 1, 5, 12, 15, 16, 30, 31, 44].randomElement(using: &rng)!)
            }
            let tokens = Scenario(devices: devices, runs: []).tokens
            let runs = minutes.sorted().map { minute in
                let last = minute == 45
                var answers: [String: Answer] = [:]
                for token in tokens {
                    let answer: Answer =
                        last
                        ? (Int.random(in: 0..<10, using: &rng) == 0 ? .dead : .ok)
                        : Int.random(in: 0..<3, using: &rng) == 0 ? .ok : Answer.allCases.randomElement(using: &rng)!
                    if answer != .ok { answers[token] = answer }
                }
                // A killed run's claims are taken over once the 10-minute lease has run out: only a run that has a
                // later one in the window at least that much later can be made up for inside the window.
                let killed = minute <= 45 - 10 && Int.random(in: 0..<4, using: &rng) == 0
                return Run(minute: minute, killed: killed, answers: answers)
            }
            return Scenario(devices: devices, runs: runs)
        }

        /// Simpler scenarios, each one step from this one: a user, device or run fewer, a kill undone, an answer
        /// made `ok`.
        var simplifications: [Scenario] {
            var result: [Scenario] = []
            for user in devices.indices where devices.count > 1 {
                var copy = self
                copy.devices.remove(at: user)
                result.append(copy.keepingAnswersOfRemainingDevices())
            }
            for user in devices.indices where devices[user] > 1 {
                var copy = self
                copy.devices[user] -= 1
                result.append(copy.keepingAnswersOfRemainingDevices())
            }
            for index in runs.indices.dropLast() {
                var copy = self
                copy.runs.remove(at: index)
                result.append(copy)
            }
            for index in runs.indices where runs[index].killed {
                var copy = self
                copy.runs[index].killed = false
                result.append(copy)
            }
            for index in runs.indices {
                for token in runs[index].answers.keys.sorted() {
                    var copy = self
                    copy.runs[index].answers[token] = nil
                    result.append(copy)
                }
            }
            return result
        }

        /// Drops the answers of devices that no longer exist (tokens name users and devices by position).
        private func keepingAnswersOfRemainingDevices() -> Scenario {
            let kept = Set(tokens)
            var copy = self
            for index in copy.runs.indices {
                copy.runs[index].answers = copy.runs[index].answers.filter { kept.contains($0.key) }
            }
            return copy
        }
    }

    /// Answers from the run's script and keeps every send.
    final class ScriptedSender: Sender, @unchecked Sendable {
        private let lock = NIOLock()
        private var answers: [String: Answer] = [:]
        private var sends: [(token: String, run: Int)] = []
        private var run = 0

        func start(run: Int, answers: [String: Answer]) {
            lock.withLock {
                self.run = run
                self.answers = answers
            }
        }

        var sent: [(token: String, run: Int)] { lock.withLock { sends } }

        func send(_ batch: [OutgoingNotification]) async -> [DeliveryReport] {
            lock.withLock {
                batch.map { notification in
                    sends.append((notification.device.token, run))
                    return (answers[notification.device.token] ?? .ok).report(notification)
                }
            }
        }
    }

    /// What went wrong in one scenario, or `nil`.
    func violation(_ scenario: Scenario, _ backend: Backend, forgetReachedDevices: Bool = false) async throws -> String?
    {
        let db = try await TemporaryDatabase(backend)
        for (user, count) in scenario.devices.enumerated() {
            try await db.store.addUser("u\(user)", tokens: (0..<count).map { "u\(user)-d\($0)" })
        }
        let sender = ScriptedSender()
        let reminderAt = instant("2026-11-21T20:00:00Z")
        for (index, run) in scenario.runs.enumerated() {
            sender.start(run: index, answers: run.answers)
            var ledger = InterceptingLedger(inner: db.store) { () throws(JobError) in
                // The process ends here: an error the run does not wait out (it waits out a locked or full one).
                if run.killed { throw .software("killed") }
            }
            if forgetReachedDevices {
                ledger.transformClaims = { claims in
                    claims.map {
                        Claim(
                            logID: $0.logID, userID: $0.userID, period: $0.period, messageIndex: $0.messageIndex,
                            locale: $0.locale, takenOver: $0.takenOver, deliveredDeviceIDs: [])
                    }
                }
            }
            let runner = DiaryReminderRunner(
                remindersOnly: db.store, ledger: ledger, sender: sender, logger: quietLogger)
            var failure: JobError?
            do {
                _ = try await runner.run(ReminderRunOptions(now: reminderAt + Int64(run.minute) * 60))
            } catch {
                failure = error
            }
            if let failure, !run.killed { throw failure }  // a killed run fails by design
        }
        let deactivated = Set(
            try await db.strings(
                "SELECT token FROM user_devices WHERE \(backend == .postgres ? "NOT is_active" : "is_active = 0")"))
        let sends = sender.sent

        for token in scenario.tokens {
            let attempts = sends.filter { $0.token == token }.map {
                (run: $0.run, answer: scenario.runs[$0.run].answers[token] ?? .ok)
            }
            let received = attempts.filter(\.answer.received)
            // Nothing twice: after a recorded `delivered`, never sent again.
            if let reached = attempts.firstIndex(where: { $0.answer == .ok && !scenario.runs[$0.run].killed }),
                attempts.count > reached + 1
            {
                return
                    "\(token) was sent to again after its delivery was recorded (attempts in runs \(attempts.map(\.run)))"
            }
            let unrecorded = received.filter { scenario.runs[$0.run].killed || $0.answer == .timeoutDelivered }.count
            if received.count - unrecorded > 1 {
                return
                    "\(token) received the reminder \(received.count) times, \(received.count - unrecorded) of them recorded"
            }
            // Tokens: deactivated only when a dead answer was recorded; never sent to after that.
            let deadRecorded = attempts.firstIndex { $0.answer == .dead && !scenario.runs[$0.run].killed }
            if deactivated.contains(token) != (deadRecorded != nil) {
                return
                    "\(token) is \(deactivated.contains(token) ? "" : "not ")deactivated; dead answers recorded: \(deadRecorded != nil)"
            }
            if let deadRecorded, attempts.count > deadRecorded + 1 {
                return "\(token) was sent to after its dead answer was recorded"
            }
            // Nothing lost: the window's last run is healthy, so every live device has the reminder.
            if attempts.allSatisfy({ $0.answer != .dead }) && received.isEmpty {
                return
                    "\(token) never received the reminder (attempts: \(attempts.map { "run \($0.run) \($0.answer)" }))"
            }
        }
        return nil
    }

    /// Shrinks a failing scenario: takes any one-step simplification that still fails, until none does.
    func shrink(_ failing: Scenario, _ backend: Backend, _ message: String) async throws -> (Scenario, String) {
        var current = (failing, message)
        var improved = true
        while improved {
            improved = false
            for candidate in current.0.simplifications {
                if let problem = try await violation(candidate, backend) {
                    current = (candidate, problem)
                    improved = true
                    break
                }
            }
        }
        return current
    }

    @Test(arguments: [(Backend.sqlite, 250), (Backend.postgres, 60)])
    func randomRunsKillsAndAnswersLoseNothingAndSendNothingTwice(_ backend: Backend, _ cases: Int) async throws {
        var rng = SplitMix64(seed: 20_261_123)
        for number in 0..<cases {
            let scenario = Scenario.random(&rng)
            if let problem = try await violation(scenario, backend) {
                let (minimal, minimalProblem) = try await shrink(scenario, backend, problem)
                Issue.record(
                    "case \(number) fails: \(problem)\n  scenario: \(scenario)\n  shrunk: \(minimal)\n  → \(minimalProblem)"
                )
                return
            }
        }
    }

    /// The checker itself catches what it must: the same scenario passes with the real store and fails with a
    /// store that forgets which devices a claim already reached (every take-over then sends to every device).
    @Test func theModelCatchesAResendToAReachedDevice() async throws {
        let scenario = Scenario(
            devices: [2],
            runs: [
                Run(minute: 0, killed: false, answers: ["u0-d1": .unavailable]),
                Run(minute: 45, killed: false, answers: [:]),
            ])
        #expect(try await violation(scenario, .sqlite) == nil)
        let problem = try await violation(scenario, .sqlite, forgetReachedDevices: true)
        #expect(
            problem?.contains("u0-d0 was sent to again after its delivery was recorded") == true,
            "\(problem ?? "no violation")")
    }
}

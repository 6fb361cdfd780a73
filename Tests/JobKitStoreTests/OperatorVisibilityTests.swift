import Foundation
import JobKitTestSupport
import NIOPosix
import PushSimulator
import Testing

@testable import JobKit
@testable import JobKitDelivery

/// Issue 24: a run that leaves due work undelivered because of a provider says so — in its exit code, one
/// clear log line per provider and cause, and its metrics — while a run whose only failures are dead tokens
/// exits 0. Each case runs the real `diary-reminder` against the simulator.
@Suite(.serialized) struct OperatorVisibilityTests {
    enum Outage: String, CaseIterable, CustomTestStringConvertible {
        case apnsKeyRefused, bothUnreachable, every503, bothCredentialsRefused, untrustedCertificate, hostMismatch, none
        var testDescription: String { rawValue }
    }

    struct Setup {
        let harness: DeliveryHarness
        let environment: [String: String]
        let arguments: [String]
    }

    /// A user with an iPhone (APNs) and an Android phone (FCM), due at 20:00, and the environment that makes
    /// the outage.
    static func setUp(_ outage: Outage, extraArguments: [String] = []) async throws -> Setup {
        let harness = try await DeliveryHarness.start(.sqlite) { configuration in
            if outage == .every503 { configuration.rules = [SimulatorRule(prefix: "", kind: .flaky, times: 1_000)] }
            // Reachable at 127.0.0.2 too (all of 127/8 is loopback), an address its certificate (localhost,
            // 127.0.0.1) does not carry.
            if outage == .hostMismatch { configuration.host = "0.0.0.0" }
        }
        try await harness.addUser("u1", devices: [(hexToken("aa", 1), .apns, .ios), ("android-u1", .fcm, .android)])
        let credentials = harness.simulator.credentials
        let live = "https://127.0.0.1:\(harness.simulator.port)"
        let closed = "https://127.0.0.1:1"
        var environment = [
            "PUSH_APNS_KEY_FILE": credentials.apnsKeyFile, "PUSH_APNS_KEY_ID": SimulatorCredentials.keyID,
            "PUSH_APNS_TEAM_ID": SimulatorCredentials.teamID, "PUSH_APNS_TOPIC": SimulatorCredentials.topic,
            "PUSH_APNS_ENDPOINT": live, "PUSH_FCM_SERVICE_ACCOUNT_FILE": credentials.serviceAccountFile,
            "PUSH_FCM_ENDPOINT": live,
            "PUSH_CA_FILE": credentials.caFile, "PUSH_RETRY_BUDGET_SECONDS": "3",
        ]
        switch outage {
        case .apnsKeyRefused:
            environment["PUSH_APNS_KEY_ID"] = "WRONGKEY01"
        case .bothUnreachable:
            environment["PUSH_APNS_ENDPOINT"] = closed
            environment["PUSH_FCM_ENDPOINT"] = closed
        case .bothCredentialsRefused:
            environment["PUSH_APNS_KEY_ID"] = "WRONGKEY01"
            // A service account whose key the OAuth endpoint does not know.
            let other = try SimulatorCredentials.prepare(in: harness.db.directory.appendingPathComponent("other"))
            try other.writeServiceAccount(port: harness.simulator.port)
            environment["PUSH_FCM_SERVICE_ACCOUNT_FILE"] = other.serviceAccountFile
        case .untrustedCertificate:
            // Another CA than the one that signed the simulator's certificate.
            let other = try SimulatorCredentials.prepare(in: harness.db.directory.appendingPathComponent("other"))
            environment["PUSH_CA_FILE"] = other.caFile
        case .hostMismatch:
            let renamed = "https://127.0.0.2:\(harness.simulator.port)"
            environment["PUSH_APNS_ENDPOINT"] = renamed
            environment["PUSH_FCM_ENDPOINT"] = renamed
        case .every503:
            // Every answer a 503, to the run's one device of each provider: 100 % of its attempts, and an outage
            // when one device is enough (the default asks for 10, so that a few 5xx among many stay quiet).
            environment["PUSH_OUTAGE_MIN_DEVICES"] = "1"
        case .none:
            break
        }
        return Setup(
            harness: harness, environment: environment,
            arguments: ["--database", harness.db.path, "--now", "2026-11-23T20:00:00Z"] + extraArguments)
    }

    /// Devices left per provider and cause, as the metrics file must show them.
    static let left: [Outage: [String: Int]] = [
        .apnsKeyRefused: ["apns/credentials": 1], .bothUnreachable: ["apns/unavailable": 1, "fcm/unavailable": 1],
        .every503: ["apns/unavailable": 1, "fcm/unavailable": 1],
        .bothCredentialsRefused: ["apns/credentials": 1, "fcm/credentials": 1],
        .untrustedCertificate: ["apns/unavailable": 1, "fcm/unavailable": 1],
        .hostMismatch: ["apns/unavailable": 1, "fcm/unavailable": 1],
        .none: [:],
    ]

    static let expected: [Outage: (status: Int32, lines: [String])] = [
        .apnsKeyRefused: (77, ["APNs refused our credentials: 1 device left for the next runs"]),
        .bothUnreachable: (69, ["APNs was unavailable: 1 device", "FCM was unavailable: 1 device"]),
        .every503: (69, ["APNs was unavailable: 1 device", "FCM was unavailable: 1 device"]),
        .bothCredentialsRefused: (
            77, ["APNs refused our credentials: 1 device", "FCM refused our credentials: 1 device"]
        ),
        .untrustedCertificate: (
            69, ["APNs was unavailable: 1 device", "FCM was unavailable: 1 device", "TLS certificate was not accepted"]
        ),
        .hostMismatch: (
            69,
            [
                "APNs was unavailable: 1 device", "FCM was unavailable: 1 device", "certificate does not name the host",
                "TLS certificate was not accepted",
            ]
        ),
        .none: (0, []),
    ]

    @Test(arguments: Outage.allCases)
    func aRunThatLeavesDueWorkToAProviderFailsAndSaysWhy(_ outage: Outage) async throws {
        let setup = try await Self.setUp(outage)
        defer { Task { await setup.harness.stop() } }
        let metrics = setup.harness.db.directory.appendingPathComponent("m.prom")
        let run = try await Executables.run(
            "diary-reminder", setup.arguments + ["--metrics-file", metrics.path], environment: setup.environment)
        let (status, lines) = try #require(Self.expected[outage])
        // The metrics file: the exit code, and the devices left per provider and cause.
        let samples = try String(contentsOf: metrics, encoding: .utf8).split(separator: "\n").filter {
            !$0.hasPrefix("#")
        }
        func sample(_ prefix: String) -> Double? {
            samples.first { $0.hasPrefix(prefix) }.flatMap { $0.split(separator: " ").last }.flatMap { Double($0) }
        }
        #expect(sample(#"diary_push_last_run_exit_code{job="diary-reminder"}"#) == Double(status))
        for provider in ["apns", "fcm"] {
            for cause in ["credentials", "unavailable"] {
                let expected = Double(Self.left[outage]?["\(provider)/\(cause)"] ?? 0)
                #expect(
                    sample(
                        #"diary_push_run_devices_left{job="diary-reminder",provider="\#(provider)",cause="\#(cause)"}"#)
                        == expected,
                    "\(outage) \(provider) \(cause)")
            }
        }
        #expect(run.status == status, "\(outage): \(run.status) \(run.stderr)")
        for line in lines {
            // One line per provider and cause, not one per device or per attempt.
            let count = run.stderr.components(separatedBy: line).count - 1
            #expect(count >= 1, "\(outage): no \"\(line)\" in \(run.stderr)")
        }
        for provider in ["APNs", "FCM"] {
            let errorLines = run.stderr.split(separator: "\n").filter {
                $0.contains("error") && $0.contains("\(provider) ") && $0.contains("left for the next runs")
            }
            // The log line and the exit message (which repeats every provider's sentence): two at most per provider.
            #expect(errorLines.count <= 2, "\(outage): \(errorLines)")
        }
        if status == 0 {
            #expect(run.stderr.isEmpty, "\(run.stderr)")
        } else {
            #expect(run.stderr.contains("diary-reminder: error: due work left undelivered"), "\(run.stderr)")
            // The summary is still printed, and the devices stay retryable.
            #expect(run.stdout.contains("retry=1"), "\(run.stdout)")
            #expect(
                try await setup.harness.db.count("SELECT count(*) FROM notification_logs WHERE status = 'retry'") == 1)
        }
        #expect(!run.stderr.contains("BEGIN PRIVATE KEY") && !run.stderr.contains(hexToken("aa", 1)))
    }

    /// Dead tokens and skips are not a provider's trouble: exit 0.
    @Test func onlyDeadTokensExitZero() async throws {
        let setup = try await Self.setUp(.none)
        defer { Task { await setup.harness.stop() } }
        try await setup.harness.addUser("u2", devices: [("dead-u2", .fcm, .android)])
        let run = try await Executables.run("diary-reminder", setup.arguments, environment: setup.environment)
        #expect(run.status == 0, "\(run.stderr)")
        #expect(run.stdout.contains("token_dead=1"), "\(run.stdout)")
    }

    /// `--log-format json` (or PUSH_LOG_FORMAT): every line on stderr is one JSON object, the final error line
    /// included, for every job; the trouble lines carry their fields.
    @Test func jsonLogLinesParseForEveryJob() async throws {
        let setup = try await Self.setUp(.apnsKeyRefused)
        defer { Task { await setup.harness.stop() } }
        func objects(_ stderr: String, _ label: String) throws -> [[String: Any]] {
            let lines = stderr.split(separator: "\n")
            #expect(!lines.isEmpty, "\(label): no log lines")
            return try lines.map { line in
                let object = try JSONSerialization.jsonObject(with: Data(line.utf8)) as? [String: Any]
                return try #require(object, "\(label): not a JSON object: \(line)")
            }
        }
        let run = try await Executables.run(
            "diary-reminder", setup.arguments + ["--log-format", "json"], environment: setup.environment)
        #expect(run.status == 77)
        let lines = try objects(run.stderr, "diary-reminder")
        let trouble = try #require(lines.first { $0["cause"] as? String == "credentials" })
        #expect(
            trouble["provider"] as? String == "apns" && trouble["devices"] as? String == "1"
                && trouble["level"] as? String == "error")
        #expect(
            trouble["job"] as? String == "diary-reminder" && trouble["run"] is String && trouble["timestamp"] is String)
        #expect(
            (trouble["reasons"] as? [String])?.isEmpty == false
                && (trouble["advice"] as? String)?.contains("PUSH_APNS_KEY_ID") == true)
        #expect(lines.last?["exit_code"] as? String == "77")

        // The hook and the janitor, each in a case that logs: a warning APNs refuses, probes FCM cannot answer.
        let hook = try await Executables.run(
            "content-limit-hook",
            [
                "--database", setup.harness.db.path, "--now", "2026-11-23T12:00:00Z",
                "--user", "u1", "--used", "27", "--limit", "30",
            ],
            environment: setup.environment.merging(["PUSH_LOG_FORMAT": "json"]) { $1 })
        #expect(hook.status == 77, "\(hook.stderr)")
        let hookLines = try objects(hook.stderr, "content-limit-hook")
        #expect(hookLines.contains { $0["cause"] as? String == "credentials" && $0["run"] is String }, "\(hook.stderr)")
        // Not seen for 40 days: past the probe age (30), short of stale (90).
        try await setup.harness.db.execute(
            "UPDATE user_devices SET last_seen = \(setup.harness.db.ts(instant("2026-10-14T12:00:00Z")))")
        let janitor = try await Executables.run(
            "token-janitor",
            [
                "--database", setup.harness.db.path, "--now", "2026-11-23T12:00:00Z",
                "--probe", "--log-format", "json",
            ],
            environment: setup.environment.merging(["PUSH_FCM_ENDPOINT": "https://127.0.0.1:1"]) { $1 })
        #expect(janitor.status == 69, "\(janitor.status) \(janitor.stdout) \(janitor.stderr)")
        let janitorLines = try objects(janitor.stderr, "token-janitor")
        #expect(
            janitorLines.contains { $0["cause"] as? String == "unavailable" && $0["run"] is String },
            "\(janitor.stderr)")
        let bad = try await Executables.run(
            "token-janitor", ["--database", setup.harness.db.path, "--log-format", "yaml"])
        #expect(bad.status == 64 && bad.stderr.contains("unknown log format yaml"), "\(bad.stderr)")
    }

    /// The metrics file after a failing and a succeeding run (each replacing it whole, the last success carried
    /// over a failure), checked by promtool; the heartbeat's start, fail and success pings with the summary.
    @Test func metricsFileAndHeartbeatFollowEveryRun() async throws {
        let setup = try await Self.setUp(.apnsKeyRefused)
        defer { Task { await setup.harness.stop() } }
        let recorder = try await HTTPRecorder()
        defer { Task { await recorder.stop() } }
        let metrics = setup.harness.db.directory.appendingPathComponent("diary-reminder.prom")
        let observed = ["--metrics-file", metrics.path, "--ping-url", "http://127.0.0.1:\(recorder.port)/ping/abc"]
        let database = ["--database", setup.harness.db.path]
        func value(_ name: String, _ labels: String) throws -> Double? {
            let text = try String(contentsOf: metrics, encoding: .utf8)
            return text.split(separator: "\n").first { $0.hasPrefix("\(name){\(labels)} ") }
                .flatMap { $0.split(separator: " ").last }.flatMap { Double($0) }
        }
        func checkFormat() throws {
            let text = try String(contentsOf: metrics, encoding: .utf8)
            if FileManager.default.isExecutableFile(atPath: "/usr/bin/promtool") {
                let check = Process()
                check.executableURL = URL(fileURLWithPath: "/usr/bin/promtool")
                check.arguments = ["check", "metrics"]
                let input = Pipe()
                let output = Pipe()
                check.standardInput = input
                check.standardOutput = output
                check.standardError = output
                try check.run()
                input.fileHandleForWriting.write(Data(text.utf8))
                try input.fileHandleForWriting.close()
                check.waitUntilExit()
                let said = String(decoding: Executables.drain(output), as: UTF8.self)
                #expect(check.terminationStatus == 0, "promtool check metrics: \(said)\n\(text)")
            } else {
                // Without promtool: every sample line is `name{labels} value`, each family announced by HELP and TYPE.
                for line in text.split(separator: "\n") where !line.hasPrefix("#") {
                    #expect(line.wholeMatch(of: /[a-z_]+\{([a-z_]+="[^"]*",?)*\} -?[0-9.e+]+/) != nil, "\(line)")
                }
            }
        }

        // 1. APNs refuses the key: 77, and the file says so; no success yet.
        let failed = try await Executables.run(
            "diary-reminder", database + ["--now", "2026-11-23T20:00:00Z"] + observed,
            environment: setup.environment)
        #expect(failed.status == 77)
        try checkFormat()
        #expect(try value("diary_push_last_run_exit_code", #"job="diary-reminder""#) == 77)
        #expect(
            try value("diary_push_run_devices_left", #"job="diary-reminder",provider="apns",cause="credentials""#) == 1)
        #expect(
            try value("diary_push_run_devices_left", #"job="diary-reminder",provider="fcm",cause="unavailable""#) == 0)
        #expect(try value("diary_push_run_users", #"job="diary-reminder",state="retry""#) == 1)
        #expect(
            try value("diary_push_run_deliveries", #"job="diary-reminder",provider="fcm",outcome="delivered""#) == 1)
        #expect(
            try value("diary_push_run_deliveries", #"job="diary-reminder",provider="apns",outcome="credentials""#) == 1)
        #expect(try value(MetricsFile.lastSuccessName, #"job="diary-reminder""#) == nil)

        // 2. The key fixed: the next run delivers the pending iPhone; the file now holds this run's figures.
        var fixed = setup.environment
        fixed["PUSH_APNS_KEY_ID"] = SimulatorCredentials.keyID
        let succeeded = try await Executables.run(
            "diary-reminder", database + ["--now", "2026-11-23T20:15:00Z"] + observed, environment: fixed)
        #expect(succeeded.status == 0, "\(succeeded.stderr)")
        try checkFormat()
        #expect(try value("diary_push_last_run_exit_code", #"job="diary-reminder""#) == 0)
        #expect(
            try value("diary_push_run_devices_left", #"job="diary-reminder",provider="apns",cause="credentials""#) == 0)
        #expect(try value("diary_push_run_users", #"job="diary-reminder",state="taken_over""#) == 1)
        #expect(
            try value("diary_push_run_deliveries", #"job="diary-reminder",provider="apns",outcome="delivered""#) == 1)
        #expect(try value("diary_push_run_credential_mints", #"job="diary-reminder",provider="apns""#) == 1)
        #expect(
            try value(MetricsFile.lastSuccessName, #"job="diary-reminder""#) == Double(instant("2026-11-23T20:15:00Z")))

        // 3. A failure after it keeps the last success (the dead-man alert's input).
        let again = try await Executables.run(
            "diary-reminder",
            database + ["--now", "2026-11-23T20:30:00Z", "--apns-endpoint", "https://127.0.0.1:1"] + observed,
            environment: fixed)
        #expect(again.status == 0 || again.status == 69, "\(again.stderr)")
        #expect(try value(MetricsFile.lastSuccessName, #"job="diary-reminder""#) != nil)

        // 4. A metrics file that cannot be written is logged and changes nothing else.
        let unwritable = try await Executables.run(
            "diary-reminder",
            database + ["--now", "2026-11-23T20:45:00Z", "--metrics-file", "/nonexistent/dir/m.prom"],
            environment: fixed)
        #expect(unwritable.status == 0, "\(unwritable.stderr)")
        #expect(unwritable.stderr.contains("metrics not written"), "\(unwritable.stderr)")
        // Saying why as the system does (it said "You don't have permission." of a directory that does not exist).
        #expect(unwritable.stderr.contains("No such file or directory"), "\(unwritable.stderr)")

        // The heartbeat: start and fail, then start and success, each end with the summary as its body.
        let pings = recorder.requests
        #expect(
            pings.prefix(4).map(\.path) == ["/ping/abc/start", "/ping/abc/fail", "/ping/abc/start", "/ping/abc"],
            "\(pings)")
        #expect(pings.allSatisfy { $0.method == "POST" })
        let failBody = try #require(pings.dropFirst().first).body
        let object = try JSONSerialization.jsonObject(with: Data(failBody.utf8)) as? [String: Any]
        #expect(object?["job"] as? String == "diary-reminder" && object?["retry"] as? Int == 1, "\(failBody)")
    }

    /// A heartbeat service that cannot be reached is logged; the run's outcome is its own.
    @Test func anUnreachablePingNeverFailsTheRun() async throws {
        let setup = try await Self.setUp(.none)
        defer { Task { await setup.harness.stop() } }
        let run = try await Executables.run(
            "diary-reminder", setup.arguments + ["--ping-url", "http://127.0.0.1:1/ping"],
            environment: setup.environment)
        #expect(run.status == 0, "\(run.stderr)")
        #expect(run.stderr.contains("heartbeat ping failed"), "\(run.stderr)")
        let bad = try await Executables.run(
            "diary-reminder", setup.arguments + ["--ping-url", "ftp://x"], environment: setup.environment)
        #expect(bad.status == 64 && bad.stderr.contains("not an http(s) URL"), "\(bad.stderr)")
    }

    /// An https heartbeat trusts the CA certificates `--ca-file` names, as the providers do (it read only
    /// PUSH_CA_FILE): both jobs ping a server whose certificate only that CA signed. Without it, the ping
    /// fails, is logged, and the run's outcome is its own.
    @Test func anHTTPSPingTrustsTheCAFileFlag() async throws {
        let setup = try await Self.setUp(.none)
        defer { Task { await setup.harness.stop() } }
        let credentials = setup.harness.simulator.credentials
        let recorder = try await HTTPRecorder(tls: credentials)
        defer { Task { await recorder.stop() } }
        var environment = setup.environment
        environment["PUSH_CA_FILE"] = nil
        let ping = ["--ping-url", "https://127.0.0.1:\(recorder.port)/ping"]
        for job in ["diary-reminder", "token-janitor"] {
            let before = recorder.requests.count
            let run = try await Executables.run(
                job, setup.arguments + ["--ca-file", credentials.caFile] + ping, environment: environment)
            #expect(run.status == 0, "\(job): \(run.stderr)")
            #expect(!run.stderr.contains("heartbeat"), "\(job): \(run.stderr)")
            #expect(recorder.requests.dropFirst(before).map(\.path) == ["/ping/start", "/ping"], "\(job)")
        }
        let untrusted = try await Executables.run("token-janitor", setup.arguments + ping, environment: environment)
        #expect(untrusted.status == 0, "\(untrusted.stderr)")
        #expect(untrusted.stderr.contains("heartbeat ping failed"), "\(untrusted.stderr)")
        #expect(recorder.requests.count == 4)
        // A CA file that cannot be read stops the run before it starts, whichever job and however the URL came.
        environment["PUSH_PING_URL"] = "https://127.0.0.1:\(recorder.port)/ping"
        let missing = try await Executables.run(
            "token-janitor", setup.arguments + ["--ca-file", "/nonexistent/ca.pem"], environment: environment)
        #expect(missing.status == 66, "\(missing.stderr)")
        #expect(missing.stderr.contains("cannot read the CA file /nonexistent/ca.pem"), "\(missing.stderr)")
        #expect(!missing.stderr.contains("PUSH_PING_URL"), "\(missing.stderr)")
        #expect(recorder.requests.count == 4)
    }

    /// docs/alerts.yml is valid for Prometheus, and each rule names a metric the jobs write.
    @Test func theExampleAlertRulesAreValid() throws {
        let rules = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
            .deletingLastPathComponent().appendingPathComponent("docs/alerts.yml")
        let text = try String(contentsOf: rules, encoding: .utf8)
        for metric in [
            "diary_push_last_success_timestamp_seconds", "diary_push_run_devices_left", "diary_push_run_deliveries",
            "diary_push_run_stopped_early", "diary_push_run_earlier_runs_without_end", MetricsFile.missedDevicesCounter,
        ] {
            #expect(text.contains(metric))
        }
        try #require(
            FileManager.default.isExecutableFile(atPath: "/usr/bin/promtool"),
            "promtool is missing: scripts/test installs Debian's prometheus package")
        let check = Process()
        check.executableURL = URL(fileURLWithPath: "/usr/bin/promtool")
        check.arguments = ["check", "rules", rules.path]
        let output = Pipe()
        check.standardOutput = output
        check.standardError = output
        try check.run()
        check.waitUntilExit()
        let said = String(decoding: Executables.drain(output), as: UTF8.self)
        #expect(check.terminationStatus == 0 && said.contains("SUCCESS: 9 rules found"), "\(said)")
        // The misconfiguration alert reads the cause the jobs write (issue 77).
        #expect(text.contains(#"diary_push_run_devices_left{cause="misconfigured"}"#))
    }
}

/// Issue 24: "does the reminder work?" — the report's per-message section, on a seeded history whose
/// answers are known, on both stores.
@Suite struct ReminderEffectReportTests {
    @Test func wilsonIntervalsMatchKnownValues() {
        let quarter = ReminderEffect.share(1, of: 4)
        #expect(abs(quarter.low - 0.0456) < 0.001 && abs(quarter.high - 0.6994) < 0.001, "\(quarter)")
        let all = ReminderEffect.share(2, of: 2)
        #expect(abs(all.low - 0.3424) < 0.001 && all.high == 1, "\(all)")
        #expect(ReminderEffect.share(0, of: 0) == ReminderEffect.Share(count: 0, share: 0, low: 0, high: 0))
    }

    @Test(arguments: Backend.allCases)
    func theReportTellsWhichMessageMakesPeopleWrite(_ backend: Backend) async throws {
        let db = try await TemporaryDatabase(backend)
        let remindedUTC = instant("2026-11-20T20:00:00Z")
        // (user, zone, locale, message, reminded at, status, entry at)
        let history: [(String, String, String, Int, Int64, String, Int64?)] = [
            ("a", "UTC", "en", 0, remindedUTC, "sent", remindedUTC + 1800),  // within 3 h, that day
            ("b", "UTC", "en", 0, remindedUTC, "sent", remindedUTC + 3 * 3600 + 1800),  // 3.5 h: that day only
            ("c", "UTC", "en", 0, remindedUTC, "partial", remindedUTC + 4 * 3600 + 1800),  // next day: neither
            ("d", "UTC", "en", 0, remindedUTC, "sent", nil),
            ("e", "UTC", "en", 1, remindedUTC, "sent", remindedUTC + 300),
            ("f", "UTC", "en", 1, remindedUTC, "sent", remindedUTC + 2 * 3600 + 3540),
            // 20:00 in Tokyo is 11:00 UTC; 00:30 the next Tokyo day is 15:30 UTC.
            ("g", "Asia/Tokyo", "ja", 2, instant("2026-11-20T11:00:00Z"), "sent", instant("2026-11-20T15:30:00Z")),
            ("h", "Asia/Tokyo", "ja", 2, instant("2026-11-20T11:00:00Z"), "sent", instant("2026-11-20T13:00:00Z")),
            // Not counted: left for retry, and outside the window.
            ("i", "UTC", "en", 0, remindedUTC, "retry", remindedUTC + 60),
            ("j", "UTC", "en", 0, instant("2026-11-01T20:00:00Z"), "sent", instant("2026-11-01T20:01:00Z")),
        ]
        for (user, zone, locale, message, at, status, entry) in history {
            try await db.store.upsertUser(UserProfile(id: user, timezone: zone, locale: locale), now: 0)
            let period = zone == "UTC" ? String(Timestamps.format(at).prefix(10)) : "2026-11-20"
            try await db.execute(
                """
                INSERT INTO notification_logs (user_id, notification_type, period_key, status, message_index, locale, run_id,
                                               claimed_at, finished_at, updated_at)
                VALUES ('\(user)', 'diary_reminder', '\(period)', '\(status)', \(message), '\(locale)', 'r',
                        \(db.ts(at)), \(db.ts(at + 2)), \(db.ts(at + 2)))
                """)
            if let entry {
                try await db.execute(
                    "INSERT INTO diary_entries (user_id, created_at) VALUES ('\(user)', \(db.ts(entry)))")
            }
        }
        // An entry before the reminder does not count for it.
        try await db.execute(
            "INSERT INTO diary_entries (user_id, created_at) VALUES ('d', \(db.ts(remindedUTC - 600)))")
        let report = try await db.store.fullHealthReport(
            from: instant("2026-11-14T00:00:00Z"), to: instant("2026-11-21T00:00:00Z"))
        let effect = report.reminderEffect
        #expect(effect.map { "\($0.locale)#\($0.messageIndex)" } == ["en#0", "en#1", "ja#2"])
        let en0 = try #require(effect.first)
        let en1 = effect[1]
        let ja2 = effect[2]
        #expect(en0.reminded == 4 && en0.within3h.count == 1 && en0.sameLocalDay.count == 2)
        #expect(abs(en0.within3h.low - 0.0456) < 0.001 && abs(en0.within3h.high - 0.6994) < 0.001)
        #expect(en1.reminded == 2 && en1.within3h.count == 2 && en1.sameLocalDay.count == 2)
        #expect(ja2.reminded == 2 && ja2.within3h.count == 1 && ja2.sameLocalDay.count == 1)
        #expect(en0.title == CopyCatalog.builtIn.message(.diaryReminder, locale: "en", index: 0)?.title)
        // Text, JSON and the HTML page all carry the section.
        #expect(report.text.contains("en #0 reminded=4 3h= 25.0 %"), "\(report.text)")
        let json = try JSONSerialization.jsonObject(with: Data(report.json.utf8)) as? [String: Any]
        #expect((json?["reminder_effect"] as? [[String: Any]])?.count == 3)
        #expect(report.html.contains("Does the reminder work?") && report.html.contains("<rect"))
    }
}

/// Which translations would reach the most people: the report names the languages of the users reminded in the
/// window whom the catalog has no words for, on both stores. Nothing said so: their reminders went out in English,
/// and the report showed them under `en`.
@Suite struct ReadersWithoutWordsReportTests {
    @Test(arguments: Backend.allCases)
    func theReportNamesTheLanguagesTheCatalogLacks(_ backend: Backend) async throws {
        let db = try await TemporaryDatabase(backend)
        let at = instant("2026-11-20T20:00:00Z")
        // (user, locale, status, claimed at, period)
        let history: [(String, String, String, Int64, String)] = [
            ("a", "pl_PL", "sent", at, "2026-11-20"),
            ("a", "pl_PL", "sent", at - 86_400, "2026-11-19"),  // the same user on another day: one user
            ("b", "pl", "partial", at, "2026-11-20"),
            ("c", "zh_TW", "sent", at, "2026-11-20"),
            ("d", "en-AU", "sent", at, "2026-11-20"),  // English: served
            ("e", "de-CH", "sent", at, "2026-11-20"),  // the catalog has de
            ("f", "tr", "retry", at, "2026-11-20"),  // not sent (yet)
            ("g", "tr", "sent", instant("2026-11-01T20:00:00Z"), "2026-11-01"),  // before the window
        ]
        for (user, locale, status, claimed, period) in history {
            try await db.store.upsertUser(UserProfile(id: user, timezone: "UTC", locale: locale), now: 0)
            try await db.execute(
                """
                INSERT INTO notification_logs (user_id, notification_type, period_key, status, message_index, locale, run_id,
                                               claimed_at, finished_at, updated_at)
                VALUES ('\(user)', 'diary_reminder', '\(period)', '\(status)', 0, 'en', 'r',
                        \(db.ts(claimed)), \(db.ts(claimed + 2)), \(db.ts(claimed + 2)))
                """)
        }
        let report = try await db.store.fullHealthReport(
            from: instant("2026-11-14T00:00:00Z"), to: instant("2026-11-21T00:00:00Z"))
        #expect(report.readersWithoutWords.map { "\($0.key) \($0.count)" } == ["pl 2", "zh-Hant 1"])
        #expect(
            report.text.contains(
                "reminded users whose language has no words in the catalog (sent en), by language:\n  pl: 2\n  zh-Hant: 1"
            ), "\(report.text)")
        let json = try JSONSerialization.jsonObject(with: Data(report.json.utf8)) as? [String: Any]
        #expect(
            (json?["readers_without_words"] as? [[String: Any]])?.first?["key"] as? String == "pl", "\(report.json)")
        #expect(report.html.contains("<td class=\"text\">zh-Hant</td><td>1</td>"))
        // A quiet window says none.
        let quiet = try await db.store.fullHealthReport(
            from: instant("2026-10-01T00:00:00Z"), to: instant("2026-10-08T00:00:00Z"))
        #expect(quiet.readersWithoutWords.isEmpty)
        #expect(quiet.text.contains("by language:\n  none"))
    }
}

/// The metrics files carry what the summaries say about leases and dropped partitions: an operator's
/// dashboard sees runners sharing a slot, and the janitor dropping history by the partition.
@Suite struct LeaseAndPartitionMetricsTests {
    /// The metrics file of a reminder run whose summary is as `change` sets it.
    static func reminderMetrics(_ change: (inout RunSummary) -> Void = { _ in }) -> String {
        var summary = RunSummary(job: "diary-reminder", runID: "r", now: 0, dryRun: false)
        change(&summary)
        return MetricsFile.text(
            summary, job: "diary-reminder", now: 0, exitCode: 0, durationSeconds: 1, previousLastSuccess: nil)
    }

    @Test func leasesAndDroppedPartitionsAreSeries() {
        let reminder = Self.reminderMetrics {
            $0.bucketsLeased = 3
            $0.buckets = 12
            $0.otherRunners = 2
        }
        #expect(reminder.contains(#"diary_push_run_buckets{job="diary-reminder",kind="leased"} 3"#), "\(reminder)")
        #expect(reminder.contains(#"diary_push_run_buckets{job="diary-reminder",kind="total"} 12"#))
        #expect(reminder.contains(#"diary_push_run_other_runners{job="diary-reminder"} 2"#))
        // A run that leased nothing (one page, or a dry run) reports no bucket series.
        #expect(!Self.reminderMetrics().contains("diary_push_run_buckets"))

        var janitor = JanitorSummary(runID: "j", now: "1970-01-01T00:00:00Z", dryRun: false)
        janitor.partitionsDropped = ["notification_logs_m2025_10", "notification_deliveries_m2025_10"]
        let text = MetricsFile.text(
            janitor, job: "token-janitor", now: 0, exitCode: 0, durationSeconds: 1, previousLastSuccess: nil)
        #expect(
            text.contains(#"diary_push_janitor_rows{job="token-janitor",action="partitions_dropped"} 2"#), "\(text)")
    }
}

/// The metrics file had no series for the quota warnings a reminder run delivers, holds again or withdraws: a
/// dashboard could not tell a morning that sent every held warning from one that withdrew them all.
@Suite struct QuotaWarningMetricsTests {
    @Test func theRunsQuotaWarningsAreSeriesByState() {
        let text = LeaseAndPartitionMetricsTests.reminderMetrics {
            $0.warningsDelivered = 5
            $0.warningsHeld = 2
            $0.warningsWithdrawn = 1
        }
        for (state, count) in [("delivered", 5), ("held", 2), ("withdrawn", 1)] {
            #expect(
                text.contains(#"diary_push_run_quota_warnings{job="diary-reminder",state="\#(state)"} \#(count)"#),
                "\(text)")
        }
        // A run with none reports zeros, so that the series do not vanish between runs.
        #expect(
            LeaseAndPartitionMetricsTests.reminderMetrics().contains(
                #"diary_push_run_quota_warnings{job="diary-reminder",state="withdrawn"} 0"#))
    }
}

@Suite struct ProviderTroubleAdviceTests {
    func advice(_ provider: Provider, _ reasons: [String]) -> String {
        ProviderTrouble(provider: DeliveryChannel(provider), cause: .unavailable, devices: 1, reasons: reasons).advice
    }

    /// Measured: a warning APNs throttled (429 TooManyRequests, about its device token) left the advice to check
    /// DNS, the firewall and the provider's status page, as FCM's project quota (429 QUOTA_EXCEEDED) did. Neither
    /// is a network fault: the advice now says what each is and what to change.
    @Test func throttlingIsNotAdvisedAsANetworkFault() {
        let network = advice(.apns, ["connection refused"])
        #expect(network.contains("check the network path"))
        let apns = advice(.apns, ["TooManyRequests"])
        #expect(!apns.contains("network path") && apns.contains("same device"), "\(apns)")
        let fcm = advice(.fcm, ["QUOTA_EXCEEDED"])
        #expect(!fcm.contains("network path") && fcm.contains("PUSH_FCM_RATE"), "\(fcm)")
        // A throttle among network faults: the network advice, which the throttle's does not replace.
        #expect(advice(.fcm, ["UNAVAILABLE", "QUOTA_EXCEEDED"]).contains("network path"))
    }
}

@Suite struct ConnectionErrorTextTests {
    /// Measured: a provider or a PostgreSQL server that refused the connection was described as NIO prints its
    /// error, `Connection errors: SingleConnectionFailure(target: [IPv4]127.0.0.1/127.0.0.1:1, error: connection
    /// reset (error set): Connection refused (errno: 111))`. It is now what the system said, once for every address
    /// that said the same; a name that does not resolve says that.
    @Test func aRefusedConnectionIsDescribedAsTheSystemSaysIt() async throws {
        for host in ["127.0.0.1", "localhost"] {
            let error = await #expect(throws: (any Error).self) {
                try await ClientBootstrap(group: MultiThreadedEventLoopGroup.singleton).connect(host: host, port: 1)
                    .get().close()
            }
            #expect(error.map(ConnectionErrorText.describe) == "Connection refused", "\(host)")
        }
        // A name that resolves to nothing (`.invalid` never does) says so, where NIO's text listed no failure.
        let unresolved = await #expect(throws: (any Error).self) {
            try await ClientBootstrap(group: MultiThreadedEventLoopGroup.singleton)
                .connect(host: "no-such-host.invalid", port: 443).get().close()
        }
        #expect(unresolved.map(ConnectionErrorText.describe) == "cannot resolve no-such-host.invalid")
    }
}

/// How long each provider took to answer, in the report: the deliveries record it (`latency_ms`, from the request
/// written to its answer), and nothing showed it. An operator asking "is APNs slow this week?" read the table.
@Suite struct AnswerTimesReportTests {
    /// Each percentile is the upper bound of the bucket it falls in; past the last bucket, "> 30 s".
    @Test func eachProvidersAnswerTimesAreItsPercentilesByBucket() {
        var figures = HealthFigures()
        figures.answerTimes = [
            ("apns", 20, 50), ("apns", 50, 45), ("apns", 500, 4), ("apns", 30_000, 1),
            ("fcm", 100, 10), ("fcm", HealthReport.AnswerTimes.beyondBuckets, 1),
        ]
        let report = HealthReport(
            from: instant("2026-11-15T00:00:00Z"), to: instant("2026-11-22T00:00:00Z"), figures: figures)
        #expect(
            report.answerTimes == [
                HealthReport.AnswerTimes(provider: "apns", answers: 100, p50Ms: 20, p95Ms: 50, p99Ms: 500),
                HealthReport.AnswerTimes(
                    provider: "fcm", answers: 11, p50Ms: 100, p95Ms: HealthReport.AnswerTimes.beyondBuckets,
                    p99Ms: HealthReport.AnswerTimes.beyondBuckets),
            ])
        #expect(
            report.text.contains(
                """
                provider answer times (request written to answer; the bucket of each percentile):
                  apns: p50 ≤ 20 ms, p95 ≤ 50 ms, p99 ≤ 500 ms (100 answers)
                  fcm: p50 ≤ 100 ms, p95 > 30 s, p99 > 30 s (11 answers)

                """), "\(report.text)")
        #expect(report.html.contains("<h2>Provider answer times</h2>"))
        #expect(report.html.contains("<td class=\"text\">fcm</td><td>11</td><td class=\"text\">≤ 100 ms</td>"))
        let quiet = HealthReport(
            from: instant("2026-11-15T00:00:00Z"), to: instant("2026-11-22T00:00:00Z"), figures: HealthFigures())
        #expect(quiet.text.contains("the bucket of each percentile):\n  none\n"), "\(quiet.text)")
    }

    /// Both stores count the window's answers per provider and bucket; a delivery with no answer time (the outbox)
    /// and one outside the window are left out.
    @Test(arguments: Backend.allCases)
    func theStoresCountTheAnswersOfTheWindow(_ backend: Backend) async throws {
        let db = try await TemporaryDatabase(backend)
        try await db.store.addUser("u", time: "20:00")
        let at = instant("2026-11-20T20:00:00Z")
        try await db.execute(
            """
            INSERT INTO notification_logs (user_id, notification_type, period_key, status, run_id, claimed_at, updated_at)
            VALUES ('u', 'diary_reminder', '2026-11-20', 'sent', 'r', \(db.ts(at)), \(db.ts(at)))
            """)
        let log = try await db.count("SELECT max(id) FROM notification_logs")
        for (provider, latency, created) in [
            ("apns", "12", at), ("apns", "40", at), ("apns", "41", at), ("apns", "180", at), ("apns", "900", at),
            ("fcm", "70", at), ("outbox", "NULL", at), ("fcm", "9000", instant("2026-11-01T20:00:00Z")),
        ] {
            try await db.execute(
                """
                INSERT INTO notification_deliveries (log_id, provider, outcome, attempts, latency_ms, run_id, created_at)
                VALUES (\(log), '\(provider)', 'delivered', 1, \(latency), 'r', \(db.ts(created)))
                """)
        }
        let report = try await db.store.healthReport(
            from: instant("2026-11-14T00:00:00Z"), to: instant("2026-11-21T00:00:00Z"))
        #expect(
            report.answerTimes == [
                HealthReport.AnswerTimes(provider: "apns", answers: 5, p50Ms: 50, p95Ms: 1_000, p99Ms: 1_000),
                HealthReport.AnswerTimes(provider: "fcm", answers: 1, p50Ms: 100, p95Ms: 100, p99Ms: 100),
            ])
        #expect(report.text.contains("  apns: p50 ≤ 50 ms, p95 ≤ 1 s, p99 ≤ 1 s (5 answers)"), "\(report.text)")
        let json = try JSONSerialization.jsonObject(with: Data(report.json.utf8)) as? [String: Any]
        let first = (json?["answer_times"] as? [[String: Any]])?.first
        #expect(first?["provider"] as? String == "apns" && first?["p95_ms"] as? Int == 1_000, "\(report.json)")
    }
}

import Foundation
import JobKitTestSupport
import NIOConcurrencyHelpers
import Testing

@testable import JobKit

@Suite(.serialized) struct ProcessTests {
    @Test(arguments: Backend.allCases) func twoProcessesAtOnceClaimFiveThousandDueUsersExactlyOnce(_ backend: Backend)
        async throws
    {
        let db = try await TemporaryDatabase(backend)
        let seeded = try await Executables.run(
            "pushctl",
            [
                "seed", "--database", db.path, "--users", "8000", "--due-at",
                "2026-11-21T20:00:00Z", "--due-count", "5000", "--random-seed", "42",
            ])
        #expect(seeded.status == 0, "\(seeded.stderr)")
        let outboxes = ["a", "b"].map { db.directory.appendingPathComponent("outbox-\($0).jsonl").path }
        let started = try outboxes.map { outbox in
            try Executables.start(
                "diary-reminder",
                [
                    "--database", db.path, "--now", "2026-11-21T20:00:00Z",
                    "--outbox", outbox, "--format", "json",
                ])
        }
        var results: [Executables.Result] = []
        for process in started { results.append(await Executables.finish(process)) }
        for result in results { #expect(result.status == 0, "\(result.stderr)") }
        let summaries = try results.map { try JSONDecoder().decode(SummaryFields.self, from: Data($0.stdout.utf8)) }
        #expect(summaries.map(\.claimed).reduce(0, +) == 5_000)
        #expect(try await db.count("SELECT count(*) FROM notification_logs") == 5_000)
        #expect(try await db.count("SELECT count(DISTINCT user_id) FROM notification_logs") == 5_000)
        #expect(try await db.count("SELECT count(*) FROM notification_logs WHERE status <> 'sent'") == 0)
        // Every active device of every due user got exactly one notification, across both outboxes.
        try await expectOneNotificationPerActiveDevice(db, outboxes: outboxes)
    }

    /// Every active device of every claimed user got exactly one notification across the outboxes, and one
    /// delivery row.
    func expectOneNotificationPerActiveDevice(_ db: TemporaryDatabase, outboxes: [String]) async throws {
        var sentTo: [String] = []
        for outbox in outboxes where FileManager.default.fileExists(atPath: outbox) {
            let text = try String(contentsOfFile: outbox, encoding: .utf8)
            for line in text.split(separator: "\n") {
                let object = try JSONSerialization.jsonObject(with: Data(line.utf8)) as? [String: Any]
                sentTo.append(try #require(object?["device"] as? String))
            }
        }
        #expect(sentTo.count == Set(sentTo).count)
        #expect(
            sentTo.count
                == (try await db.count(
                    """
                    SELECT count(*) FROM user_devices d JOIN notification_logs l ON l.user_id = d.user_id WHERE d.is_active
                    """)))
        #expect(
            sentTo.count
                == (try await db.count("SELECT count(*) FROM notification_deliveries WHERE outcome = 'delivered'")))
    }

    struct SummaryFields: Decodable {
        let claimed: Int
    }

    @Test func badInputsGetAClearMessageASysexitsCodeAndWriteNothing() async throws {
        let db = try await TemporaryDatabase()
        let now = ["--now", "2026-11-21T20:00:00Z"]
        let cases: [(arguments: [String], env: [String: String], status: Int32, message: String)] = [
            (["--database", db.path, "--now", "tomorrow", "--dry-run"], [:], 64, "--now"),
            (["--database", db.path, "--early-minutes", "30", "--dry-run"] + now, [:], 64, "--early-minutes"),
            (["--database", db.path, "--format", "xml", "--dry-run"] + now, [:], 64, "format"),
            (
                ["--database", db.path, "--dry-run"] + now, ["PUSH_CATCH_UP_MINUTES": "lots"], 78,
                "PUSH_CATCH_UP_MINUTES"
            ),
            (["--dry-run"] + now, [:], 78, "PUSH_DATABASE_URL"),
            (["--database", db.path] + now, [:], 78, "no provider configured"),
            (["--database", db.path] + now, ["PUSH_APNS_KEY_FILE": "/k.p8"], 78, "APNs is partly configured"),
            (
                ["--database", db.path, "--fcm-endpoint", "http://plain", "--fcm-service-account-file", "/x.json"]
                    + now, [:], 64, "not an https URL"
            ),
            // A file that cannot be read says why (each said "cannot read the … file …" and no more).
            (
                ["--database", db.path, "--fcm-service-account-file", "/nonexistent.json"] + now, [:], 66,
                "cannot read the FCM service-account file /nonexistent.json: No such file or directory"
            ),
            (
                [
                    "--database", db.path, "--apns-key-file", db.directory.path, "--apns-key-id", "K",
                    "--apns-team-id", "T", "--apns-topic", "t",
                ] + now, [:], 66, "cannot read the APNs key file \(db.directory.path): Is a directory"
            ),
            (
                ["--database", "postgres://app@127.0.0.1:1/x", "--dry-run"] + now, [:], 69,
                "cannot reach PostgreSQL at postgres://app@127.0.0.1:1/x"
            ),
            (
                ["--database", "postgres://app:hunter2@127.0.0.1:1/x?sslmode=sometimes", "--dry-run"] + now, [:], 78,
                "sslmode"
            ),
            (
                [
                    "--database", "postgres://app@127.0.0.1:1/x", "--dry-run", "--database-password-file",
                    "/nonexistent/pw",
                ] + now, [:], 66, "password file"
            ),
            // With no user in the URL the role is the name of the user the job runs as, as in libpq, whatever USER
            // says (it was USER, which cron and systemd units need not set, and then "postgres").
            (
                ["--database", "postgres://127.0.0.1:1/x", "--dry-run"] + now, ["USER": "someone-else"], 69,
                "cannot reach PostgreSQL at postgres://\(String(cString: getpwuid(geteuid())!.pointee.pw_name))@127.0.0.1:1/x"
            ),
            (["--database", db.path, "--dry-run", "--shard", "3/2"] + now, [:], 64, "--shard"),
            (["--database", db.path, "--dry-run"] + now, ["PUSH_SHARD": "one"], 78, "PUSH_SHARD"),
            (
                ["--database", db.directory.appendingPathComponent("missing.db").path, "--dry-run"] + now, [:], 66,
                "no database"
            ),
            (["--database", db.path, "--explain", "ghost"] + now, [:], 65, "unknown user ghost"),
            // A user id no user can have is a usage error naming the flag (it was "unknown user " and nothing).
            (["--database", db.path, "--explain", ""] + now, [:], 64, "--explain: a user id is 1 to 128 characters"),
            // A negative number after a space is checked against its range (it was ArgumentParser's "Missing value").
            (
                ["--database", db.path, "--dry-run", "--early-minutes", "-1"] + now, [:], 64,
                "--early-minutes must be within 0…14, got -1"
            ),
            (
                ["--database", db.path, "--dry-run", "--retry-budget-seconds", "-1"] + now, [:], 64,
                "--retry-budget-seconds must be within 0…3600, got -1"
            ),
            (
                ["--database", db.path, "--dry-run", "--fcm-rate", "-5"] + now, [:], 64,
                "--fcm-rate must be within 0…1000000, got -5"
            ),
            // A provider's rate and endpoint are checked also while the provider is not configured (both were
            // taken silently, to fail only once its credentials were added).
            (
                ["--database", db.path, "--dry-run", "--apns-rate=-5"] + now, [:], 64,
                "--apns-rate must be within 0…1000000, got -5"
            ),
            (["--database", db.path, "--dry-run"] + now, ["PUSH_FCM_RATE": "fast"], 78, "PUSH_FCM_RATE"),
            (
                ["--database", db.path, "--dry-run", "--apns-endpoint", "http://plain"] + now, [:], 64,
                "not an https URL"
            ),
            // An empty value on the command line (`--outbox "$UNSET"`) is a usage error naming the flag: the outbox
            // said "cannot create the outbox file " (73), the metrics file was skipped with an error line and exit 0.
            (["--database", db.path, "--outbox", ""] + now, [:], 64, "--outbox: empty"),
            // An outbox that cannot be created says why (it said "cannot create the outbox file …" and no more).
            (
                ["--database", db.path, "--outbox", db.directory.appendingPathComponent("no-dir/o.jsonl").path] + now,
                [:], 73, "no-dir/o.jsonl: No such file or directory"
            ),
            (["--database", db.path, "--outbox", "-", "--metrics-file", ""] + now, [:], 64, "--metrics-file: empty"),
            (["--database", db.path, "--dry-run", "--copy-catalog", ""] + now, [:], 64, "--copy-catalog: empty"),
            (
                ["--database", db.path, "--dry-run", "--fcm-android-channel-id", ""] + now, [:], 64,
                "--fcm-android-channel-id: empty"
            ),
            (["--database", "", "--dry-run"] + now, [:], 64, "--database: empty"),
            // A deep-link base that links cannot be built on (it was taken as is: "not a urlentries/new?date=…").
            (
                ["--database", db.path, "--dry-run", "--deep-link-base", "not a url"] + now, [:], 64,
                "--deep-link-base: not a URL base"
            ),
            (
                ["--database", db.path, "--dry-run"] + now, ["PUSH_DEEP_LINK_BASE": "https://example.com/app"], 78,
                "PUSH_DEEP_LINK_BASE: not a URL base"
            ),
            (
                ["--database", db.path, "--dry-run", "--ios-badge", "many"] + now, [:], 64,
                "--ios-badge: not a badge number from 0 to 99999 or none: many"
            ),
            (
                ["--database", db.path, "--dry-run"] + now, ["PUSH_IOS_BADGE": "-1"], 78,
                "PUSH_IOS_BADGE: not a badge number"
            ),
            (
                ["--database", db.path, "--copy-catalog", "/nonexistent.json", "--dry-run"] + now, [:], 66,
                "cannot read the copy catalog at /nonexistent.json: No such file or directory"
            ),
            (
                ["--database", db.path, "--copy-catalog", db.directory.path, "--dry-run"] + now, [:], 66,
                "cannot read the copy catalog at \(db.directory.path): Is a directory"
            ),
        ]
        for testCase in cases {
            let result = try await Executables.run("diary-reminder", testCase.arguments, environment: testCase.env)
            #expect(result.status == testCase.status, "\(testCase.arguments): \(result.stderr)")
            #expect(result.stderr.contains(testCase.message), "\(testCase.arguments): \(result.stderr)")
            #expect(!result.stderr.contains("hunter2"))
        }
        #expect(!FileManager.default.fileExists(atPath: db.directory.appendingPathComponent("missing.db").path))
        #expect(
            try await db.count("SELECT count(*) FROM notification_logs") + db.count("SELECT count(*) FROM job_runs")
                == 0)
    }

    /// The janitor's settings come from one table (``JanitorSetting``): the command line checks each flag
    /// against the range declared there, names the flag, and writes nothing.
    @Test func theJanitorChecksEveryNumberAgainstItsDeclaredRange() async throws {
        let db = try await TemporaryDatabase()
        let now = ["--database", db.path, "--now", "2026-11-21T20:00:00Z", "--dry-run"]
        for setting in JanitorSetting.all {
            guard case .number(_, let range) = setting.kind else { continue }
            for bad in [range.lowerBound - 1, range.upperBound + 1] {
                let result = try await Executables.run("token-janitor", now + [setting.flag, "\(bad)"])
                #expect(result.status == 64, "\(setting.flag) \(bad): \(result.stderr)")
                #expect(
                    result.stderr.contains(
                        "\(setting.flag) must be a whole number within \(range.lowerBound)…\(range.upperBound)"),
                    "\(result.stderr)")
            }
            // A negative number after a space too (it was ArgumentParser's "Missing value for '--stale-days'").
            let negative = try await Executables.run("token-janitor", now + [setting.flag, "-1"])
            #expect(negative.status == 64, "\(setting.flag) -1: \(negative.stderr)")
            #expect(
                negative.stderr.contains("\(setting.flag) must be a whole number within"), "\(negative.stderr)")
            let good = try await Executables.run("token-janitor", now + [setting.flag, "\(range.lowerBound)"])
            #expect(good.status == 0, "\(setting.flag) \(range.lowerBound): \(good.stderr)")
        }
        let days = try await Executables.run("token-janitor", ["report", "--database", db.path, "--days", "-3"])
        #expect(days.status == 64, "\(days.stderr)")
        #expect(days.stderr.contains("--days must be within 1…400"), "\(days.stderr)")
        // The report's file: an empty path is a usage error (it was 73 "cannot write the report to " and
        // nothing), one that cannot be written says why, and a written one holds the whole report.
        let report = ["report", "--database", db.path, "--now", "2026-11-21T20:00:00Z", "--output"]
        let empty = try await Executables.run("token-janitor", report + [""])
        #expect(empty.status == 64, "\(empty.stderr)")
        #expect(empty.stderr.contains("--output: empty"), "\(empty.stderr)")
        let missing = db.directory.appendingPathComponent("no-such-directory/report.txt").path
        let unwritable = try await Executables.run("token-janitor", report + [missing])
        #expect(unwritable.status == 73, "\(unwritable.stderr)")
        #expect(
            unwritable.stderr.contains("cannot write the report to \(missing): No such file or directory"),
            "\(unwritable.stderr)")
        let file = db.directory.appendingPathComponent("report.txt").path
        let written = try await Executables.run("token-janitor", report + [file])
        #expect(written.status == 0, "\(written.stderr)")
        #expect(try String(contentsOfFile: file, encoding: .utf8).hasPrefix("delivery health "))
        #expect(try await db.count("SELECT count(*) FROM job_runs") == 0)
    }

    /// Issue 21, item 7: an empty file was migrated silently (and the hook then exited 65 after writing the
    /// schema into it); a directory gave 66 to writers but 74 "disk I/O error" to read-only opens; the file,
    /// which caches provider credentials, was created 0644.
    @Test func emptyFilesAndDirectoriesAreRefusedAndNewFilesAreTheOwnersOnly() async throws {
        let db = try await TemporaryDatabase()
        let empty = db.directory.appendingPathComponent("empty.sqlite").path
        #expect(FileManager.default.createFile(atPath: empty, contents: nil))
        let folder = db.directory.appendingPathComponent("a-folder").path
        try FileManager.default.createDirectory(atPath: folder, withIntermediateDirectories: true)
        let now = ["--now", "2026-11-21T20:00:00Z"]
        for (database, message) in [(empty, "empty file"), (folder, "is a directory")] {
            let runs: [(String, [String])] = [
                ("diary-reminder", ["--dry-run"]),
                ("diary-reminder", ["--outbox", db.directory.appendingPathComponent("o.jsonl").path]),
                ("content-limit-hook", ["--user", "w", "--used", "1", "--limit", "30"]),
                ("token-janitor", ["--dry-run"]),
            ]
            for (binary, arguments) in runs {
                let result = try await Executables.run(binary, ["--database", database] + now + arguments)
                #expect(result.status == 66, "\(binary) \(arguments) on \(message): \(result.status) \(result.stderr)")
                #expect(result.stderr.contains(message), "\(binary): \(result.stderr)")
            }
        }
        #expect(try FileManager.default.attributesOfItem(atPath: empty)[.size] as? NSNumber == 0)

        let created = db.directory.appendingPathComponent("new.sqlite").path
        let migrated = try await Executables.run("pushctl", ["migrate", "--database", created])
        #expect(migrated.status == 0, "\(migrated.stderr)")
        func mode(_ path: String) throws -> Int {
            (try FileManager.default.attributesOfItem(atPath: path)[.posixPermissions] as? NSNumber)?.intValue ?? -1
        }
        #expect(try mode(created) == 0o600)
        // A file that cannot be created says why (it said "cannot create the database file …" and no more).
        let nowhere = db.directory.appendingPathComponent("no-such-directory/new.sqlite").path
        let refused = try await Executables.run("pushctl", ["migrate", "--database", nowhere])
        #expect(refused.status == 73, "\(refused.stderr)")
        #expect(
            refused.stderr.contains("cannot create the database file \(nowhere): No such file or directory"),
            "\(refused.stderr)")
        // While a store has it open after a write, its WAL and shared memory exist, with the same mode.
        #expect(try mode(db.path) == 0o600)
        try await db.store.addUser("w")
        #expect(try mode(db.path + "-wal") == 0o600)
        #expect(try mode(db.path + "-shm") == 0o600)
    }

    /// Issue 21, item 7: an instant past what a period key can hold ended in a raw SQL message
    /// (`CHECK constraint failed: length(period_key)`). Every job now refuses instants outside the supported
    /// range with 64, before writing anything.
    @Test func instantsOutsideTheSupportedRangeAreUsageErrors() async throws {
        let db = try await TemporaryDatabase()
        try await db.store.addUser("w", time: "23:45")
        let before = try await db.contentDigest()
        for now in ["9999-12-31T23:59:59Z", "1999-12-31T23:59:59Z", "2200-01-01T00:00:00Z"] {
            let runs: [(String, [String])] = [
                (
                    "diary-reminder",
                    [
                        "--database", db.path, "--now", now, "--outbox",
                        db.directory.appendingPathComponent("o.jsonl").path,
                    ]
                ),
                (
                    "content-limit-hook",
                    ["--database", db.path, "--now", now, "--user", "w", "--used", "30", "--limit", "30", "--dry-run"]
                ),
                (
                    "content-limit-hook-full",
                    ["--database", db.path, "--now", now, "--user", "w", "--used", "30", "--limit", "30", "--dry-run"]
                ),
                ("token-janitor", ["--database", db.path, "--now", now, "--dry-run"]),
            ]
            for (binary, arguments) in runs {
                let result = try await Executables.run(binary, arguments)
                #expect(result.status == 64, "\(binary) --now \(now): \(result.status) \(result.stderr)")
                #expect(result.stderr.contains("outside the supported range"), "\(binary): \(result.stderr)")
            }
        }
        let edge = try await Executables.run(
            "diary-reminder", ["--database", db.path, "--now", "2199-12-31T23:45:00Z", "--dry-run"])
        #expect(edge.status == 0, "\(edge.stderr)")
        #expect(try await db.contentDigest() == before)
    }

    /// Issue 21, item 2: a full disk (here a file size limit, which fails `write` the same way) tears no line
    /// into the outbox: the file is cut back to where the page began, the claims stay retryable, the run exits
    /// 74 saying why, and the next run writes every notification exactly once.
    @Test(arguments: Backend.allCases) func aFullDiskLeavesTheOutboxWholeAndTheClaimsRetryable(_ backend: Backend)
        async throws
    {
        let db = try await TemporaryDatabase(backend)
        for n in 0..<20 { try await db.store.addUser("u\(n)", time: "20:00") }
        let outbox = db.directory.appendingPathComponent("outbox.jsonl")
        // Earlier runs' lines fill the file to 4 KiB below the limit (a limit, unlike a full disk, applies to the
        // database's files too: they stay far below it).
        let line = #"{"event":"outbox","user_id":"earlier","padding":"\#(String(repeating: "x", count: 980))"}"# + "\n"
        let earlier = String(repeating: line, count: (2048 * 1024 - 4096) / line.utf8.count)
        try earlier.write(to: outbox, atomically: false, encoding: .utf8)
        let arguments = ["--database", db.path, "--now", "2026-11-23T20:00:00Z", "--outbox", outbox.path]
        // SIGXFSZ ignored, so that a write past the limit fails with EFBIG, as one on a full disk fails with ENOSPC.
        let limited = await Executables.finish(
            try Executables.start(
                executable: URL(fileURLWithPath: "/bin/bash"),
                ["-c", "trap '' XFSZ; ulimit -f 2048; exec \"$0\" \"$@\"", try Executables.url("diary-reminder").path]
                    + arguments))
        #expect(limited.status == 74, "\(limited.status) \(limited.stderr)")
        #expect(
            limited.stderr.contains("outbox") && limited.stderr.contains("could not be written"), "\(limited.stderr)")
        // What the system said (EFBIG here, ENOSPC on a full disk), not Foundation's "The operation could not be
        // completed. (NSCocoaErrorDomain error 512.)"; and advice about the outbox's disk, not a provider's network.
        #expect(
            limited.stderr.contains("(File too large)") && !limited.stderr.contains("NSCocoaErrorDomain"),
            "\(limited.stderr)")
        #expect(
            limited.stderr.contains("advice=the outbox file could not be written")
                && !limited.stderr.contains("network path"), "\(limited.stderr)")
        #expect(try String(contentsOf: outbox, encoding: .utf8) == earlier, "the outbox holds part of the failed page")
        #expect(try await db.count("SELECT count(*) FROM notification_logs WHERE status = 'retry'") == 20)
        #expect(try await db.count("SELECT count(*) FROM job_runs WHERE outcome = 'failed'") == 1)

        let next = try await Executables.run(
            "diary-reminder",
            [
                "--database", db.path, "--now", "2026-11-23T20:15:00Z",
                "--outbox", outbox.path,
            ])
        #expect(next.status == 0, "\(next.stderr)")
        let lines = try String(contentsOf: outbox, encoding: .utf8).dropFirst(earlier.utf8.count).split(separator: "\n")
        let users = try lines.map { line in
            try #require(try JSONSerialization.jsonObject(with: Data(line.utf8)) as? [String: Any])["user_id"]
                as? String
        }
        #expect(users.count == 20 && Set(users).count == 20, "\(users)")
        #expect(try await db.count("SELECT count(*) FROM notification_logs WHERE status = 'sent'") == 20)

        // The hook alike: its warning is left retryable, the file untouched, exit 74.
        let before = try Data(contentsOf: outbox)
        let hook = await Executables.finish(
            try Executables.start(
                executable: URL(fileURLWithPath: "/bin/bash"),
                [
                    "-c", "trap '' XFSZ; ulimit -f 2048; exec \"$0\" \"$@\"",
                    try Executables.url("content-limit-hook").path,
                    "--database", db.path, "--now", "2026-11-23T12:00:00Z", "--outbox", outbox.path, "--user", "u1",
                    "--used", "27", "--limit", "30",
                ]))
        #expect(hook.status == 74, "\(hook.status) \(hook.stderr)")
        #expect(try Data(contentsOf: outbox) == before)
        #expect(
            try await db.count(
                "SELECT count(*) FROM notification_logs WHERE notification_type = 'content_limit_90' AND status = 'retry'"
            ) == 1)
    }

    /// `--version`'s line: the release, then, in a build from a checkout not at the release's tag, the commit
    /// (`0.10.0 (a8018d2-dirty)`: issue 68).
    static func isVersion(_ output: String) -> Bool {
        if output == JobKitVersion.current + "\n" { return true }
        let prefix = JobKitVersion.current + " ("
        guard output.hasPrefix(prefix), output.hasSuffix(")\n") else { return false }
        let commit = output.dropFirst(prefix.count).dropLast(2)
        return !commit.isEmpty && commit.allSatisfy { $0.isLetter || $0.isNumber || "._-".contains($0) }
    }

    /// Issue 22: every executable says its version, and it is the newest release of CHANGELOG.md (the
    /// `[Unreleased]` section above it collects what comes next).
    @Test func everyExecutableSaysTheVersionOfTheNewestChangelogEntry() async throws {
        let changelog = try String(
            contentsOf: URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
                .deletingLastPathComponent().appendingPathComponent("CHANGELOG.md"), encoding: .utf8)
        let newest = try #require(
            changelog.split(separator: "\n").first { $0.hasPrefix("## [") && !$0.hasPrefix("## [Unreleased]") })
        #expect(newest.hasPrefix("## [\(JobKitVersion.current)] - "), "\(newest)")
        for name in [
            "diary-reminder", "content-limit-hook", "content-limit-hook-full", "token-janitor", "pushctl",
            "push-simulator",
        ] {
            let run = try await Executables.run(name, ["--version"])
            #expect(run.status == 0 && Self.isVersion(run.stdout), "\(name): \(run.stdout) \(run.stderr)")
        }
    }

    /// Issue 22: `scripts/install` puts every executable, the man pages, the systemd units (with this prefix's
    /// paths), the crontab and the docs under a prefix, twice in a row (idempotent); the units pass
    /// `systemd-analyze verify`, and the demo runs from the installed executables.
    @Test func installPutsEverythingUnderThePrefixAndItRuns() async throws {
        let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
            .deletingLastPathComponent()
        let prefix = FileManager.default.temporaryDirectory.appendingPathComponent("install-\(UUID().uuidString)")
        defer { try? FileManager.default.removeItem(at: prefix) }
        // The release build with the Swift runtime linked in, as `scripts/install` makes it (scripts/test builds it).
        let release = try PackagingTests.built("PUSH_TEST_RELEASE_BUILD", "the release products")
        for _ in 0..<2 {
            let install = await Executables.finish(
                try Executables.start(
                    executable: URL(fileURLWithPath: "/bin/bash"),
                    [
                        root.appendingPathComponent("scripts/install").path, "--prefix", prefix.path, "--build-path",
                        release.path,
                    ]),
                limit: .seconds(600))
            #expect(install.status == 0, "\(install.stdout) \(install.stderr)")
        }
        let version = try await Executables.finish(
            Executables.start(executable: prefix.appendingPathComponent("bin/diary-reminder"), ["--version"]))
        #expect(Self.isVersion(version.stdout), "\(version.stdout)")
        for file in [
            "bin/content-limit-hook", "bin/content-limit-hook-full", "bin/token-janitor", "bin/pushctl",
            "bin/push-api", "bin/push-simulator", "share/man/man1/push-api.1", "share/doc/diary-push/openapi.yaml",
            "share/doc/diary-push/README.md", "share/doc/diary-push/crontab.example", "share/doc/diary-push/alerts.yml",
            "share/doc/diary-push/LICENSE", "share/man/man1/diary-reminder.1", "share/man/man1/token-janitor.1",
            "share/man/man1/content-limit-hook.1",
        ] {
            #expect(FileManager.default.fileExists(atPath: prefix.appendingPathComponent(file).path), "missing \(file)")
        }
        let units = [
            "diary-reminder.service", "diary-reminder.timer", "token-janitor.service", "token-janitor.timer",
            "token-janitor-report.service", "token-janitor-report.timer", "push-api.service",
        ].map { prefix.appendingPathComponent("lib/systemd/system/\($0)").path }
        let service = try String(contentsOfFile: units[0], encoding: .utf8)
        #expect(service.contains("ExecStart=\(prefix.path)/bin/diary-reminder") && !service.contains("@BINDIR@"))
        let verify = await Executables.finish(
            try Executables.start(
                executable: URL(fileURLWithPath: "/usr/bin/systemd-analyze"),
                ["verify", "--man=no"] + units))
        #expect(verify.status == 0, "\(verify.stdout) \(verify.stderr)")
        #expect(!verify.stderr.contains(prefix.path) || verify.stderr.isEmpty, "systemd-analyze: \(verify.stderr)")
        let timer = try String(contentsOfFile: units[1], encoding: .utf8)
        #expect(
            timer.contains("Persistent=true") && timer.contains("AccuracySec=1s")
                && timer.contains("OnCalendar=*-*-* *:00/15:00"))

        let demo = await Executables.finish(
            try Executables.start(
                executable: URL(fileURLWithPath: "/bin/bash"),
                [root.appendingPathComponent("scripts/demo").path, "--bin", prefix.appendingPathComponent("bin").path],
                environment: ["PUSH_DEMO_DIR": prefix.appendingPathComponent("demo").path]),
            limit: .seconds(300))
        #expect(demo.status == 0, "\(demo.stdout.suffix(800)) \(demo.stderr.suffix(800))")
        #expect(demo.stdout.contains("using the executables in \(prefix.path)/bin"))
    }

    @Test(arguments: Backend.allCases) func pushctlValidatesAndExplains(_ backend: Backend) async throws {
        let db = try await TemporaryDatabase(backend)
        let database = ["--database", db.path]
        #expect(
            try await Executables.run("pushctl", ["user", "set", "--id", "u1", "--timezone", "Asia/Tokyo"] + database)
                .status == 0)
        let badZone = try await Executables.run(
            "pushctl", ["user", "set", "--id", "u2", "--timezone", "Tokyo"] + database)
        #expect(badZone.status == 64)
        #expect(badZone.stderr.contains("unknown IANA time zone"))
        // A user id the schema cannot hold is a usage error naming the flag, before anything is opened (it was a 65
        // with the store's "CHECK constraint failed: length(id) BETWEEN 1 AND 128").
        for id in ["", String(repeating: "é", count: 129)] {
            let badID = try await Executables.run(
                "pushctl", ["user", "set", "--id", id, "--timezone", "Asia/Tokyo"] + database)
            #expect(badID.status == 64, "\(badID.status) \(badID.stderr)")
            #expect(badID.stderr.contains("--id: a user id is 1 to 128 characters"), "\(badID.stderr)")
        }
        // The same for the user a device or an entry is for (they were 65: "unknown user \"\"", or the registration's
        // own words without the flag).
        for id in ["", String(repeating: "é", count: 129)] {
            for command in [
                [
                    "device", "register", "--user", id, "--token", "abcdef0123", "--provider", "apns", "--platform",
                    "ios",
                ],
                ["entry", "add", "--user", id],
            ] {
                let refused = try await Executables.run("pushctl", command + database)
                #expect(refused.status == 64, "\(command[0]): \(refused.status) \(refused.stderr)")
                #expect(
                    refused.stderr.contains("--user: a user id is 1 to 128 characters"),
                    "\(command[0]): \(refused.stderr)")
            }
        }
        #expect(
            try await Executables.run(
                "pushctl", ["user", "set", "--id", String(repeating: "é", count: 128), "--timezone", "UTC"] + database
            ).status == 0)
        let register = try await Executables.run(
            "pushctl",
            [
                "device", "register", "--user", "u1", "--token", "ABCDEF0123",
                "--provider", "apns", "--platform", "ios",
            ] + database)
        #expect(register.status == 0)
        #expect(register.stdout.contains("created"))
        #expect(!register.stdout.contains("ABCDEF0123"))
        let ghost = try await Executables.run(
            "pushctl",
            [
                "device", "register", "--user", "ghost", "--token", "t",
                "--provider", "fcm", "--platform", "android",
            ] + database)
        #expect(ghost.status == 65)
        // A provider, platform or APNs environment outside the closed sets is a usage error naming the flag
        // and the value.
        for (flag, value, device) in [
            ("--provider", "gcm", ["--provider", "gcm", "--platform", "android"]),
            ("--platform", "windows", ["--provider", "apns", "--platform", "windows", "--environment", "production"]),
            ("--environment", "staging", ["--provider", "apns", "--platform", "ios", "--environment", "staging"]),
        ] {
            let refused = try await Executables.run(
                "pushctl", ["device", "register", "--user", "u1", "--token", "abcdef0123"] + device + database)
            #expect(refused.status == 64, "\(flag) \(value): \(refused.status) \(refused.stderr)")
            #expect(refused.stderr.contains(flag) && refused.stderr.contains(value), "\(refused.stderr)")
        }
        // Issue 21, item 3: a token of the wrong shape is refused before anything is written.
        for (token, provider, platform) in [
            ("ab cd", "fcm", "android"), ("abc", "apns", "ios"), ("tok/../x", "fcm", "ios"),
        ] {
            let malformed = try await Executables.run(
                "pushctl",
                [
                    "device", "register", "--user", "u1", "--token", token,
                    "--provider", provider, "--platform", platform,
                ] + database)
            #expect(malformed.status == 65, "\(token): \(malformed.status) \(malformed.stderr)")
            #expect(malformed.stderr.contains("token"))
        }
        // Each flag's value is checked as a usage error that names the flag: the instants named after their
        // own flag (both were "--now"), the counts also when negative after a space, the locale before the
        // store's CHECK, an empty token before the store.
        for (arguments, flag) in [
            (["entry", "add", "--user", "u1", "--at", "yesterday"], "--at: not an ISO 8601 instant"),
            (["seed", "--users", "5", "--due-count", "1", "--due-at", "soon"], "--due-at: not an ISO 8601 instant"),
            (["seed", "--users", "-1"], "--users: must be between 0 and 100,000,000, got -1"),
            // No bound: 10^10 users seeded until the process was stopped, and left the users written until then.
            (["seed", "--users", "10000000000"], "--users: must be between 0 and 100,000,000, got 10000000000"),
            // A prefix that made ids longer than 128 characters crashed the seeder ("generated an invalid device").
            (
                ["seed", "--users", "5", "--id-prefix", String(repeating: "x", count: 122)],
                "--id-prefix: the ids are the prefix and 7 digits, and a user id is 1 to 128 characters, got 129"
            ),
            (["seed", "--users", "5", "--due-count", "-1", "--due-at", "2026-11-21T12:00:00Z"], "--due-count"),
            (["user", "set", "--id", "u3", "--timezone", "UTC", "--locale", ""], "--locale: not a BCP 47 locale"),
            (["user", "set", "--id", "u3", "--timezone", "UTC", "--locale", "en US"], "--locale: not a BCP 47 locale"),
            (["user", "set", "--id", "u3", "--timezone", "UTC", "--plan", ""], "--plan: empty"),
            (["device", "unregister", "--token", ""], "--token: empty"),
            // An empty reason was recorded, and the health report counted deactivations under "".
            (["device", "unregister", "--token", "abcdef0123", "--reason", ""], "--reason: empty"),
        ] {
            let refused = try await Executables.run("pushctl", arguments + database)
            #expect(refused.status == 64, "\(arguments): \(refused.status) \(refused.stderr)")
            #expect(refused.stderr.contains(flag), "\(arguments): \(refused.stderr)")
        }
        // An APNs environment given for an FCM token was dropped silently; FCM tokens have none.
        let fcmSandbox = try await Executables.run(
            "pushctl",
            [
                "device", "register", "--user", "u1", "--token", "fcm-token-1", "--provider", "fcm",
                "--platform", "ios", "--environment", "sandbox",
            ] + database)
        #expect(fcmSandbox.status == 65, "\(fcmSandbox.stderr)")
        #expect(fcmSandbox.stderr.contains("an APNs environment is for APNs tokens"), "\(fcmSandbox.stderr)")
        #expect(try await db.count("SELECT count(*) FROM users") == 2)
        // Synthetic users go into an empty database only, unless --add says otherwise: seeding what
        // PUSH_DATABASE_URL names (production, by mistake) added 3 fake users to the 2 real ones and said so.
        let seedIntoUsers = try await Executables.run(
            "pushctl", ["seed", "--users", "3", "--id-prefix", "fake-"] + database)
        #expect(seedIntoUsers.status == 65, "\(seedIntoUsers.stderr)")
        #expect(seedIntoUsers.stderr.contains("already has users"), "\(seedIntoUsers.stderr)")
        #expect(try await db.count("SELECT count(*) FROM users") == 2)
        let seedAdded = try await Executables.run(
            "pushctl", ["seed", "--users", "3", "--id-prefix", "fake-", "--add"] + database)
        #expect(seedAdded.status == 0, "\(seedAdded.stderr)")
        // Without --due-at there is no due set to report (it said "0 due at -").
        #expect(
            seedAdded.stdout.hasPrefix("seeded 3 users, ") && seedAdded.stdout.hasSuffix(" entries today\n"),
            "\(seedAdded.stdout)")
        #expect(try await db.count("SELECT count(*) FROM users") == 5)
        try await db.execute("DELETE FROM users WHERE id LIKE 'fake-%'")
        let explain = try await Executables.run(
            "diary-reminder",
            [
                "--explain", "u1", "--now", "2026-11-21T12:00:00Z",
                "--format", "json",
            ] + database)
        #expect(explain.status == 0, "\(explain.stderr)")
        let object = try JSONSerialization.jsonObject(with: Data(explain.stdout.utf8)) as? [String: Any]
        #expect(object?["due"] as? Bool == true)
        #expect(try await db.count("SELECT count(*) FROM user_devices") == 1)
        let export = try await Executables.run("pushctl", ["copy", "export"])
        let file = db.directory.appendingPathComponent("copy.json")
        try export.stdout.write(to: file, atomically: true, encoding: .utf8)
        let check = try await Executables.run("pushctl", ["copy", "check", file.path])
        #expect(check.status == 0 && check.stdout == "\(file.path): valid\n", "\(check.stdout)")
        // `pushctl backup`: a copy of a SQLite database while it is in use; PostgreSQL's is refused (pg_dump).
        let copy = db.directory.appendingPathComponent("copy.sqlite").path
        let backup = try await Executables.run("pushctl", ["backup", copy] + database)
        if backend == .sqlite {
            #expect(backup.status == 0, "\(backup.stderr)")
            #expect(backup.stdout.hasPrefix("copied \(db.path) to \(copy): 2 users, "), "\(backup.stdout)")
            // A password file is for PostgreSQL: refused here as the jobs refuse it (it was ignored).
            let password = try await Executables.run(
                "pushctl", ["backup", copy, "--database-password-file", "/nonexistent"] + database)
            #expect(password.status == 78, "\(password.status) \(password.stderr)")
            #expect(
                password.stderr.contains("a database password file applies to PostgreSQL only"), "\(password.stderr)")
        } else {
            #expect(backup.status == 64, "\(backup.status) \(backup.stderr)")
            #expect(
                backup.stderr
                    == "pushctl backup: error: --database names a PostgreSQL database: copy it with pg_dump (or the server's own backups)\n",
                "\(backup.stderr)")
        }
        let nowhere = try await Executables.run("pushctl", ["backup", ""] + database)
        #expect(nowhere.status == 64 && nowhere.stderr.contains("the copy's path is empty"), "\(nowhere.stderr)")
        // Without the Korean 90 % warning: still valid, and a note says whose words its readers get.
        var catalog = try #require(try JSONSerialization.jsonObject(with: Data(export.stdout.utf8)) as? [String: Any])
        var warnings = try #require(catalog["content_limit_90"] as? [String: Any])
        warnings["ko"] = nil
        catalog["content_limit_90"] = warnings
        try JSONSerialization.data(withJSONObject: catalog).write(to: file)
        let noted = try await Executables.run("pushctl", ["copy", "check", file.path])
        #expect(noted.status == 0, "\(noted.stderr)")
        #expect(
            noted.stdout
                == "\(file.path): valid\nnote: content_limit_90 has no ko words, which diary_reminder and content_limit_100 have: its ko readers get en\n",
            "\(noted.stdout)")
    }

    @Test(arguments: Backend.allCases) func theHookTakesFlagsOrAStdinEventAndRejectsBadInputWritingNothing(
        _ backend: Backend
    ) async throws {
        let db = try await TemporaryDatabase(backend)
        let database = ["--database", db.path, "--now", "2026-11-21T12:00:00Z"]
        #expect(
            try await Executables.run(
                "pushctl", ["user", "set", "--id", "w", "--timezone", "Europe/Paris", "--database", db.path]
            ).status == 0)
        #expect(
            try await Executables.run(
                "pushctl",
                [
                    "device", "register", "--user", "w", "--token", "phone-w", "--provider", "fcm",
                    "--platform", "android", "--database", db.path,
                ]
            ).status == 0)
        let outbox = db.directory.appendingPathComponent("outbox.jsonl").path
        let cases: [(arguments: [String], stdin: String?, status: Int32, message: String)] = [
            (["--event", "-"], "{not json", 65, "event"),
            (["--event", "/nonexistent.json"], nil, 66, "cannot read the event file /nonexistent.json: No such file"),
            (["--event", "-"], #"{"user_id":"w","used":-2,"limit":30}"#, 65, "negative"),
            (
                ["--event", "-", "--outbox", outbox], #"{"user_id":"ghost","used":29,"limit":30}"#, 65,
                "unknown user ghost"
            ),
            (["--user", "w", "--used=-1", "--limit", "30"], nil, 65, "negative"),
            // Issue 21, item 7: with a space, the negative count was a 64 "Missing value".
            (["--user", "w", "--used", "-3", "--limit", "30"], nil, 65, "negative"),
            (["--user", "w"], nil, 64, "--used"),
            (["--user", "w", "--used", "3", "--period", "weekly"], nil, 64, "period"),
            (["--user", "w", "--used", "28", "--limit", "30", "--event", "-"], "{}", 64, "not both"),
            (["--user", "w", "--used", "28", "--limit", "30"], nil, 78, "no provider configured"),
        ]
        for testCase in cases {
            let arguments = database + testCase.arguments
            let result =
                if let stdin = testCase.stdin {
                    try await Executables.run("content-limit-hook", arguments, stdin: stdin)
                } else {
                    try await Executables.run("content-limit-hook", arguments)
                }
            #expect(result.status == testCase.status, "\(testCase.arguments): \(result.stderr)")
            #expect(result.stderr.contains(testCase.message), "\(testCase.arguments): \(result.stderr)")
        }
        #expect(try await db.count("SELECT count(*) FROM notification_logs") == 0)

        // Issue 21, item 1: the largest counts crashed both binaries (SIGILL) before opening anything.
        for binary in ["content-limit-hook", "content-limit-hook-full"] {
            for (used, limit) in [("1", "9223372036854775807"), ("9223372036854775806", "9223372036854775807")] {
                let huge = try await Executables.run(
                    binary,
                    database + [
                        "--user", "w", "--used", used, "--limit", limit,
                        "--dry-run", "--format", "json",
                    ])
                #expect(huge.status == 0, "\(binary) --used \(used) --limit \(limit): \(huge.status) \(huge.stderr)")
            }
        }

        let unlimited = try await Executables.run(
            "content-limit-hook", database + ["--user", "w", "--used", "3", "--limit", "-1"])
        #expect(unlimited.status == 0, "\(unlimited.stderr)")
        #expect(unlimited.stdout.contains("unlimited"), "\(unlimited.stdout)")

        let below = try await Executables.run(
            "content-limit-hook", database + ["--user", "w", "--used", "3", "--limit", "30", "--format", "json"])
        #expect(below.status == 0)
        #expect(below.stdout.contains(#""action":"none""#))
        let fired = try await Executables.run(
            "content-limit-hook", database + ["--event", "-", "--outbox", outbox],
            stdin: #"{"user_id":"w","used":28,"limit":30,"period":"monthly"}"#)
        #expect(fired.status == 0, "\(fired.stderr)")
        #expect(fired.stdout.contains("action=sent"))
        #expect(try String(contentsOfFile: outbox, encoding: .utf8).contains("28 of your 30"))
        #expect(
            try await db.strings(
                "SELECT notification_type || ' ' || status || ' ' || period_key FROM notification_logs") == [
                    "content_limit_90 sent 2026-11"
                ])
    }

    /// Four hosts' worth of runners at the same instant on one PostgreSQL database: two split the users
    /// in halves, one runs unsharded (overlapping both), one has a misconfigured shard count.
    @Test func fourRunnersWithMixedShardsOnPostgreSQLRemindTwentyThousandUsersExactlyOnce() async throws {
        let db = try await TemporaryDatabase(.postgres)
        let seeded = try await Executables.run(
            "pushctl",
            [
                "seed", "--database", db.path, "--users", "24000", "--due-at",
                "2026-11-21T20:00:00Z", "--due-count", "20000", "--random-seed", "9",
            ])
        #expect(seeded.status == 0, "\(seeded.stderr)")
        let shards: [[String]] = [["--shard", "1/2"], ["--shard", "2/2"], [], ["--shard", "2/3"]]
        let outboxes = shards.indices.map { db.directory.appendingPathComponent("outbox-\($0).jsonl").path }
        let started = try zip(shards, outboxes).map { shard, outbox in
            try Executables.start(
                "diary-reminder",
                [
                    "--database", db.path, "--now", "2026-11-21T20:00:00Z",
                    "--outbox", outbox, "--format", "json",
                ] + shard)
        }
        var results: [Executables.Result] = []
        for process in started { results.append(await Executables.finish(process)) }
        for result in results { #expect(result.status == 0, "\(result.stderr)") }
        let summaries = try results.map { try JSONDecoder().decode(SummaryFields.self, from: Data($0.stdout.utf8)) }
        #expect(summaries.map(\.claimed).reduce(0, +) == 20_000)
        #expect(try await db.count("SELECT count(*) FROM notification_logs") == 20_000)
        #expect(try await db.count("SELECT count(DISTINCT user_id) FROM notification_logs") == 20_000)
        #expect(try await db.count("SELECT count(*) FROM notification_logs WHERE status <> 'sent'") == 0)
        try await expectOneNotificationPerActiveDevice(db, outboxes: outboxes)
        // Nobody missed: a second round finds every due user already reminded.
        let again = try await Executables.run(
            "diary-reminder",
            [
                "--database", db.path, "--now", "2026-11-21T20:00:00Z",
                "--outbox", outboxes[0], "--format", "json",
            ])
        #expect(again.status == 0, "\(again.stderr)")
        #expect(try JSONDecoder().decode(SummaryFields.self, from: Data(again.stdout.utf8)).claimed == 0)
    }
}

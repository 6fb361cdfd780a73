import ContentLimitQuietPath
import Foundation
import JobKitTestSupport
import Testing

@testable import JobKit
@testable import JobKitSQLite

/// The `content-limit-hook` front: the quiet path it answers itself, and everything it hands over.
@Suite struct QuietPathTests {
    static let now = "2026-11-21T12:00:00Z"

    func database() async throws -> TemporaryDatabase {
        let db = try await TemporaryDatabase(.sqlite)
        for id in ["w", "a/b c"] {
            try await db.store.upsertUser(UserProfile(id: id, timezone: "Pacific/Auckland"), now: 0)
        }
        return db
    }

    func answer(_ arguments: [String], _ environment: [String: String] = [:]) -> QuietPath.Outcome {
        QuietPath.answer(arguments: arguments, environment: environment, now: { instant("2026-11-22T03:04:05Z") })
    }

    func isHandOver(_ outcome: QuietPath.Outcome) -> Bool {
        if case .handOver = outcome { return true }
        return false
    }

    /// The next process — the quiet path above all — then opens the database without replaying a WAL.
    @Test func aClosedStoreLeavesNoWALBehind() async throws {
        let db = try await TemporaryDatabase(.sqlite)
        try await db.store.upsertUser(UserProfile(id: "w", timezone: "UTC"), now: 0)
        #expect(try await db.count("SELECT count(*) FROM users") == 1)  // through a reader connection
        #expect(FileManager.default.fileExists(atPath: db.path + "-wal"))
        await db.store.close()
        #expect(!FileManager.default.fileExists(atPath: db.path + "-wal"))
    }

    @Test func theMigrationItChecksForIsTheNewest() {
        #expect(SQLiteSchema.migrator.migrations.last == SQLiteSchemaVersion.latestMigration)
    }

    @Test func aWriteBelowNinetyPercentIsAnsweredWithTheFullHooksSummary() async throws {
        let db = try await database()
        let before = try await db.contentDigest()
        guard
            case .answered(let text) = answer([
                "--database", db.path, "--user", "w", "--used", "26", "--limit", "30", "--now", Self.now,
            ])
        else {
            Issue.record("26 of 30 was handed over")
            return
        }
        #expect(text.hasPrefix(#"content-limit-hook: user=w used=26 limit=30 action=none reason="below 90 %" "#))
        #expect(text.hasSuffix("ms"))

        guard
            case .answered(let json) = answer(
                ["--user", "a/b c", "--used", "0", "--limit", "10", "--dry-run", "--format", "json"],
                ["PUSH_DATABASE_URL": "sqlite://" + db.path])
        else {
            Issue.record("a dry run in JSON was handed over")
            return
        }
        let object = try #require(try JSONSerialization.jsonObject(with: Data(json.utf8)) as? [String: Any])
        #expect(object["user_id"] as? String == "a/b c")
        #expect(object["now"] as? String == "2026-11-22T03:04:05Z")  // the injected clock: no --now
        #expect(object["dry_run"] as? Bool == true)
        #expect(object["reason"] as? String == "below 90 %")
        #expect((object["run_id"] as? String).flatMap(UUID.init(uuidString:)) != nil)
        #expect(try await db.contentDigest() == before)
    }

    @Test func anUnlimitedPlanNeedsNoDatabase() {
        #expect(
            answer(["--user", "w", "--used", "5000", "--now", Self.now])
                == .answered(
                    #"content-limit-hook: user=w used=5000 limit=none action=none reason="unlimited plan" 0ms"#))
        guard
            case .answered(let json) = answer([
                "--user", "w", "--used", "9", "--limit", "0", "--format", "json", "--now", Self.now,
            ])
        else {
            Issue.record("limit 0 was handed over")
            return
        }
        #expect(
            json.hasPrefix(#"{"action":"none","dry_run":false,"duration_ms":0,"job":"content-limit-hook","limit":0,"#))
    }

    @Test func everythingElseIsHandedOver() async throws {
        let db = try await database()
        let unmigrated = db.directory.appendingPathComponent("empty.sqlite").path
        #expect(FileManager.default.createFile(atPath: unmigrated, contents: nil))
        let base = ["--database", db.path, "--now", Self.now]
        let cases: [(String, [String], [String: String])] = [
            ("90 %", base + ["--user", "w", "--used", "27", "--limit", "30"], [:]),
            ("100 %", base + ["--user", "w", "--used", "31", "--limit", "30"], [:]),
            ("unknown user", base + ["--user", "ghost", "--used", "1", "--limit", "30"], [:]),
            ("JSON event", base + ["--event", "-"], [:]),
            ("explain", base + ["--user", "w", "--used", "1", "--limit", "30", "--explain"], [:]),
            ("help", ["--help"], [:]),
            ("= form", ["--database=\(db.path)", "--user", "w", "--used", "1", "--limit", "30"], [:]),
            ("repeated flag", base + ["--user", "w", "--user", "x", "--used", "1", "--limit", "30"], [:]),
            ("negative use", base + ["--user", "w", "--used", "-1", "--limit", "30"], [:]),
            ("no use", base + ["--user", "w", "--limit", "30"], [:]),
            ("bad period", base + ["--user", "w", "--used", "1", "--limit", "30", "--period", "weekly"], [:]),
            ("bad format", base + ["--user", "w", "--used", "1", "--limit", "30", "--format", "yaml"], [:]),
            (
                "bad --now",
                ["--database", db.path, "--now", "tomorrow", "--user", "w", "--used", "1", "--limit", "30"], [:]
            ),
            ("bad log level", base + ["--user", "w", "--used", "1", "--limit", "30"], ["PUSH_LOG_LEVEL": "loud"]),
            (
                "PostgreSQL", ["--now", Self.now, "--user", "w", "--used", "1", "--limit", "30"],
                ["PUSH_DATABASE_URL": "postgres://h/db"]
            ),
            ("no database", ["--now", Self.now, "--user", "w", "--used", "1", "--limit", "30"], [:]),
            ("missing file", ["--database", db.path + ".nope", "--user", "w", "--used", "1", "--limit", "30"], [:]),
            ("not migrated", ["--database", unmigrated, "--user", "w", "--used", "1", "--limit", "30"], [:]),
            ("id to escape", base + ["--user", "w\"x", "--used", "1", "--limit", "30"], [:]),
            ("non-ASCII id", base + ["--user", "wé", "--used", "1", "--limit", "30"], [:]),
            (
                "Lambda", base + ["--user", "w", "--used", "1", "--limit", "30"],
                ["AWS_LAMBDA_RUNTIME_API": "127.0.0.1:9001"]
            ),
        ]
        for (name, arguments, environment) in cases {
            #expect(isHandOver(answer(arguments, environment)), "\(name)")
        }
        // The same flags in the right form are answered: the cases above fail for the reason they name.
        #expect(!isHandOver(answer(base + ["--user", "w", "--used", "1", "--limit", "30", "--log-level", "DEBUG"])))
    }
}

/// The two executables side by side: whatever the front answers, the full hook answers the same.
@Suite(.serialized) struct QuietPathProcessTests {
    /// `run_id` and the duration differ from run to run; everything else must not.
    func normalized(_ text: String) -> String {
        text.replacingOccurrences(of: #""run_id":"[0-9a-f-]{36}""#, with: #""run_id":"-""#, options: .regularExpression)
            .replacingOccurrences(of: #"\d+ms$|"duration_ms":\d+"#, with: "-", options: .regularExpression)
    }

    @Test func theFrontAndTheFullHookPrintTheSameForEveryQuietWrite() async throws {
        let db = try await TemporaryDatabase(.sqlite)
        for id in ["w", "a/b c"] {
            try await db.store.upsertUser(UserProfile(id: id, timezone: "Pacific/Auckland"), now: 0)
        }
        let base = ["--database", db.path, "--now", "2026-11-21T12:00:00Z"]
        // Provider settings that would be a configuration error if a warning were due (APNs partly set).
        let halfAPNs = ["PUSH_APNS_KEY_ID": "ABC1234567"]
        let cases: [([String], [String: String])] = [
            (base + ["--user", "w", "--used", "26", "--limit", "30"], [:]),
            (base + ["--user", "a/b c", "--used", "0", "--limit", "1", "--format", "json"], [:]),
            (base + ["--dry-run", "--user", "w", "--used", "8", "--limit", "9", "--period", "annual"], [:]),
            (base + ["--user", "w", "--used", "8", "--limit", "9", "--format", "json", "--dry-run"], [:]),
            (base + ["--user", "w", "--used", "800"], [:]),
            (base + ["--user", "w", "--used", "8", "--limit", "0", "--format", "json"], [:]),
            (base + ["--user", "w", "--used", "3", "--limit", "30"], halfAPNs),
            (
                ["--now", "2026-11-21T12:00:00+09:00", "--user", "w", "--used", "3", "--limit", "30"],
                ["PUSH_DATABASE_URL": db.path]
            ),
        ]
        for (arguments, environment) in cases {
            let front = try await Executables.run("content-limit-hook", arguments, environment: environment)
            let full = try await Executables.run("content-limit-hook-full", arguments, environment: environment)
            #expect(front.status == 0, "\(arguments): \(front.stderr)")
            #expect(front.status == full.status, "\(arguments)")
            #expect(normalized(front.stdout) == normalized(full.stdout), "\(arguments)")
            #expect(front.stderr == full.stderr, "\(arguments)")
        }
    }

    /// A front copied away from the full hook answers the quiet path alone, which shows that it answers it
    /// itself; anything else fails with EX_UNAVAILABLE and says what is missing.
    @Test func theFrontAnswersTheQuietPathItselfAndHandsTheRestOver() async throws {
        let db = try await TemporaryDatabase(.sqlite)
        try await db.store.upsertUser(UserProfile(id: "w", timezone: "UTC"), now: 0)
        let alone = db.directory.appendingPathComponent("content-limit-hook")
        try FileManager.default.copyItem(at: try Executables.url("content-limit-hook"), to: alone)
        let base = ["--database", db.path, "--now", "2026-11-21T12:00:00Z", "--user", "w", "--limit", "30"]

        let quiet = await Executables.finish(try Executables.start(executable: alone, base + ["--used", "3"]))
        #expect(quiet.status == 0, "\(quiet.stderr)")
        #expect(quiet.stdout.contains(#"action=none reason="below 90 %""#))

        let warning = await Executables.finish(
            try Executables.start(executable: alone, base + ["--used", "27", "--dry-run"]))
        #expect(warning.status == 69)
        #expect(
            warning.stderr.contains(
                "cannot run \(db.directory.appendingPathComponent("content-limit-hook-full").path)"),
            "\(warning.stderr)")

        // Beside it, the same warning is decided by the full hook.
        let handedOver = try await Executables.run("content-limit-hook", base + ["--used", "27", "--dry-run"])
        #expect(handedOver.status == 0, "\(handedOver.stderr)")
        #expect(handedOver.stdout.contains("threshold=content_limit_90"))
    }
}

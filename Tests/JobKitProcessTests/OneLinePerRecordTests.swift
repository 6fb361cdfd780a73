import Foundation
import JobKitTestSupport
import Logging
import Testing

@testable import JobCLI
@testable import JobKit
@testable import JobKitDelivery

/// Text output is one record a line, and what goes into a line may come from outside: the schema takes any
/// character in a user id or a zone, and a provider writes its own reasons. A line break in one of them ended the
/// record early and started a forged one (a dry-run line for another user, a second summary, a log line).
@Suite struct OneLinePerRecordTests {
    /// A user id that, printed raw, forges a dry-run line for alice.
    static let forged = "mallory\nwould send: user=alice device=abcd…wxyz provider=fcm"
    static let now = "2026-11-21T20:00:00Z"

    @Test func aFieldIsAPlainWordOrQuotedWithItsControlsEscaped() {
        #expect(LineText.field("alice") == "alice")
        #expect(LineText.field("ユーザー-7") == "ユーザー-7")
        #expect(LineText.field("") == #""""#)
        #expect(LineText.field("a b") == #""a b""#)
        #expect(LineText.field("a=b") == #""a=b""#)
        #expect(LineText.field(#"a"b\c"#) == #""a\"b\\c""#)
        #expect(
            LineText.field("a\nb\r\t\u{0}\u{1B}[2J\u{7F}\u{85}\u{2028}")
                == #""a\nb\r\t\u0000\u001b[2J\u007f\u0085\u2028""#)
        #expect(LineText.quoted("Time to write") == #""Time to write""#)
        #expect(LineText.escapingControls(#"plain "text" \ stays"#) == #"plain "text" \ stays"#)
        #expect(LineText.escapingControls("two\nlines\u{2029}") == #"two\nlines\u2029"#)
    }

    /// The dry run's line, the validate-only line and the explanation: each record on a line of its own, the id
    /// in quotes with its line break escaped.
    @Test func aDryRunAValidationAndAnExplanationKeepEachRecordOnItsLine() async throws {
        let db = try await TemporaryDatabase(.sqlite)
        try await db.store.addUser(Self.forged, tokens: ["m-phone"])
        let readOnly = try await db.reopen(.readOnly)
        let options = ReminderRunOptions(now: instant(Self.now), dryRun: true)
        let escapedID = #""mallory\nwould send: user=alice device=abcd…wxyz provider=fcm""#

        let dryRun = LineBuffer()
        let runner = DiaryReminderRunner(
            store: readOnly, sender: DryRunSender(sink: dryRun, json: false), logger: quietLogger)
        #expect(try await runner.run(options).notifications == 1)
        #expect(dryRun.lines.count == 1)
        #expect(dryRun.lines.allSatisfy { !$0.contains("\n") }, "\(dryRun.lines)")
        #expect(dryRun.lines.first?.hasPrefix("would send: user=\(escapedID) device=") == true, "\(dryRun.lines)")

        let validated = LineBuffer()
        let refusing = ReportingSender(
            inner: AnsweringSender(reason: "BadToken\nvalidated: user=alice outcome=delivered"), sink: validated,
            json: false)
        _ = try await DiaryReminderRunner(store: readOnly, sender: refusing, logger: quietLogger).run(options)
        #expect(validated.lines.count == 1)
        #expect(
            validated.lines.first?.hasSuffix(#"reason="BadToken\nvalidated: user=alice outcome=delivered""#) == true,
            "\(validated.lines)")
        #expect(validated.lines.first?.hasPrefix("validated: user=\(escapedID) device=") == true)

        let explanation = try await runner.explain(userID: Self.forged, options: options)
        let lines = explanation.text.split(separator: "\n", omittingEmptySubsequences: false)
        #expect(lines.count == explanation.steps.count + 2, "\(explanation.text)")
        #expect(lines.first == "explain \(escapedID) at \(Self.now)")
    }

    /// A zone the database holds but no system knows is shown in the explanation: escaped, on its step's line.
    @Test func anExplanationStepKeepsAStoredValueOnItsLine() async throws {
        let db = try await TemporaryDatabase(.sqlite)
        try await db.store.addUser("bob")
        try await db.execute("UPDATE users SET timezone = 'Mars' || char(10) || 'verdict: reminded' WHERE id = 'bob'")
        let runner = DiaryReminderRunner(
            store: try await db.reopen(.readOnly), sender: DryRunSender(sink: LineBuffer(), json: false),
            logger: quietLogger)
        let explanation = try await runner.explain(
            userID: "bob", options: ReminderRunOptions(now: instant(Self.now), dryRun: true))
        let lines = explanation.text.split(separator: "\n", omittingEmptySubsequences: false)
        #expect(lines.count == explanation.steps.count + 2, "\(explanation.text)")
        #expect(lines.filter { $0.hasPrefix("verdict:") }.count == 1, "\(explanation.text)")
        #expect(explanation.text.contains(#""Mars\nverdict: reminded" is not an IANA zone"#), "\(explanation.text)")
    }

    /// The health report's text: a deactivation reason is whatever the app or `pushctl device unregister`
    /// recorded, and stays on its row's line.
    @Test func theHealthReportKeepsARecordedReasonOnItsLine() async throws {
        let db = try await TemporaryDatabase(.sqlite)
        try await db.store.addUser("carol", tokens: ["c-phone"])
        let now = instant(Self.now)
        #expect(try await db.store.unregister(token: "c-phone", reason: "logout\n  stale: 1000", now: now))
        let text = try await db.store.healthReport(from: now - 86_400, to: now + 60).text
        let section = text.components(separatedBy: "deactivations by reason:\n")
        #expect(section.count == 2, "\(text)")
        #expect(section.last?.hasPrefix(#"  logout\n  stale: 1000: 1"# + "\n\n") == true, "\(text)")
    }

    /// `pushctl copy check` lists every problem on a line of its own, and a key from the file stays on its
    /// problem's line.
    @Test func aCatalogsProblemsAreOneALine() {
        let json = Data(#"{"diary_reminder": {"en": [{"title": "T", "body": "B"}], "x\n  y": []}}"#.utf8)
        let error = #expect(throws: JobError.self) { try CopyCatalog(json: json, source: "c.json") }
        let lines = error?.message.split(separator: "\n").map(String.init) ?? []
        #expect(lines.first == "c.json: invalid copy catalog:", "\(lines)")
        #expect(lines.dropFirst().allSatisfy { $0.hasPrefix("  ") && !$0.hasPrefix("   ") }, "\(lines)")
        #expect(lines.contains { $0.contains(#"x\n  y"#) }, "\(lines)")
    }

    @Test func theHooksSummaryAndAJobsErrorAreOneLine() {
        let summary = HookSummary(runID: "r", now: Self.now, dryRun: false, userID: Self.forged, used: 9, limit: 10)
        #expect(!summary.text.contains("\n"), "\(summary.text)")
        #expect(summary.text.hasPrefix(#"content-limit-hook: user="mallory\nwould send: user=alice"#))
        let error = JobLogging.errorLine(job: "diary-reminder", .unknownUser("ghost\ndiary-reminder: ok"))
        #expect(error == #"diary-reminder: error: unknown user "ghost\ndiary-reminder: ok""#)
    }

    /// The text log format: the message and every metadata value (given, the handler's own, the provider's) stay
    /// on the line, and a plain line is left as swift-log writes it.
    @Test func aTextLogLineKeepsItsMessageAndMetadataOnTheLine() {
        let lines = LineBuffer()
        let provider = Logger.MetadataProvider { ["trace_id": "t\n1"] }
        var logger = Logger(label: "job") { _ in
            LineSafeLogHandler(CapturingLogHandler(lines), metadataProvider: provider)
        }
        logger[metadataKey: "run"] = "r\r1"
        logger.warning("unknown user a\nb", metadata: ["user": Logger.MetadataValue.array(["x\ny"]), "zone": "UTC"])
        #expect(lines.lines == [#"warning unknown user a\nb run=r\r1 trace_id=t\n1 user=["x\ny"] zone=UTC"#])
    }

    /// The executables, end to end: the hook's summary and its log line, an explanation, and an error.
    @Test func theJobsPrintEveryRecordOnALineOfItsOwn() async throws {
        let db = try await TemporaryDatabase(.sqlite)
        try await db.store.addUser(Self.forged)
        try await db.execute(
            "UPDATE notification_settings SET quiet_hours_start = '25:00', quiet_hours_end = '07:00'")
        let database = ["--database", db.path, "--now", Self.now]

        let hook = try await Executables.run(
            "content-limit-hook", database + ["--user", Self.forged, "--used", "9", "--limit", "10", "--dry-run"])
        #expect(hook.status == 0, "\(hook.stderr)")
        #expect(hook.stdout.split(separator: "\n").count == 1, "\(hook.stdout)")
        #expect(hook.stdout.hasPrefix(#"content-limit-hook (dry run): user="mallory\nwould send"#), "\(hook.stdout)")
        let logs = hook.stderr.split(separator: "\n")
        #expect(logs.count == 1 && logs[0].contains(#"user=mallory\nwould send: user=alice"#), "\(hook.stderr)")

        let explain = try await Executables.run("diary-reminder", database + ["--explain", Self.forged])
        #expect(explain.status == 0, "\(explain.stderr)")
        #expect(
            explain.stdout.split(separator: "\n").allSatisfy {
                $0.hasPrefix("explain ") || $0.hasPrefix("  ") || $0.hasPrefix("verdict: ")
            }, "\(explain.stdout)")
        #expect(!explain.stdout.contains("\nwould send"), "\(explain.stdout)")

        let ghost = try await Executables.run("diary-reminder", database + ["--explain", "ghost\nverdict: due"])
        #expect(ghost.status == 65)
        #expect(
            ghost.stderr.split(separator: "\n").last == #"diary-reminder: error: unknown user "ghost\nverdict: due""#,
            "\(ghost.stderr)")
        #expect(!ghost.stderr.contains("\nverdict"), "\(ghost.stderr)")
    }

    @Test func aLogLineIsOneSortedObjectWithItsMetadata() throws {
        let line = try #require(
            JSONLogHandler.line(
                label: "diary-reminder", level: .warning, message: "path /a \"quoted\"\nnext",
                fields: ["provider": "fcm", "nested": ["b": "2", "a": ["x", "y"]]]))
        let value = try JSONValue(parsing: line)
        #expect(value.members?.map(\.key) == ["job", "level", "message", "nested", "provider", "timestamp"])
        #expect(value["message"]?.string == "path /a \"quoted\"\nnext")
        #expect(value["nested"]?.members?.map(\.key) == ["a", "b"])
        #expect(value["nested"]?["a"]?.array?.compactMap(\.string) == ["x", "y"])
        #expect(!line.contains("\\/"), "slashes are not escaped")
        #expect(value["timestamp"]?.string?.hasSuffix("Z") == true)
    }

    /// An event's error is in the line, as `error.message` and `error.type`, as swift-log's text lines show it
    /// (the JSON lines left it out).
    @Test func aLogLineCarriesTheEventsError() throws {
        let lines = LineBuffer()
        let logger = Logger(label: "diary-reminder") { label in
            JSONLogHandler(label: label) { lines.write($0) }
        }
        logger.error("run failed", error: JobError.unavailable("down"), metadata: ["run": "r"])
        let value = try JSONValue(parsing: try #require(lines.lines.first))
        #expect(value["error.message"]?.string == "down")
        #expect(value["error.type"]?.string == "JobKit.JobError")
        #expect(value["run"]?.string == "r")
    }
}

/// Answers every notification `failed` with one reason.
private struct AnsweringSender: Sender {
    let reason: String
    func canDeliver(to provider: Provider) -> Bool { true }
    func send(_ batch: [OutgoingNotification]) async -> [DeliveryReport] {
        batch.map { DeliveryReport(channel: DeliveryChannel($0.device.provider), outcome: .rejected, reason: reason) }
    }
    func shutdown() async {}
}

/// `level message metadata`, one entry a line, metadata sorted: what a handler below ``LineSafeLogHandler``
/// is given, as it is (``CapturedLogs`` prints metadata through a dictionary's description, which escapes it).
private struct CapturingLogHandler: LogHandler {
    let lines: LineBuffer
    var metadata: Logger.Metadata = [:]
    var logLevel: Logger.Level = .trace
    var metadataProvider: Logger.MetadataProvider?

    init(_ lines: LineBuffer) { self.lines = lines }

    subscript(metadataKey key: String) -> Logger.Metadata.Value? {
        get { metadata[key] }
        set { metadata[key] = newValue }
    }

    func log(event: LogEvent) {
        var fields = metadata
        if let provided = metadataProvider?.get() { fields.merge(provided) { $1 } }
        if let given = event.metadata { fields.merge(given) { $1 } }
        let pretty = fields.sorted { $0.key < $1.key }.map { "\($0.key)=\($0.value)" }.joined(separator: " ")
        lines.write("\(event.level) \(event.message) \(pretty)")
    }
}

/// How long a quota lasts.
public enum LimitPeriod: String, Sendable, Codable, Hashable, CaseIterable {
    case monthly, annual
}

/// What the hook does for one event.
public enum ContentLimitAction: String, Sendable, Hashable, Codable {
    /// No warning is due (or it is someone else's, or already on its way).
    case none
    /// The warning reached at least one device.
    case sent
    /// The warning waits: past the user's quiet hours, or for the period's 90 % warning.
    case deferred
    /// The warning reached no device yet, for a transient or credentials reason: the next reminder run retries it.
    case retry
    /// The warning reached no device and never will: every token is dead or was refused, or no device is of a
    /// provider configured where it ran.
    case failed
}

/// The account of one hook invocation: what both hook binaries print (the front for the quiet path, the
/// full hook for everything), from this one definition, as one text line or one JSON object.
public struct HookSummary: Sendable, Codable, Hashable {
    public static let jobName = "content-limit-hook"

    public var job = HookSummary.jobName
    public var runID: String
    public var now: String
    public var dryRun: Bool
    public var userID: String
    public var used: Int
    public var limit: Int?
    /// The period key (`YYYY-MM` or `YYYY`), once known.
    public var period: String?
    /// The warning the usage calls for, if any.
    public var threshold: String?
    public var action: ContentLimitAction = .none
    /// Why nothing was sent, or what happened.
    public var reason: String?
    public var deliverAfter: String?
    public var notifications = 0
    public var outcomes: [DeliveryOutcome: Int] = [:]
    /// Each decision step (filled for --explain).
    public var steps: [String] = []
    /// Devices left for later runs because a provider refused our credentials or was unavailable.
    public var troubles: [ProviderTrouble] = []
    /// Devices left for the next reminder run by a transient answer, by provider and reason (a throttle, a few
    /// 5xx): retried, and no trouble of the provider's unless over its ``OutageThreshold``.
    public var pendingRetry: [PendingDevices] = []
    public var durationMs = 0

    public init(runID: String, now: String, dryRun: Bool, userID: String, used: Int, limit: Int?, reason: String? = nil)
    {
        self.runID = runID
        self.now = now
        self.dryRun = dryRun
        self.userID = userID
        self.used = used
        self.limit = limit
        self.reason = reason
    }

    /// One JSON object on one line: snake_case keys, sorted, absent values left out.
    public var json: String {
        var object = SummaryJSON()
        object.add("action", string: action.rawValue)
        if let deliverAfter { object.add("deliver_after", string: deliverAfter) }
        object.add("dry_run", raw: dryRun ? "true" : "false")
        object.add("duration_ms", raw: String(durationMs))
        object.add("job", string: job)
        if let limit { object.add("limit", raw: String(limit)) }
        object.add("notifications", raw: String(notifications))
        object.add("now", string: now)
        object.add(
            "outcomes",
            raw: "{"
                + outcomes.sorted { $0.key.rawValue < $1.key.rawValue }
                .map { SummaryJSON.quoted($0.key.rawValue) + ":" + String($0.value) }.joined(separator: ",") + "}")
        if let period { object.add("period", string: period) }
        if let reason { object.add("reason", string: reason) }
        object.add("run_id", string: runID)
        object.add("steps", raw: "[" + steps.map(SummaryJSON.quoted).joined(separator: ",") + "]")
        if let threshold { object.add("threshold", string: threshold) }
        if !troubles.isEmpty {
            object.add(
                "troubles",
                raw: "["
                    + troubles.map { trouble in
                        var member = SummaryJSON()
                        member.add("cause", string: trouble.cause.rawValue)
                        member.add("devices", raw: String(trouble.devices))
                        member.add("provider", string: trouble.provider.rawValue)
                        member.add(
                            "reasons", raw: "[" + trouble.reasons.map(SummaryJSON.quoted).joined(separator: ",") + "]")
                        return member.text
                    }.joined(separator: ",") + "]")
        }
        object.add("used", raw: String(used))
        object.add("user_id", string: userID)
        return object.text
    }

    public var text: String {
        var line =
            "\(job)\(dryRun ? " (dry run)" : ""): user=\(LineText.field(userID)) used=\(used) limit=\(limit.map(String.init) ?? "none")"
        if let period { line += " period=\(period)" }
        if let threshold { line += " threshold=\(threshold)" }
        line += " action=\(action.rawValue)"
        if let reason { line += " reason=\(LineText.quoted(reason))" }
        if let deliverAfter { line += " deliver_after=\(deliverAfter)" }
        if notifications > 0 {
            line +=
                " notifications=\(notifications) outcomes[\(outcomes.countsText)]"
        }
        for trouble in troubles { line += " LEFT[\(trouble.provider) \(trouble.cause.rawValue)=\(trouble.devices)]" }
        return line + " \(durationMs)ms"
    }
}

/// A JSON object written member by member, in the order given, without Foundation: strings escaped as
/// RFC 8259 requires (`"`, `\\`, control characters) and as ``LineText/quoted(_:)`` writes them, everything
/// else (slashes, non-ASCII text) as it is.
struct SummaryJSON {
    private var members: [String] = []

    mutating func add(_ key: String, string value: String) {
        members.append(Self.quoted(key) + ":" + Self.quoted(value))
    }
    mutating func add(_ key: String, raw value: String) { members.append(Self.quoted(key) + ":" + value) }

    var text: String { "{" + members.joined(separator: ",") + "}" }

    /// RFC 8259 allows every escape ``LineText/quoted(_:)`` writes; the extra ones (DEL, C1, U+2028 and U+2029)
    /// keep a JSON line one line for readers that split on them.
    static func quoted(_ text: String) -> String { LineText.quoted(text) }
}

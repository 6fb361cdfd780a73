import Foundation

/// One notification to one device.
public struct OutgoingNotification: Sendable, Hashable {
    /// The claim this belongs to (`nil` in a dry run, which claims nothing).
    public let logID: Int64?
    public let device: Device
    public let type: NotificationType
    public let period: String
    public let locale: String
    public let messageIndex: Int
    public let title: String
    public let body: String
    /// Identical for every send of the same notification: a rare duplicate replaces, never adds.
    public let collapseID: String
    /// When the notification stops being true (the end of the user's local day for a reminder).
    public let expiresAt: Int64

    public init(
        logID: Int64?, device: Device, type: NotificationType, period: String, locale: String,
        messageIndex: Int, title: String, body: String, expiresAt: Int64
    ) {
        self.logID = logID
        self.device = device
        self.type = type
        self.period = period
        self.locale = locale
        self.messageIndex = messageIndex
        self.title = title
        self.body = body
        self.collapseID = Self.collapseID(type: type, period: period)
        self.expiresAt = expiresAt
    }

    /// `type:period`, at most 64 bytes (APNs' limit).
    public static func collapseID(type: NotificationType, period: String) -> String {
        String("\(type.rawValue):\(period)".utf8.prefix(64))!
    }
}

extension DeliveryChannel {
    public init(_ provider: Provider) { self = provider == .apns ? .apns : .fcm }
}

/// The sender's answer for one notification.
public struct DeliveryReport: Sendable, Hashable {
    public let channel: DeliveryChannel
    public let outcome: DeliveryOutcome
    /// The provider's reason (`Unregistered`, `UNAVAILABLE`, …), if any.
    public let reason: String?
    public let providerMessageID: String?
    public let attempts: Int
    public let latencyMs: Int?
    /// For a dead token, when it became invalid according to the provider.
    public let tokenInvalidSince: Int64?
    /// Attempts whose fate is unknown: written to the provider, then no answer (the connection died, or no
    /// answer by the deadline). The provider may have delivered them.
    public let ambiguousAttempts: Int
    /// For a device left pending (`retry_later`): whom its last transient answer was about (``TransientScope``).
    public let scope: TransientScope

    public init(
        channel: DeliveryChannel, outcome: DeliveryOutcome, reason: String? = nil, providerMessageID: String? = nil,
        attempts: Int = 1, latencyMs: Int? = nil, tokenInvalidSince: Int64? = nil, ambiguousAttempts: Int = 0,
        scope: TransientScope = .connection
    ) {
        self.scope = scope
        self.tokenInvalidSince = tokenInvalidSince
        self.ambiguousAttempts = ambiguousAttempts
        self.channel = channel
        self.outcome = outcome
        self.reason = reason
        self.providerMessageID = providerMessageID
        self.attempts = attempts
        self.latencyMs = latencyMs
    }
}

/// Receives reports that are final before the batch is done: the indices in the batch, and their reports.
/// Called as answers are read (on a connection's event loop, among others), so it must return at once: it
/// hands the reports over (to ``AnswerJournal``), never waits for them to be written.
public typealias FinishedReports = @Sendable (_ indices: [Int], _ reports: [DeliveryReport]) -> Void

/// Delivers notifications. Returns exactly one report per notification, in order; transport failures
/// are reports (`retryLater`, `credentials`), not thrown errors, so one bad device never loses the rest.
public protocol Sender: Sendable {
    func send(_ batch: [OutgoingNotification]) async -> [DeliveryReport]
    /// Like ``send(_:)``, and hands each report to `finished` as soon as it is final, so that the answers of
    /// a batch still waiting for retries can be recorded meanwhile. Every report is in the result as well.
    func send(_ batch: [OutgoingNotification], finished: @escaping FinishedReports) async -> [DeliveryReport]
    /// False for a provider this sender has no credentials for: the run skips such devices (and users
    /// left with none) before claiming.
    func canDeliver(to provider: Provider) -> Bool
    /// Starts a run on a sender that may have served earlier runs (a warm Lambda): resets the run's retry
    /// budget and per-run verdicts, keeping connections and credentials. Sends must be answered by
    /// `finishBy` (the invocation's deadline less time to record), when given.
    func beginRun(finishBy: ContinuousClock.Instant?) async
    /// Closes connections. Called once, when the sender's owner is done with it.
    func shutdown() async
    /// A failure of the sender's own channel that makes every later send fail too (the outbox file could
    /// not be written: a full disk): the run stops claiming, records what it has, and fails with it.
    /// Provider answers are reports, never this.
    func channelFailure() async -> JobError?
    /// Credentials minted so far by provider: a metric.
    func credentialMints() async -> [Provider: Int]
    /// Where devices left pending by a provider's own transient answers make a provider outage (exit 69).
    var outageThreshold: OutageThreshold { get }
}

extension Sender {
    public func send(_ batch: [OutgoingNotification], finished: @escaping FinishedReports) async -> [DeliveryReport] {
        await send(batch)
    }
    public func canDeliver(to provider: Provider) -> Bool { true }
    public func beginRun(finishBy: ContinuousClock.Instant?) async {}
    public func shutdown() async {}
    public func channelFailure() async -> JobError? { nil }
    public func credentialMints() async -> [Provider: Int] { [:] }
    public var outageThreshold: OutageThreshold { .default }
}

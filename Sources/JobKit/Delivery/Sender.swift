import Foundation

/// One notification to one device.
package struct OutgoingNotification: Sendable, Hashable {
    /// The claim this belongs to (`nil` in a dry run, which claims nothing).
    package let logID: Int64?
    package let device: Device
    package let type: NotificationType
    package let period: String
    package let locale: String
    package let messageIndex: Int
    package let title: String
    package let body: String
    /// Identical for every send of the same notification: a rare duplicate replaces, never adds.
    package let collapseID: String
    /// When the notification stops being true (the end of the user's local day for a reminder).
    package let expiresAt: Int64

    package init(
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
    package static func collapseID(type: NotificationType, period: String) -> String {
        String("\(type.rawValue):\(period)".utf8.prefix(64))!
    }
}

extension OutgoingNotification {
    /// The janitor's check of a device that has gone quiet: FCM's `validate_only` is asked about the payload a
    /// reminder to it would carry (period `probe`), so that a token it would refuse is found before a reminder
    /// is due. Nothing is delivered, claimed or recorded in the notification log.
    package static func tokenProbe(device: Device, expiresAt: Int64) -> OutgoingNotification {
        OutgoingNotification(
            logID: nil, device: device, type: .diaryReminder, period: "probe", locale: "en", messageIndex: 0,
            title: "probe", body: "validate only", expiresAt: expiresAt)
    }
}

extension DeliveryChannel {
    package init(_ provider: Provider) { self = provider.descriptor.channel }
}

/// The sender's answer for one notification.
package struct DeliveryReport: Sendable, Hashable {
    package let channel: DeliveryChannel
    package let outcome: DeliveryOutcome
    /// The provider's reason (`Unregistered`, `UNAVAILABLE`, …), if any.
    package let reason: String?
    package let providerMessageID: String?
    package let attempts: Int
    package let latencyMs: Int?
    /// For a dead token, when it became invalid according to the provider.
    package let tokenInvalidSince: Int64?
    /// Attempts whose fate is unknown: written to the provider, then no answer (the connection died, or no
    /// answer by the deadline). The provider may have delivered them.
    package let ambiguousAttempts: Int
    /// For a device left pending (`retry_later`): whom its last transient answer was about (``TransientScope``).
    package let scope: TransientScope

    package init(
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
package typealias FinishedReports = @Sendable (_ indices: [Int], _ reports: [DeliveryReport]) -> Void

/// Delivers notifications. Returns exactly one report per notification, in order; transport failures
/// are reports (`retryLater`, `credentials`), not thrown errors, so one bad device never loses the rest.
package protocol Sender: Sendable {
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
    package func send(_ batch: [OutgoingNotification], finished: @escaping FinishedReports) async -> [DeliveryReport] {
        await send(batch)
    }
    package func canDeliver(to provider: Provider) -> Bool { true }
    package func beginRun(finishBy: ContinuousClock.Instant?) async {}
    package func shutdown() async {}
    package func channelFailure() async -> JobError? { nil }
    package func credentialMints() async -> [Provider: Int] { [:] }
    package var outageThreshold: OutageThreshold { .default }
}

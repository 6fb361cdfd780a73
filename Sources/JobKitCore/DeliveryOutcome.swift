/// How one device attempt ended, after the sender has classified the provider's answer. The raw values appear
/// in summaries, metrics and the history.
public enum DeliveryOutcome: String, Sendable, Hashable, Codable, CodingKeyRepresentable, CaseIterable {
    /// Accepted by the provider (or handed to the outbox).
    case delivered
    /// The token is dead: the device is deactivated.
    case tokenDead = "token_dead"
    /// A transient failure (429, 500, 503, timeout) that outlasted the run's retry budget.
    case retryLater = "retry_later"
    /// Our credentials were refused: never a reason to deactivate a device.
    case credentials
    /// The provider rejected the request itself (a bug on our side): never resent unchanged.
    case rejected
}

/// Where a notification went: a provider, the outbox, or nowhere (a dry run). The history records the first three
/// (`notification_deliveries.provider`).
///
/// An open set of names: the core knows the outbox and the dry run; each provider's descriptor (module JobKit,
/// `Delivery/Providers/`) declares its own channel, with its display name and the advice its troubles get, so that
/// a new provider edits nothing here. Two channels are equal when their names are.
public struct DeliveryChannel: RawRepresentable, Sendable, Hashable, Codable, CodingKeyRepresentable,
    CustomStringConvertible
{
    /// What an operator should do about a trouble of this channel's, given its cause, its reasons (lower-cased,
    /// space-separated) and whether every reason is a throttle; nil leaves it to the advice any provider gets.
    package typealias Advice =
        @Sendable (_ cause: ProviderTrouble.Cause, _ reasons: String, _ isThrottle: Bool) ->
        String?

    /// Its name in summaries, metrics labels and the history (`apns`).
    public let rawValue: String
    /// Its name as people write it (`APNs`).
    public let displayName: String
    /// Its own advice on a trouble, before the advice any provider gets.
    let advice: Advice?

    package init(_ rawValue: String, displayName: String, advice: Advice? = nil) {
        self.rawValue = rawValue
        self.displayName = displayName
        self.advice = advice
    }

    /// A channel read back by name (a decoded summary): its display name is its name, and it has no advice of its
    /// own.
    public init(rawValue: String) { self.init(rawValue, displayName: rawValue) }

    public var description: String { rawValue }

    public static func == (lhs: DeliveryChannel, rhs: DeliveryChannel) -> Bool { lhs.rawValue == rhs.rawValue }
    public func hash(into hasher: inout Hasher) { hasher.combine(rawValue) }

    /// The outbox file (`--outbox`).
    public static let outbox = DeliveryChannel("outbox", displayName: "outbox", advice: outboxAdvice)
    /// Nowhere: a dry run.
    public static let dryRun = DeliveryChannel("dry-run", displayName: "dry-run", advice: outboxAdvice)

    private static let outboxAdvice: Advice = { _, _, _ in
        "the outbox file could not be written: free space on its disk, or check its path and permissions; the devices are written by the next runs inside the catch-up window"
    }
}

extension Dictionary where Value == Int, Key: RawRepresentable, Key.RawValue == String {
    /// `key=count` pairs in the order of the keys' raw values, space-separated: the text form of a count table.
    public var countsText: String {
        sorted { $0.key.rawValue < $1.key.rawValue }.map { "\($0.key.rawValue)=\($0.value)" }.joined(separator: " ")
    }
}

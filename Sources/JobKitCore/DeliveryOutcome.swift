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
public enum DeliveryChannel: String, Sendable, Hashable, Codable, CodingKeyRepresentable, CaseIterable,
    CustomStringConvertible
{
    case apns, fcm, outbox
    case dryRun = "dry-run"

    public var description: String { rawValue }

    /// The channel's name as people write it.
    public var displayName: String {
        switch self {
        case .apns: "APNs"
        case .fcm: "FCM"
        case .outbox, .dryRun: rawValue
        }
    }
}

extension Dictionary where Value == Int, Key: RawRepresentable, Key.RawValue == String {
    /// `key=count` pairs in the order of the keys' raw values, space-separated: the text form of a count table.
    public var countsText: String {
        sorted { $0.key.rawValue < $1.key.rawValue }.map { "\($0.key.rawValue)=\($0.value)" }.joined(separator: " ")
    }
}

import Foundation

/// What a provider's answer means for one device, before retries are decided.
public struct ProviderVerdict: Sendable, Hashable {
    public let outcome: DeliveryOutcome
    /// The provider's reason (`Unregistered`, `UNAVAILABLE`, `HTTP 502`, …).
    public let reason: String?
    /// Seconds to wait before a retry, from `Retry-After`.
    public let retryAfter: Int?
    /// For a dead token: when the provider says it became invalid.
    public let tokenInvalidSince: Int64?
    public let providerMessageID: String?

    init(_ outcome: DeliveryOutcome, reason: String? = nil, retryAfter: Int? = nil, tokenInvalidSince: Int64? = nil,
         providerMessageID: String? = nil) {
        self.outcome = outcome
        self.reason = reason
        self.retryAfter = retryAfter
        self.tokenInvalidSince = tokenInvalidSince
        self.providerMessageID = providerMessageID
    }
}

/// Builds a JSON payload that fits a byte limit: when it does not, the body is shortened at a grapheme
/// boundary and ends with an ellipsis.
enum PayloadFitting {
    static func fit(body: String, maxBytes: Int, encode: (String) -> Data) -> (data: Data, body: String) {
        let full = encode(body)
        if full.count <= maxBytes { return (full, body) }
        let characters = Array(body)
        var low = 0, high = characters.count
        var best = encode("…")
        var bestBody = "…"
        while low <= high {
            let middle = (low + high) / 2
            let candidate = String(characters[..<middle]).trimmingCharacters(in: .whitespaces) + "…"
            let data = encode(candidate)
            if data.count <= maxBytes {
                best = data
                bestBody = candidate
                low = middle + 1
            } else {
                high = middle - 1
            }
        }
        return (best, bestBody)
    }
}

/// Deep links opened by a tap, per notification type.
public struct DeepLinks: Sendable, Hashable {
    /// The base, e.g. `diary://`.
    public var base: String
    public init(base: String = "diary://") { self.base = base }

    public func link(for type: NotificationType, period: String) -> String {
        type == .diaryReminder ? "\(base)entries/new?date=\(period)" : "\(base)plan"
    }
}

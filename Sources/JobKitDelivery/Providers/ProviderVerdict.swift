import Foundation
import JobKit

/// What a provider's answer means for one device, before retries are decided.
package struct ProviderVerdict: Sendable, Hashable {
    package let outcome: DeliveryOutcome
    /// The provider's reason (`Unregistered`, `UNAVAILABLE`, `HTTP 502`, …).
    package let reason: String?
    /// Seconds to wait before a retry, from `Retry-After`.
    package let retryAfter: Int?
    /// For a dead token: when the provider says it became invalid.
    package let tokenInvalidSince: Int64?
    package let providerMessageID: String?
    /// A "too many requests" about the sender as a whole (FCM's project quota), not about this device: nothing
    /// more goes to the provider for `retryAfter` seconds.
    package let pausesProvider: Bool
    /// For a transient answer: whom it is about. A verdict made without an answer (no connection, no answer) is
    /// about the way to the provider (``TransientScope/connection``), the default.
    package let scope: TransientScope
    /// For a dead token: the reason can also mean that this sender is set up wrong (``DeadTokenGuard``), so the
    /// answer is believed only when the provider is otherwise healthy in the run.
    package let mayBeSendersMistake: Bool

    init(
        _ outcome: DeliveryOutcome, reason: String? = nil, retryAfter: Int? = nil, tokenInvalidSince: Int64? = nil,
        providerMessageID: String? = nil, pausesProvider: Bool = false, scope: TransientScope = .connection,
        mayBeSendersMistake: Bool = false
    ) {
        self.mayBeSendersMistake = mayBeSendersMistake
        self.pausesProvider = pausesProvider
        self.scope = scope
        self.outcome = outcome
        self.reason = reason
        self.retryAfter = retryAfter
        self.tokenInvalidSince = tokenInvalidSince
        self.providerMessageID = providerMessageID
    }
}

/// Builds a JSON payload that fits a byte limit. When the whole message does not fit, the body is shortened at
/// a grapheme boundary and ends with an ellipsis; when even an empty body does not fit (a title of a few
/// characters can be kilobytes: a letter may carry any number of combining marks), the title is shortened too.
/// The result fits whenever an ellipsis for both does.
enum PayloadFitting {
    static func fit(
        title: String, body: String, maxBytes: Int,
        encode: (_ title: String, _ body: String) -> Data
    ) -> (data: Data, title: String, body: String) {
        let full = encode(title, body)
        if full.count <= maxBytes { return (full, title, body) }
        if let fitted = longestPrefix(of: body, fitting: maxBytes, encode: { encode(title, $0) }) {
            return (fitted.data, title, fitted.text)
        }
        if let fitted = longestPrefix(of: title, fitting: maxBytes, encode: { encode($0, "…") }) {
            return (fitted.data, fitted.text, "…")
        }
        return (encode("…", "…"), "…", "…")
    }

    /// The longest `prefix + "…"` (whole grapheme clusters, trailing spaces dropped) whose encoding fits,
    /// or nil when not even the ellipsis alone does.
    private static func longestPrefix(
        of text: String, fitting maxBytes: Int,
        encode: (String) -> Data
    ) -> (data: Data, text: String)? {
        let characters = Array(text)
        var best: (data: Data, text: String)?
        var low = 0
        var high = characters.count - 1
        while low <= high {
            let middle = (low + high) / 2
            let candidate = String(characters[..<middle]).trimmingCharacters(in: .whitespaces) + "…"
            let data = encode(candidate)
            if data.count <= maxBytes {
                best = (data, candidate)
                low = middle + 1
            } else {
                high = middle - 1
            }
        }
        return best
    }
}

/// Deep links opened by a tap, per notification type.
package struct DeepLinks: Sendable, Hashable {
    /// The base, e.g. `diary://`.
    package var base: String
    package init(base: String = ConfigKey.deepLinkBase.defaultValue!) { self.base = base }

    /// `base` if a link can be built on it: a scheme, and a `/` at the end for the path to follow
    /// (`diary://`, `https://example.com/app/`); otherwise `nil`.
    package init?(checking base: String) {
        guard base.hasSuffix("/"), let url = URLComponents(string: base), let scheme = url.scheme, !scheme.isEmpty
        else { return nil }
        self.base = base
    }

    package func link(for type: NotificationType, period: String) -> String {
        base + type.deepLinkPath(period: period)
    }
}

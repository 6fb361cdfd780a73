import Foundation
import NIOCore
import NIOHPACK

/// Apple Push Notification service settings (token authentication).
package struct APNsConfiguration: Sendable, Hashable {
    /// The `.p8` signing key file.
    package var keyFile: String
    /// The key's 10-character id (JWT `kid`).
    package var keyID: String
    /// The team's 10-character id (JWT `iss`).
    package var teamID: String
    /// The app's bundle id (`apns-topic`).
    package var topic: String
    package var productionEndpoint = Endpoint(url: ConfigKey.apnsEndpoint.defaultValue!)!
    package var sandboxEndpoint = Endpoint(url: ConfigKey.apnsSandboxEndpoint.defaultValue!)!
    /// At most this many requests a second (`nil`: unpaced; APNs publishes no quota).
    package var rate: ProviderRate?

    package init(keyFile: String, keyID: String, teamID: String, topic: String) {
        self.keyFile = keyFile
        self.keyID = keyID
        self.teamID = teamID
        self.topic = topic
    }
}

/// What an iOS notification does to the app icon's badge (`aps.badge`), whichever provider carries it.
package enum AppBadge: Sendable, Hashable {
    /// Leaves the badge as it is: no `badge` key (for an app that does not show one, or sets it itself).
    case unchanged
    /// Shows this number; 0 removes the badge.
    case number(Int)

    /// The numbers a setting may give.
    package static let numbers = 0...99_999

    /// Reads a setting: `none`, or a number in ``numbers``.
    package init?(_ text: String) {
        if text == "none" {
            self = .unchanged
        } else if text.allSatisfy(\.isASCIIDigit), let number = Int(text), Self.numbers.contains(number) {
            self = .number(number)
        } else {
            return nil
        }
    }

    /// The `badge` member of an `aps` dictionary: one, or none.
    var apsMembers: [(String, PayloadJSON)] {
        guard case .number(let number) = self else { return [] }
        return [("badge", .int(Int64(number)))]
    }
}

/// APNs requests and answers, free of I/O.
enum APNs {
    static let maxPayloadBytes = 4096

    /// The `aps` members besides the alert, sorted (badge, sound, thread id): an iOS device gets the same ones
    /// through APNs and through FCM (whose `apns.payload`, FCM writing the alert from its `notification`). The sound
    /// is explicit, as without it iOS delivers silently; the thread id groups each type's notifications.
    static func apsMembers(_ notification: OutgoingNotification, _ badge: AppBadge) -> [(String, PayloadJSON)] {
        badge.apsMembers + [("sound", "default"), ("thread-id", .string(notification.type.rawValue))]
    }

    /// The JSON payload: alert, explicit sound (without it iOS delivers silently), badge, thread id, and the
    /// custom keys the app reads.
    static func payload(for notification: OutgoingNotification, links: DeepLinks, badge: AppBadge) -> Data {
        PayloadFitting.fit(title: notification.title, body: notification.body, maxBytes: maxPayloadBytes) {
            title, body in
            // Sorted: alert, then badge, sound, thread-id.
            let aps = [("alert", ["body": .string(body), "title": .string(title)])] + apsMembers(notification, badge)
            let payload: PayloadJSON = [
                "aps": .object(aps),
                "link": .string(links.link(for: notification.type, period: notification.period)),
                "period": .string(notification.period),
                "type": .string(notification.type.rawValue),
            ]
            return payload.data
        }.data
    }

    /// The `authorization` header's value for a provider token.
    static func authorization(jwt: String) -> String { "bearer \(jwt)" }

    static func request(
        for notification: OutgoingNotification, topic: String, authority: String, authorization: String,
        links: DeepLinks, badge: AppBadge
    ) -> HTTP2Request {
        let body = payload(for: notification, links: links, badge: badge)
        var headers = HPACKHeaders()
        headers.reserveCapacity(12)
        headers.add(name: ":method", value: "POST")
        headers.add(name: ":scheme", value: "https")
        // The path holds the device token, different in every request: kept out of HPACK's dynamic table, where
        // each one would push out the entries that do repeat (the provider token above all, ~250 bytes, which
        // would then be sent again in full every few dozen requests).
        headers.add(name: ":path", value: "/3/device/\(notification.device.token)", indexing: .nonIndexable)
        headers.add(name: ":authority", value: authority)
        headers.add(name: "authorization", value: authorization)
        headers.add(name: "apns-push-type", value: "alert")
        headers.add(name: "apns-priority", value: "10")
        headers.add(name: "apns-topic", value: topic)
        headers.add(name: "apns-expiration", value: String(notification.expiresAt))
        headers.add(name: "apns-collapse-id", value: notification.collapseID)
        headers.add(name: "content-type", value: "application/json")
        // Lengths vary from request to request: indexing them would only push out the headers that repeat.
        headers.add(name: "content-length", value: String(body.count), indexing: .nonIndexable)
        return HTTP2Request(headers: headers, body: ByteBuffer(bytes: body))
    }

    static let deadTokenReasons: Set<String> = [
        "Unregistered", "ExpiredToken", "BadDeviceToken", "DeviceTokenNotForTopic",
    ]
    /// Dead-token reasons that a wrong setting gives for every token: a topic of another app of the team
    /// (`DeviceTokenNotForTopic`), sandbox tokens sent to production or the other way round (`BadDeviceToken`).
    /// Believed only when APNs is otherwise healthy in the run (``DeadTokenGuard``).
    static let sendersMistakeReasons: Set<String> = ["BadDeviceToken", "DeviceTokenNotForTopic"]
    /// Refusals of the provider token: a key outside its scope (an environment, or topics: Feb 2025's
    /// `UnrelatedKeyIdInToken`, `BadEnvironmentKeyIdInToken`) among them. Never a device's fault.
    static let credentialReasons: Set<String> = [
        "ExpiredProviderToken", "InvalidProviderToken", "MissingProviderToken",
        "BadEnvironmentKeyIdInToken", "UnrelatedKeyIdInToken", "TooManyProviderTokenUpdates",
    ]

    /// Every documented status and reason, with a fallback for anything new.
    static func classify(status: Int, headers: HPACKHeaders, body: ByteBuffer) -> ProviderVerdict {
        let messageID = headers.first(name: "apns-id")
        if status == 200 { return ProviderVerdict(.delivered, providerMessageID: messageID) }
        // `{"reason": "…"}`, with `"timestamp"` (milliseconds) when the token is no longer valid.
        let answer = try? JSONValue(parsing: body)
        let reason = answer?["reason"]?.string ?? "HTTP \(status)"
        let retryAfter = headers.first(name: "retry-after").flatMap { Int($0) }
        if credentialReasons.contains(reason) {
            return ProviderVerdict(.credentials, reason: reason)
        }
        if deadTokenReasons.contains(reason) && (status == 410 || status == 400) {
            return ProviderVerdict(
                .tokenDead, reason: reason, tokenInvalidSince: answer?["timestamp"]?.int64.map { $0 / 1000 },
                mayBeSendersMistake: sendersMistakeReasons.contains(reason))
        }
        switch status {
        case 429 where reason == "TooManyRequests":
            // "Too many requests were made consecutively to the same device token": about that device only.
            return ProviderVerdict(.retryLater, reason: reason, retryAfter: retryAfter, scope: .device)
        case 429, 500, 502, 503, 504:
            return ProviderVerdict(.retryLater, reason: reason, retryAfter: retryAfter, scope: .provider)
        case 400..<500:
            return ProviderVerdict(.rejected, reason: reason)
        default:
            return ProviderVerdict(.retryLater, reason: reason, retryAfter: retryAfter, scope: .provider)
        }
    }
}

extension APNs {
    static let descriptor = ProviderDescriptor(
        name: "APNs", channel: .apns, platforms: [.ios], kinds: [.token], storesLowerCase: true,
        defaultEnvironment: .production, tokenProblem: DeviceToken.apnsTokenProblem,
        foreignShape: nil, claimsShape: DeviceToken.isAPNsShaped, shapePattern: DeviceToken.apnsShapedPattern,
        probesQuietTokens: false)
}

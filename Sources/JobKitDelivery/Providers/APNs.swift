import Foundation
import JobKit
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
extension APNs {
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

extension APNsConfiguration: ProviderSetup {
    var provider: Provider { .apns }

    /// Its settings from the flags and the environment (`nil`: none of its credentials is set). Every setting is
    /// checked whether or not the credentials are set, so that a bad value fails now rather than on the day they
    /// are added; some but not all of the credentials is a configuration error.
    static func resolve(_ config: ConfigResolver, flags: DeliveryFlags) throws(JobError) -> APNsConfiguration? {
        let production = try config.endpoint(.apnsEndpoint, flag: flags.apnsEndpoint)
        let sandbox = try config.endpoint(.apnsSandboxEndpoint, flag: flags.apnsSandboxEndpoint)
        let rate = try config.rate(.apnsRate, flag: flags.apnsRate)
        let keys: [(ConfigKey, String?)] = [
            (.apnsKeyFile, flags.apnsKeyFile), (.apnsKeyID, flags.apnsKeyID),
            (.apnsTeamID, flags.apnsTeamID), (.apnsTopic, flags.apnsTopic),
        ]
        var values: [String?] = []
        for (key, flag) in keys { values.append(try config.string(key, flag: flag)) }
        guard values.contains(where: { $0 != nil }) else { return nil }
        let missing = zip(keys, values).filter { $0.1 == nil }.map { $0.0.0.rawValue }
        guard missing.isEmpty else {
            throw .config("APNs is partly configured: also set \(missing.joined(separator: ", "))")
        }
        var apns = APNsConfiguration(keyFile: values[0]!, keyID: values[1]!, teamID: values[2]!, topic: values[3]!)
        if let production { apns.productionEndpoint = production }
        if let sandbox { apns.sandboxEndpoint = sandbox }
        apns.rate = rate
        return apns
    }

    func checkFiles() async throws(JobError) { _ = try await ProviderTokens.apnsKey(self) }

    /// Signs provider tokens with the `.p8` key (one per team and key, reused for 40 minutes by every run and
    /// hook through the store) and sends each device to the host of its environment.
    func client(_ shared: SharedDelivery) async throws(JobError) -> ProviderClient {
        let keys = try await ProviderTokens.apnsKey(self)
        let credential = shared.credential(
            key: "apns:\(teamID):\(keyID)",
            isFresh: { credential, now in
                now - credential.issuedAt < ProviderTokens.apnsReuseSeconds && credential.issuedAt <= now + 60
            },
            mint: { [self] now async throws(JobError) in
                try await ProviderTokens.mintAPNs(keys: keys, configuration: self, now: now)
            })
        let (topic, links, badge) = (topic, shared.configuration.links, shared.configuration.badge)
        let (production, sandbox) = (productionEndpoint, sandboxEndpoint)
        return shared.client(
            ProviderProtocol(
                provider: provider,
                endpoint: { $0.apnsEnvironment == .sandbox ? sandbox : production },
                authorization: APNs.authorization(jwt:),
                request: { notification, authorization, authority in
                    APNs.request(
                        for: notification, topic: topic, authority: authority, authorization: authorization,
                        links: links, badge: badge)
                },
                classify: { APNs.classify(status: $0.status, headers: $0.headers, body: $0.body) }),
            credential: credential, rate: rate)
    }
}

import Foundation
import JobKit
import NIOCore
import NIOHPACK

/// Firebase Cloud Messaging (HTTP v1) settings.
package struct FCMConfiguration: Sendable, Hashable {
    /// The service-account JSON file (its `token_uri` is where access tokens come from).
    package var serviceAccountFile: String
    /// The Android notification channel of the reminders (required on Android 8+).
    package var androidChannelID = ConfigKey.fcmAndroidChannelID.defaultValue!
    /// The Android notification channel of the quota warnings; nil: the reminders' channel. Android lets a
    /// person silence a channel only as a whole, so an app that declares a channel of each kind lets them keep
    /// the warnings and silence the reminders, or the other way round.
    package var androidWarningChannelID: String?
    package var endpoint = Endpoint(url: ConfigKey.fcmEndpoint.defaultValue!)!
    /// Send with `validate_only: true`: FCM checks every token and payload and delivers nothing.
    package var validateOnly = false
    /// At most this many requests a second, shared by every page of a run (`nil`: unpaced).
    package var rate: ProviderRate? = .fcmDefault

    package init(serviceAccountFile: String) {
        self.serviceAccountFile = serviceAccountFile
    }

    /// The Android notification channel a notification of this type goes to.
    package func androidChannelID(for type: NotificationType) -> String {
        switch type {
        case .diaryReminder: androidChannelID
        case .contentLimit90, .contentLimit100: androidWarningChannelID ?? androidChannelID
        }
    }
}

/// The fields of a Google service-account key file that the OAuth flow uses.
package struct ServiceAccount: Sendable, Hashable, Decodable {
    package let type: String
    package let projectID: String
    package let privateKeyID: String
    package let privateKey: String
    package let clientEmail: String
    package let tokenURI: String

    enum CodingKeys: String, CodingKey {
        case type
        case projectID = "project_id"
        case privateKeyID = "private_key_id"
        case privateKey = "private_key"
        case
            clientEmail = "client_email"
        case tokenURI = "token_uri"
    }

    package static func load(path: String) throws(JobError) -> ServiceAccount {
        let data = try readInputFile(path, what: "the FCM service-account file")
        let account: ServiceAccount
        do {
            account = try JSONDecoder().decode(ServiceAccount.self, from: data)
        } catch {
            throw .config(
                "\(path) is not a service-account key file (needs type, project_id, private_key_id, private_key, client_email, token_uri): \(JSONLine.problem(error))"
            )
        }
        guard account.type == "service_account" else {
            throw .config("\(path): type is \(account.type), not service_account")
        }
        guard Endpoint(url: account.tokenURI) != nil else { throw .config("\(path): token_uri must be an https URL") }
        return account
    }

    package static let scope = "https://www.googleapis.com/auth/firebase.messaging"
}

/// FCM requests and answers, free of I/O.
extension FCM {
    static let maxPayloadBytes = 4096

    static func message(
        for notification: OutgoingNotification, configuration: FCMConfiguration, links: DeepLinks,
        badge: AppBadge, now: Int64
    ) -> Data {
        let ttl = max(0, notification.expiresAt - now)
        let data: PayloadJSON = [
            "link": .string(links.link(for: notification.type, period: notification.period)),
            "period": .string(notification.period), "type": .string(notification.type.rawValue),
        ]
        return PayloadFitting.fit(title: notification.title, body: notification.body, maxBytes: maxPayloadBytes) {
            title, body in
            let platform: (String, PayloadJSON)
            if notification.device.platform == .android {
                platform = (
                    "android",
                    [
                        "notification": [
                            "channel_id": .string(configuration.androidChannelID(for: notification.type)),
                            "sound": "default",
                            "tag": .string(notification.collapseID),
                        ],
                        "priority": "high",
                        "ttl": .string("\(ttl)s"),
                    ]
                )
            } else {
                platform = (
                    "apns",
                    [
                        "headers": [
                            "apns-collapse-id": .string(notification.collapseID),
                            "apns-expiration": .string(String(notification.expiresAt)),
                            "apns-priority": "10", "apns-push-type": "alert",
                        ],
                        "payload": ["aps": .object(APNs.apsMembers(notification, badge))],
                    ]
                )
            }
            // Sorted: android|apns, data, fid, notification, token. A FCM installation id goes in `fid`, never in
            // `token` (``Device/sendingKind``): FCM answers a FID in `token` as an invalid registration token.
            let target = PayloadJSON.string(notification.device.token)
            let message: PayloadJSON =
                notification.device.sendingKind == .fid
                ? .object([
                    platform,
                    ("data", data),
                    ("fid", target),
                    ("notification", ["body": .string(body), "title": .string(title)]),
                ])
                : .object([
                    platform,
                    ("data", data),
                    ("notification", ["body": .string(body), "title": .string(title)]),
                    ("token", target),
                ])
            let request: PayloadJSON = ["message": message, "validate_only": .bool(configuration.validateOnly)]
            return request.data
        }.data
    }

    /// Whether a `QUOTA_EXCEEDED` answer is about one device's message rate rather than the project's quota. FCM
    /// uses the one code for both; what tells them apart is a `google.rpc.QuotaFailure` detail, whose violations
    /// name the subject of the quota (a project, or the message's target device). Without such a detail the
    /// answer cannot be told apart and counts as the project's: the safe side, which pauses every send to FCM.
    static func quotaIsOneDevices(_ details: [JSONValue]) -> Bool {
        let violations = details.filter { $0["@type"]?.string?.hasSuffix("google.rpc.QuotaFailure") == true }
            .flatMap { $0["violations"]?.array ?? [] }
        guard !violations.isEmpty else { return false }
        return violations.allSatisfy { violation in
            let text = ((violation["subject"]?.string ?? "") + " " + (violation["description"]?.string ?? ""))
                .lowercased()
            return !text.contains("project") && (text.contains("device") || text.contains("token"))
        }
    }

    /// Whether an error message is about a message's installation id (`message.fid`, "installation id", or the
    /// word "fid"), so that its answer is a verdict on that device.
    static func namesInstallationID(_ message: String) -> Bool {
        let lowered = message.lowercased()
        if lowered.contains("installation id") || lowered.contains("installation_id") { return true }
        return lowered.split { !($0.isLetter || $0.isNumber || $0 == "_") }.contains("fid")
    }

    /// The `authorization` header's value for an access token.
    static func authorization(accessToken: String) -> String { "Bearer \(accessToken)" }

    /// The send method's path for a project.
    static func path(projectID: String) -> String { "/v1/projects/\(projectID)/messages:send" }

    static func request(
        for notification: OutgoingNotification, configuration: FCMConfiguration, path: String,
        authorization: String, links: DeepLinks, badge: AppBadge, now: Int64
    ) -> HTTP2Request {
        let body = message(for: notification, configuration: configuration, links: links, badge: badge, now: now)
        var headers = HPACKHeaders()
        headers.reserveCapacity(7)
        headers.add(name: ":method", value: "POST")
        headers.add(name: ":scheme", value: "https")
        headers.add(name: ":path", value: path)
        headers.add(name: ":authority", value: configuration.endpoint.authority)
        headers.add(name: "authorization", value: authorization)
        headers.add(name: "content-type", value: "application/json")
        // Lengths vary from request to request: indexing them would only push out the headers that repeat.
        headers.add(name: "content-length", value: String(body.count), indexing: .nonIndexable)
        return HTTP2Request(headers: headers, body: ByteBuffer(bytes: body))
    }

    /// `{"name": "projects/…/messages/…"}` on success; on failure Google's error object, whose `details` may name
    /// an FCM error code.
    static func classify(status: Int, headers: HPACKHeaders, body: ByteBuffer) -> ProviderVerdict {
        let answer = try? JSONValue(parsing: body)
        if status == 200 {
            return ProviderVerdict(.delivered, providerMessageID: answer?["name"]?.string)
        }
        let failure = answer?["error"]
        let details = failure?["details"]?.array ?? []
        let fcmCode: String? = details.first { $0["@type"]?.string?.hasSuffix("FcmError") == true }?["errorCode"]?
            .string
        let anyCode: String? = details.lazy.compactMap { $0["errorCode"]?.string }.first
        let code: String = fcmCode ?? anyCode ?? failure?["status"]?.string ?? "HTTP \(status)"
        let retryAfter = headers.first(name: "retry-after").flatMap { Int($0) }
        switch code {
        case "UNREGISTERED":
            return ProviderVerdict(.tokenDead, reason: code)
        case "SENDER_ID_MISMATCH":
            // The token is another project's: every token answers so when the service account is of another
            // Firebase project. Believed only when FCM is otherwise healthy in the run (``DeadTokenGuard``).
            return ProviderVerdict(.tokenDead, reason: code, mayBeSendersMistake: true)
        case "INVALID_ARGUMENT":
            // Only a complaint about the token or installation id itself means the device is dead; anything else
            // is our bug. Tokens of another provider (APNs tokens stored as FCM) give it for every device.
            let message = failure?["message"]?.string ?? ""
            if namesInstallationID(message) {
                return ProviderVerdict(.tokenDead, reason: "INVALID_ARGUMENT (fid)", mayBeSendersMistake: true)
            }
            let lowered = message.lowercased()
            if lowered.contains("registration token") || lowered.contains("message.token") {
                return ProviderVerdict(.tokenDead, reason: "INVALID_ARGUMENT (token)", mayBeSendersMistake: true)
            }
            return ProviderVerdict(.rejected, reason: "INVALID_ARGUMENT")
        case "NOT_FOUND" where namesInstallationID(failure?["message"]?.string ?? ""):
            // An installation id FCM does not know (an installation id is a project's). A NOT_FOUND that names no
            // FID (a wrong project id in the service account, say) is no verdict on any device.
            return ProviderVerdict(.tokenDead, reason: "NOT_FOUND (fid)", mayBeSendersMistake: true)
        case "QUOTA_EXCEEDED" where quotaIsOneDevices(details):
            // One device's message rate (240 a minute, 5,000 an hour): that device waits, the others go on.
            return ProviderVerdict(
                .retryLater, reason: "QUOTA_EXCEEDED (device)", retryAfter: retryAfter ?? 60, scope: .device)
        case "QUOTA_EXCEEDED":
            // The project's quota, or an answer that does not say whose: nothing more goes to FCM for a while.
            return ProviderVerdict(
                .retryLater, reason: code, retryAfter: retryAfter ?? 60, pausesProvider: true, scope: .provider)
        case "UNAVAILABLE", "INTERNAL":
            return ProviderVerdict(.retryLater, reason: code, retryAfter: retryAfter, scope: .provider)
        case "THIRD_PARTY_AUTH_ERROR", "UNAUTHENTICATED", "PERMISSION_DENIED":
            // PERMISSION_DENIED with no FCM code: the service account may not send for this project.
            return ProviderVerdict(.credentials, reason: code)
        default:
            if status == 401 { return ProviderVerdict(.credentials, reason: code) }
            if status == 429 {
                return ProviderVerdict(
                    .retryLater, reason: code, retryAfter: retryAfter ?? 60, pausesProvider: true, scope: .provider)
            }
            if status >= 500 {
                return ProviderVerdict(.retryLater, reason: code, retryAfter: retryAfter, scope: .provider)
            }
            return ProviderVerdict(.rejected, reason: code)
        }
    }
}

extension FCMConfiguration: ProviderSetup {
    var provider: Provider { .fcm }

    /// Its settings from the flags and the environment (`nil`: no service account is set), each checked whether
    /// or not the service account is set.
    static func resolve(_ config: ConfigResolver, flags: DeliveryFlags) throws(JobError) -> FCMConfiguration? {
        let endpoint = try config.endpoint(.fcmEndpoint, flag: flags.fcmEndpoint)
        let rate = try config.rate(.fcmRate, flag: flags.fcmRate)
        let channel = try config.string(.fcmAndroidChannelID, flag: flags.fcmAndroidChannelID)
        let warningChannel = try config.string(.fcmAndroidWarningChannelID, flag: flags.fcmAndroidWarningChannelID)
        guard let file = try config.string(.fcmServiceAccountFile, flag: flags.fcmServiceAccountFile) else {
            return nil
        }
        var fcm = FCMConfiguration(serviceAccountFile: file)
        if let endpoint { fcm.endpoint = endpoint }
        if let channel { fcm.androidChannelID = channel }
        fcm.androidWarningChannelID = warningChannel
        fcm.validateOnly = flags.validateOnly
        fcm.rate = rate
        return fcm
    }

    func checkFiles() async throws(JobError) {
        _ = try await ProviderTokens.serviceAccountKey(try ServiceAccount.load(path: serviceAccountFile))
    }

    /// Exchanges a JWT signed with the service account's key for an OAuth access token (one per account, shared
    /// through the store until five minutes before it expires) and sends to the account's project.
    func client(_ shared: SharedDelivery) async throws(JobError) -> ProviderClient {
        let account = try ServiceAccount.load(path: serviceAccountFile)
        let keys = try await ProviderTokens.serviceAccountKey(account)
        let tls = shared.tls
        let credential = shared.credential(
            key: "fcm:\(account.clientEmail)",
            isFresh: { credential, now in credential.expiresAt - now > ProviderTokens.fcmExpiryMarginSeconds },
            mint: { now async throws(JobError) in
                try await ProviderTokens.mintFCM(keys: keys, account: account, tls: tls, now: now)
            })
        let (links, badge, clock) = (
            shared.configuration.links, shared.configuration.badge, shared.configuration.credentialClock
        )
        return shared.client(
            ProviderProtocol(
                provider: provider,
                endpoint: { [endpoint] _ in endpoint },
                authorization: FCM.authorization(accessToken:),
                request: { [self, path = FCM.path(projectID: account.projectID)] notification, authorization, _ in
                    FCM.request(
                        for: notification, configuration: self, path: path, authorization: authorization,
                        links: links, badge: badge, now: clock())
                },
                classify: { FCM.classify(status: $0.status, headers: $0.headers, body: $0.body) }),
            credential: credential, rate: rate)
    }
}

import Crypto
import Foundation
import JobKit
import JobKitDelivery
import NIOConcurrencyHelpers
import NIOCore
import NIOHPACK
import _CryptoExtras

/// An answer, built before it is written.
struct SimulatedResponse: Sendable {
    var status: Int
    var headers: [(String, String)] = []
    var body: String = ""
    var delayMs: Int?
}

/// The simulator's shared state and its provider logic. Thread-safe: streams run on several event loops.
final class SimulatorState: Sendable {
    private struct Mutable {
        var rules: [SimulatorRule]
        var stats = SimulatorStats()
        var failuresByToken: [String: Int] = [:]
        var issuedAccessTokens: [String: Int64] = [:]
        /// Provider tokens whose signature was verified, with their `iat`.
        var verifiedProviderTokens: [String: Int64] = [:]
        var accepted: [AcceptedNotification] = []
        var baseURL = ""
        /// The current FCM quota window: when it began and the sends counted in it.
        var quotaWindow: (began: ContinuousClock.Instant, sends: Int, refused: Int)?
    }

    private let box: NIOLockedValueBox<Mutable>
    private let record: NIOLockedValueBox<FileHandle?>
    let clock: @Sendable () -> Int64
    let faultRate: Double
    let fcmQuota: SimulatorQuota?
    let recordInMemory: Bool
    let apnsKey: P256.Signing.PublicKey
    let serviceAccountKey: _RSA.Signing.PublicKey
    /// `xxxxxxxx-xxxx-4xxx-8xxx-`: the random part of every message id this simulator makes.
    private let idPrefix: String

    init(configuration: SimulatorConfiguration) throws {
        box = NIOLockedValueBox(Mutable(rules: configuration.rules))
        clock = configuration.clock
        faultRate = configuration.faultRate
        fcmQuota = configuration.fcmQuota
        recordInMemory = configuration.recordInMemory
        apnsKey = try configuration.credentials.apnsPublicKey()
        serviceAccountKey = try configuration.credentials.serviceAccountPublicKey()
        let random = UUID().uuidString.lowercased()
        idPrefix = String(random.prefix(24))
        var handle: FileHandle?
        if let path = configuration.recordFile {
            _ = FileManager.default.createFile(atPath: path, contents: nil)
            handle = FileHandle(forWritingAtPath: path)
            handle?.seekToEndOfFile()
        }
        record = NIOLockedValueBox(handle)
    }

    var baseURL: String {
        get { box.withLockedValue { $0.baseURL } }
        set { box.withLockedValue { $0.baseURL = newValue } }
    }
    var stats: SimulatorStats { box.withLockedValue { $0.stats } }
    var acceptedNotifications: [AcceptedNotification] { box.withLockedValue { $0.accepted } }
    func setRules(_ rules: [SimulatorRule]) { box.withLockedValue { $0.rules = rules } }
    func connectionOpened() { box.withLockedValue { $0.stats.connections += 1 } }
    func goAwaySent() { box.withLockedValue { $0.stats.goAways += 1 } }
    func closeRecordFile() {
        record.withLockedValue {
            try? $0?.close()
            $0 = nil
        }
    }

    // MARK: Dispatch

    func handle(method: String, path: String, headers: HPACKHeaders, body: ByteBuffer) -> SimulatedResponse {
        let number = box.withLockedValue { state in
            state.stats.requests += 1
            return state.stats.requests
        }
        var response: SimulatedResponse
        if path.utf8.starts(with: "/3/device/".utf8) {
            response = apns(
                method: method, token: String(Substring(path.utf8.dropFirst("/3/device/".utf8.count))),
                headers: headers, body: body)
            // Every APNs answer has an apns-id: the request's when it has one (clients match answers by it).
            let id = headers.first(name: "apns-id") ?? messageID(number)
            response.headers.insert(("apns-id", id), at: 0)
        } else if let project = Self.fcmProject(path) {
            response = fcm(method: method, project: project, headers: headers, body: body, id: messageID(number))
        } else if path == "/token" {
            response = oauth(method: method, headers: headers, body: body)
        } else {
            response = SimulatedResponse(status: 404, body: #"{"reason":"BadPath"}"#)
        }
        return response
    }

    /// A UUID-shaped id, unique in this simulator: a random prefix drawn at start and the request's number.
    /// (`UUID()` opens /dev/urandom on every call, which cost a tenth of the simulator's time under load.)
    private func messageID(_ number: Int) -> String {
        let suffix = String(UInt64(number), radix: 16)
        return idPrefix + String(repeating: "0", count: max(0, 12 - suffix.count)) + suffix
    }

    private func rule(for token: String) -> SimulatorRule? {
        box.withLockedValue { state in state.rules.first { token.hasPrefix($0.prefix) } }
    }

    private func countError(_ reason: String) {
        box.withLockedValue { $0.stats.errors[reason, default: 0] += 1 }
    }

    /// True the first `times` times a flaky (or throttled) token is seen.
    private func stillFlaky(_ token: String, times: Int) -> Bool {
        box.withLockedValue { state in
            let seen = state.failuresByToken[token, default: 0]
            guard seen < times else { return false }
            state.failuresByToken[token] = seen + 1
            return true
        }
    }

    /// Counts an accepted notification and records it where asked; it is built only when it is recorded.
    private func accept(_ notification: () -> AcceptedNotification) {
        let recordFile = record.withLockedValue { $0 != nil }
        let made = recordInMemory || recordFile ? notification() : nil
        box.withLockedValue { state in
            state.stats.accepted += 1
            if recordInMemory, let made { state.accepted.append(made) }
        }
        guard recordFile, let notification = made else { return }
        record.withLockedValue { handle in
            guard let handle else { return }
            let encoder = JSONEncoder()
            encoder.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
            if let line = try? encoder.encode(notification) { handle.write(line + Data("\n".utf8)) }
        }
    }

    // MARK: APNs

    private func apnsError(_ status: Int, _ reason: String, timestamp: Int64? = nil, retryAfter: Int? = nil)
        -> SimulatedResponse
    {
        countError(reason)
        var body = #"{"reason":"\#(reason)""#
        if let timestamp { body += #","timestamp":\#(timestamp)"# }
        var response = SimulatedResponse(status: status, body: body + "}")
        if let retryAfter { response.headers.append(("retry-after", String(retryAfter))) }
        return response
    }

    private func apns(method: String, token: String, headers: HPACKHeaders, body: ByteBuffer) -> SimulatedResponse {
        guard method == "POST" else { return apnsError(405, "MethodNotAllowed") }
        guard let authorization = headers.first(name: "authorization") else {
            return apnsError(403, "MissingProviderToken")
        }
        guard let jwt = Self.bearerToken(authorization) else { return apnsError(403, "InvalidProviderToken") }
        if let reason = verifyProviderToken(jwt) { return apnsError(403, reason) }
        guard let topic = headers.first(name: "apns-topic") else { return apnsError(400, "MissingTopic") }
        // Another app of the team: the key may send to it, but no device of ours is its (checked with the token
        // below). An app outside a topic-scoped key's topics is the key's fault.
        let otherAppOfTheTeam = SimulatorCredentials.otherTopicsOfTheTeam.contains(topic)
        if topic == SimulatorCredentials.topicOutsideTheKeysScope { return apnsError(403, "UnrelatedKeyIdInToken") }
        guard topic == SimulatorCredentials.topic || otherAppOfTheTeam else { return apnsError(400, "TopicDisallowed") }
        guard let pushType = headers.first(name: "apns-push-type"), ["alert", "background"].contains(pushType) else {
            return apnsError(400, "InvalidPushType")
        }
        if let priority = headers.first(name: "apns-priority"), !["10", "5", "1"].contains(priority) {
            return apnsError(400, "BadPriority")
        }
        if pushType == "background" && headers.first(name: "apns-priority") == "10" {
            return apnsError(400, "BadPriority")
        }
        if let expiration = headers.first(name: "apns-expiration"), Int64(expiration) == nil {
            return apnsError(400, "BadExpirationDate")
        }
        let collapseID = headers.first(name: "apns-collapse-id")
        if let collapseID, collapseID.utf8.count > 64 { return apnsError(400, "BadCollapseId") }
        guard body.readableBytes > 0 else { return apnsError(400, "PayloadEmpty") }
        guard body.readableBytes <= 4096 else { return apnsError(413, "PayloadTooLarge") }
        guard let payload = try? JSONValue(parsing: body), let aps = payload["aps"], aps.isObject else {
            return apnsError(400, "PayloadEmpty")
        }
        guard !token.isEmpty, token.utf8.allSatisfy(Self.isHexDigit) else { return apnsError(400, "BadDeviceToken") }
        if otherAppOfTheTeam { return apnsError(400, "DeviceTokenNotForTopic") }
        var delay: Int?
        if let rule = rule(for: token) {
            switch rule.kind {
            case .dead:
                return apnsError(410, "Unregistered", timestamp: rule.timestampMs ?? clock() * 1000)
            case .bad:
                return apnsError(400, "BadDeviceToken")
            case .otherApp:
                return apnsError(400, "DeviceTokenNotForTopic")
            case .throttle, .projectQuota:
                if rule.times.map({ stillFlaky(token, times: $0) }) ?? true {
                    return apnsError(429, "TooManyRequests", retryAfter: rule.retryAfter ?? 1)
                }
            case .flaky:
                if stillFlaky(token, times: rule.times ?? 1) { return apnsError(503, "ServiceUnavailable") }
            case .slow:
                delay = rule.delayMs ?? 200
            case .thirdPartyAuth:
                break
            }
        }
        if faultRate > 0 && Double.random(in: 0..<1) < faultRate { return apnsError(503, "ServiceUnavailable") }
        accept {
            let alert = aps["alert"]
            return AcceptedNotification(
                provider: "apns", token: token, target: nil, collapseID: collapseID,
                expiration: headers.first(name: "apns-expiration"),
                title: alert?["title"]?.string, body: alert?["body"]?.string,
                payloadBytes: body.readableBytes, payload: String(buffer: body))
        }
        return SimulatedResponse(status: 200, delayMs: delay)
    }

    /// The project of an FCM send path, `/v1/projects/<project>/messages:send`.
    static func fcmProject(_ path: String) -> String? {
        let prefix = "/v1/projects/".utf8
        let suffix = "/messages:send".utf8
        let bytes = path.utf8
        guard bytes.count >= prefix.count + suffix.count, bytes.starts(with: prefix),
            bytes.suffix(suffix.count).elementsEqual(suffix)
        else { return nil }
        return String(Substring(bytes.dropFirst(prefix.count).dropLast(suffix.count)))
    }

    /// What follows `bearer ` (in any case) in an `authorization` value. Byte by byte: operations on
    /// Characters, on every request, were ~5 % of the simulator's time under load.
    static func bearerToken(_ authorization: String) -> String? {
        let scheme = "bearer ".utf8
        let value = authorization.utf8
        guard value.count >= scheme.count else { return nil }
        for (byte, expected) in zip(value, scheme) {
            let lower = (UInt8(ascii: "A")...UInt8(ascii: "Z")).contains(byte) ? byte + 0x20 : byte
            guard lower == expected else { return nil }
        }
        return String(Substring(value.dropFirst(scheme.count)))
    }

    static func isHexDigit(_ byte: UInt8) -> Bool {
        switch byte {
        case UInt8(ascii: "0")...UInt8(ascii: "9"), UInt8(ascii: "a")...UInt8(ascii: "f"),
            UInt8(ascii: "A")...UInt8(ascii: "F"):
            true
        default: false
        }
    }

    /// Apple's checks of a provider token: ES256, our key id, our team, a whole-second `iat` under an hour old.
    private func verifyProviderToken(_ jwt: String) -> String? {
        // A token already verified is not verified again (APNs validates a provider token once, not per
        // notification); its age still is.
        if let iat = box.withLockedValue({ $0.verifiedProviderTokens[jwt] }) {
            return clock() - iat >= 3600 ? "ExpiredProviderToken" : nil
        }
        guard let parts = JWTParts(jwt),
            parts.header["alg"] as? String == "ES256",
            parts.header["kid"] as? String == SimulatorCredentials.keyID,
            parts.claims["iss"] as? String == SimulatorCredentials.teamID,
            let iat = parts.integerClaim("iat"),
            parts.signature.count == 64,
            let signature = try? P256.Signing.ECDSASignature(rawRepresentation: parts.signature),
            apnsKey.isValidSignature(signature, for: parts.signedData)
        else { return "InvalidProviderToken" }
        let now = clock()
        if now - iat >= 3600 { return "ExpiredProviderToken" }
        if iat > now + 60 { return "InvalidProviderToken" }
        box.withLockedValue { state in
            if state.verifiedProviderTokens.updateValue(iat, forKey: jwt) == nil { state.stats.apnsProviderTokens += 1 }
        }
        return nil
    }

    // MARK: FCM

    /// Counts an FCM send against the quota: `nil` when it is within it, else the whole seconds until the
    /// window ends (at least 1), for Retry-After.
    private func overQuota() -> Int? {
        guard let quota = fcmQuota else { return nil }
        let now = ContinuousClock.now
        return box.withLockedValue { state in
            var window = state.quotaWindow ?? (began: now, sends: 0, refused: 0)
            while now - window.began >= quota.window {
                window = (began: window.began + quota.window, sends: 0, refused: 0)
            }
            guard window.sends < quota.messages else {
                if window.refused == 0 { state.stats.fcmWindowsOverQuota += 1 }
                window.refused += 1
                state.quotaWindow = window
                state.stats.fcmOverQuota += 1
                let left = (window.began + quota.window) - now
                return max(1, Int((left / .seconds(1)).rounded(.up)))
            }
            window.sends += 1
            state.quotaWindow = window
            state.stats.fcmBusiestWindow = max(state.stats.fcmBusiestWindow, window.sends)
            return nil
        }
    }

    private func fcmError(
        _ status: Int, _ googleStatus: String, _ message: String, errorCode: String? = nil,
        retryAfter: Int? = nil, quotaViolation: (subject: String, description: String)? = nil
    ) -> SimulatedResponse {
        countError(errorCode ?? googleStatus)
        var error: [String: Any] = ["code": status, "message": message, "status": googleStatus]
        if let errorCode {
            var details: [[String: Any]] = [
                ["@type": "type.googleapis.com/google.firebase.fcm.v1.FcmError", "errorCode": errorCode]
            ]
            // Whose quota ran out, as Google's APIs say it (`google.rpc.QuotaFailure`): the project's, or one
            // device's message rate.
            if let quotaViolation {
                details.append([
                    "@type": "type.googleapis.com/google.rpc.QuotaFailure",
                    "violations": [["subject": quotaViolation.subject, "description": quotaViolation.description]],
                ])
            }
            error["details"] = details
        }
        let body = (try? JSONSerialization.data(withJSONObject: ["error": error], options: [.sortedKeys])) ?? Data()
        var response = SimulatedResponse(status: status, body: String(decoding: body, as: UTF8.self))
        if let retryAfter { response.headers.append(("retry-after", String(retryAfter))) }
        return response
    }

    private func fcm(method: String, project: String, headers: HPACKHeaders, body: ByteBuffer, id: String)
        -> SimulatedResponse
    {
        guard method == "POST" else { return fcmError(405, "METHOD_NOT_ALLOWED", "Use POST") }
        let now = clock()
        guard let authorization = headers.first(name: "authorization"), authorization.hasPrefix("Bearer "),
            let expiry = box.withLockedValue({ $0.issuedAccessTokens[String(authorization.dropFirst("Bearer ".count))] }
            ),
            expiry > now
        else {
            return fcmError(401, "UNAUTHENTICATED", "Request had invalid authentication credentials.")
        }
        // Another project of the account: it authenticates, and no token of ours is its (checked below).
        let otherProject = project == SimulatorCredentials.otherProjectID
        guard project == SimulatorCredentials.projectID || otherProject else {
            return fcmError(404, "NOT_FOUND", "Requested entity was not found.")
        }
        if let retryAfter = overQuota() {
            return fcmError(
                429, "RESOURCE_EXHAUSTED", "Quota exceeded for quota metric 'Send requests'.",
                errorCode: "QUOTA_EXCEEDED", retryAfter: retryAfter,
                quotaViolation: (
                    "project:\(SimulatorCredentials.projectID)", "Quota exceeded for the project's messages a minute."
                ))
        }
        guard let request = try? JSONValue(parsing: body), let message = request["message"],
            let members = message.members
        else {
            return fcmError(400, "INVALID_ARGUMENT", "Invalid JSON payload received.", errorCode: "INVALID_ARGUMENT")
        }
        let targets = ["token", "topic", "condition", "fid"].filter { target in members.contains { $0.key == target } }
        guard targets.count == 1 else {
            return fcmError(
                400, "INVALID_ARGUMENT",
                "Exactly one of message.token, message.topic, message.condition or message.fid must be set.",
                errorCode: "INVALID_ARGUMENT")
        }
        if let problem = Self.messageProblem(message) {
            return fcmError(400, "INVALID_ARGUMENT", problem, errorCode: "INVALID_ARGUMENT")
        }
        let target = targets[0]
        let token = message[target]?.string ?? ""
        // As FCM: an installation id in `token` is no registration token, and a registration token in `fid` is no
        // installation id.
        if target == "token" && DeviceToken.isFIDShaped(token) {
            return fcmError(
                400, "INVALID_ARGUMENT", "The registration token is not a valid FCM registration token",
                errorCode: "INVALID_ARGUMENT")
        }
        if target == "fid" && !DeviceToken.isFIDShaped(token) {
            return fcmError(
                400, "INVALID_ARGUMENT", "Invalid value at 'message.fid': not a valid Firebase installation ID",
                errorCode: "INVALID_ARGUMENT")
        }
        // The message without its token must fit 4096 bytes. A request body that fits holds such a message
        // (serialising it again would cost a third of the simulator's time under load); a larger one is
        // measured exactly.
        var payloadSize = 0
        if body.readableBytes > 4096 {
            var compact: [UInt8] = []
            JSONValue.object(members.filter { $0.key != target }).write(into: &compact)
            payloadSize = compact.count
        }
        guard payloadSize <= 4096 else {
            return fcmError(400, "INVALID_ARGUMENT", "Message is too big", errorCode: "INVALID_ARGUMENT")
        }
        if otherProject {
            return fcmError(403, "PERMISSION_DENIED", "SenderId mismatch", errorCode: "SENDER_ID_MISMATCH")
        }
        var delay: Int?
        if let rule = rule(for: token) {
            switch rule.kind {
            case .dead:
                return fcmError(404, "NOT_FOUND", "Requested entity was not found.", errorCode: "UNREGISTERED")
            case .bad:
                return fcmError(
                    400, "INVALID_ARGUMENT",
                    target == "fid"
                        ? "Invalid value at 'message.fid': not a valid Firebase installation ID"
                        : "The registration token is not a valid FCM registration token",
                    errorCode: "INVALID_ARGUMENT")
            case .throttle:
                if rule.times.map({ stillFlaky(token, times: $0) }) ?? true {
                    return fcmError(
                        429, "RESOURCE_EXHAUSTED", "Quota exceeded.", errorCode: "QUOTA_EXCEEDED",
                        retryAfter: rule.retryAfter ?? 1,
                        quotaViolation: ("device", "Device message rate exceeded for the message's target."))
                }
            case .projectQuota:
                if rule.times.map({ stillFlaky(token, times: $0) }) ?? true {
                    return fcmError(
                        429, "RESOURCE_EXHAUSTED", "Quota exceeded for quota metric 'Send requests'.",
                        errorCode: "QUOTA_EXCEEDED", retryAfter: rule.retryAfter ?? 1,
                        quotaViolation: (
                            "project:\(SimulatorCredentials.projectID)",
                            "Quota exceeded for the project's messages a minute."
                        ))
                }
            case .flaky:
                if stillFlaky(token, times: rule.times ?? 1) {
                    return fcmError(
                        503, "UNAVAILABLE", "The service is currently unavailable.", errorCode: "UNAVAILABLE")
                }
            case .slow:
                delay = rule.delayMs ?? 200
            case .otherApp:
                return fcmError(403, "PERMISSION_DENIED", "SenderId mismatch", errorCode: "SENDER_ID_MISMATCH")
            case .thirdPartyAuth:
                return fcmError(
                    401, "UNAUTHENTICATED", "Auth error from APNS or Web Push Service",
                    errorCode: "THIRD_PARTY_AUTH_ERROR")
            }
        }
        if faultRate > 0 && Double.random(in: 0..<1) < faultRate {
            return fcmError(503, "UNAVAILABLE", "The service is currently unavailable.", errorCode: "UNAVAILABLE")
        }
        let name = "projects/\(project)/messages/\(id)"
        if request["validate_only"]?.bool == true {
            box.withLockedValue { $0.stats.validated += 1 }
            return SimulatedResponse(
                status: 200, body: #"{"name":"projects/\#(project)/messages/fake_message_id"}"#, delayMs: delay)
        }
        let notification = message["notification"]
        let android = message["android"]
        let apnsHeaders = message["apns"]?["headers"]
        accept {
            AcceptedNotification(
                provider: "fcm", token: token, target: target == "fid" ? "fid" : nil,
                collapseID: android?["notification"]?["tag"]?.string ?? apnsHeaders?["apns-collapse-id"]?.string,
                expiration: android?["ttl"]?.string ?? apnsHeaders?["apns-expiration"]?.string,
                title: notification?["title"]?.string, body: notification?["body"]?.string,
                payloadBytes: payloadSize, payload: String(buffer: body))
        }
        return SimulatedResponse(status: 200, body: #"{"name":"\#(name)"}"#, delayMs: delay)
    }

    /// What FCM rejects in a message's shape.
    static func messageProblem(_ message: JSONValue) -> String? {
        if let data = message["data"] {
            guard let map = data.members, map.allSatisfy({ $0.value.string != nil }) else {
                return "Invalid value at 'message.data': values must be strings"
            }
            for (key, _) in map
            where ["from", "message_type"].contains(key) || key.hasPrefix("google") || key.hasPrefix("gcm") {
                return "Invalid data key: \(key) is reserved"
            }
        }
        if let android = message["android"], android.isObject {
            if let priority = android["priority"]?.string, !["high", "normal", "HIGH", "NORMAL"].contains(priority) {
                return "Invalid value at 'message.android.priority'"
            }
            if let ttl = android["ttl"] {
                guard let text = ttl.string, text.hasSuffix("s"), Double(text.dropLast()) != nil else {
                    return "Invalid value at 'message.android.ttl' (expected a duration like \"3600s\")"
                }
            }
        }
        if let apns = message["apns"], apns.isObject, let headers = apns["headers"] {
            guard let map = headers.members, map.allSatisfy({ $0.value.string != nil }) else {
                return "Invalid value at 'message.apns.headers': values must be strings"
            }
        }
        return nil
    }

    // MARK: OAuth

    private func oauthError(_ description: String) -> SimulatedResponse {
        countError("invalid_grant")
        return SimulatedResponse(status: 400, body: #"{"error":"invalid_grant","error_description":"\#(description)"}"#)
    }

    private func oauth(method: String, headers: HPACKHeaders, body: ByteBuffer) -> SimulatedResponse {
        guard method == "POST" else { return oauthError("POST required") }
        var form: [String: String] = [:]
        for pair in String(buffer: body).split(separator: "&") {
            let parts = pair.split(separator: "=", maxSplits: 1)
            guard parts.count == 2 else { continue }
            form[String(parts[0]).removingPercentEncoding ?? ""] = String(parts[1]).removingPercentEncoding
        }
        guard form["grant_type"] == "urn:ietf:params:oauth:grant-type:jwt-bearer" else {
            return oauthError("Invalid grant_type")
        }
        guard let assertion = form["assertion"], let parts = JWTParts(assertion) else {
            return oauthError("Invalid JWT")
        }
        let audience = parts.claims["aud"] as? String ?? (parts.claims["aud"] as? [String])?.first
        guard parts.header["alg"] as? String == "RS256",
            parts.header["kid"] as? String == SimulatorCredentials.privateKeyID,
            parts.claims["iss"] as? String == SimulatorCredentials.clientEmail,
            audience == baseURL + "/token",
            (parts.claims["scope"] as? String)?.contains("https://www.googleapis.com/auth/firebase.messaging") == true,
            let iat = parts.integerClaim("iat"), let exp = parts.integerClaim("exp"),
            serviceAccountKey.isValidSignature(
                _RSA.Signing.RSASignature(rawRepresentation: parts.signature),
                for: parts.signedData, padding: .insecurePKCS1v1_5)
        else { return oauthError("Invalid JWT Signature or claims.") }
        let now = clock()
        guard exp > now, exp - iat <= 3600, iat <= now + 300 else {
            return oauthError("Invalid JWT: Token must be a short-lived token")
        }
        let token = "sim-" + (0..<4).map { _ in String(UInt64.random(in: 0...UInt64.max), radix: 16) }.joined()
        box.withLockedValue { state in
            state.issuedAccessTokens[token] = now + 3600
            state.stats.oauthExchanges += 1
        }
        return SimulatedResponse(
            status: 200, headers: [("content-type", "application/json")],
            body: #"{"access_token":"\#(token)","expires_in":3600,"token_type":"Bearer"}"#)
    }
}

/// A compact JWT, decoded without trusting it.
struct JWTParts {
    let header: [String: Any]
    let claims: [String: Any]
    let claimsText: String
    let signature: Data
    let signedData: Data

    init?(_ jwt: String) {
        let pieces = jwt.split(separator: ".", omittingEmptySubsequences: false)
        guard pieces.count == 3,
            let headerData = Self.base64URL(pieces[0]), let claimsData = Self.base64URL(pieces[1]),
            let signature = Self.base64URL(pieces[2]),
            let header = try? JSONSerialization.jsonObject(with: headerData) as? [String: Any],
            let claims = try? JSONSerialization.jsonObject(with: claimsData) as? [String: Any]
        else { return nil }
        self.header = header
        self.claims = claims
        self.claimsText = String(decoding: claimsData, as: UTF8.self)
        self.signature = signature
        self.signedData = Data("\(pieces[0]).\(pieces[1])".utf8)
    }

    /// A claim written as a whole number: `"iat":1700000000`, not `1700000000.25`.
    func integerClaim(_ name: String) -> Int64? {
        guard let range = claimsText.range(of: "\"\(name)\":") else { return nil }
        let digits = claimsText[range.upperBound...].prefix { $0.isNumber || $0 == "." || $0 == "-" || $0 == " " }
            .trimmingCharacters(in: .whitespaces)
        return digits.contains(".") ? nil : Int64(digits)
    }

    static func base64URL(_ text: Substring) -> Data? {
        var base64 = text.replacingOccurrences(of: "-", with: "+").replacingOccurrences(of: "_", with: "/")
        while base64.count % 4 != 0 { base64 += "=" }
        return Data(base64Encoded: base64)
    }
}

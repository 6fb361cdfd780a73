/// The shape a device token must have before it is stored or sent: the one rule behind registration, the
/// schema's check (migration `007_device_token_shape`, which states it again in SQL for rows written by
/// plain SQL) and the send-time guard.
///
/// - APNs: lower-case hexadecimal of even length, at most 200 digits (Apple documents tokens of variable
///   length, up to 100 bytes; the token goes into the request's `:path`).
/// - FCM: 1 to 2,000 of the characters FCM registration tokens use: ASCII letters, digits, `-`, `_` and `:`;
///   never of a Firebase Installation ID's shape (that is registered as a FID, and sent in `message.fid`).
/// - FCM installation ids (FIDs, ``TokenKind/fid``): 22 characters, the first one of `c d e f`, then 21 of
///   `A-Z a-z 0-9 - _` (base64url of 132 bits with a fixed 4-bit header).
///
/// A token outside these can only be a bug or an attack (a space or line break in an HTTP/2 path, `/../`,
/// `?#`): it is refused when written and never put on the wire.
package enum DeviceToken {
    package static let maxAPNsHexDigits = 200
    /// FCM documents no length (its tokens are about 160 characters); 2,000 is what a PostgreSQL unique index
    /// entry holds with room to spare, and what both stores' schemas allow.
    package static let maxFCMLength = 2000
    /// The deactivation reason of a stored token that violates the shape.
    package static let invalidReason = "invalid_token"

    /// The length of a Firebase Installation ID.
    package static let fidLength = 22

    /// Whether `value` has a Firebase Installation ID's shape. No FCM registration token has it (they are about
    /// 160 characters, with a `:`), so such a value offered as a token is a FID registered the wrong way.
    package static func isFIDShaped(_ value: String) -> Bool {
        let bytes = value.utf8
        guard bytes.count == fidLength, let first = bytes.first,
            (UInt8(ascii: "c")...UInt8(ascii: "f")).contains(first)
        else { return false }
        return bytes.allSatisfy { isFCMCharacter($0) && $0 != UInt8(ascii: ":") }
    }

    /// Whether `value` has an APNs device token's shape (hex digits in either case, whole bytes, 32 to 100 of them):
    /// no FCM registration token does (they are about 160 characters, with a `:`), so such a value offered as an
    /// FCM token is an iOS app's raw APNs token registered under the wrong provider. Checked when a token is
    /// registered or mirrored, not for rows already stored (those are answered by FCM, and counted).
    package static func isAPNsShaped(_ value: String) -> Bool {
        let bytes = value.utf8
        guard bytes.count >= 64, bytes.count <= maxAPNsHexDigits, bytes.count % 2 == 0 else { return false }
        return bytes.allSatisfy {
            (0x30...0x39).contains($0) || (0x61...0x66).contains($0) || (0x41...0x46).contains($0)
        }
    }

    /// ``isAPNsShaped(_:)`` as a PostgreSQL regular expression, for the SQL mirror (`pushctl integrate postgres`).
    package static let apnsShapedPattern = "^([0-9a-fA-F]{2}){32,\(maxAPNsHexDigits / 2)}$"

    /// What refuses a new registration, or mirrored row, of an APNs-shaped token as an FCM token.
    package static let apnsTokenAsFCM =
        "this is an APNs device token (hexadecimal), not an FCM registration token: register it with provider apns (or, with Firebase on iOS, send FCM's token, from Messaging.messaging().token)"

    /// Why `token` is not a valid value of `kind` for `provider`, or nil when it is.
    package static func problem(_ token: String, provider: Provider, kind: TokenKind = .token) -> String? {
        if kind == .fid {
            guard provider.takes(.fid) else {
                return "a Firebase installation id (FID) is for FCM, not \(provider.descriptor.name)"
            }
            guard isFIDShaped(token) else {
                return
                    "an FCM installation id (FID) is \(fidLength) characters, the first one of c d e f, then A-Z a-z 0-9 - _"
            }
            return nil
        }
        return provider.descriptor.tokenProblem(token)
    }

    /// ``ProviderDescriptor/tokenProblem`` of APNs.
    static func apnsTokenProblem(_ token: String) -> String? {
        let bytes = token.utf8
        guard !bytes.isEmpty else { return "an APNs token is empty" }
        guard bytes.allSatisfy({ (0x30...0x39).contains($0) || (0x61...0x66).contains($0) }) else {
            return "an APNs token is lower-case hexadecimal (0-9, a-f)"
        }
        guard bytes.count % 2 == 0 else { return "an APNs token has an even number of hex digits (whole bytes)" }
        guard bytes.count <= maxAPNsHexDigits else { return "an APNs token has at most \(maxAPNsHexDigits) hex digits" }
        return nil
    }

    /// ``ProviderDescriptor/tokenProblem`` of FCM.
    static func fcmTokenProblem(_ token: String) -> String? {
        let bytes = token.utf8
        guard !bytes.isEmpty else { return "an FCM token is empty" }
        guard bytes.allSatisfy(isFCMCharacter) else {
            return "an FCM token consists of ASCII letters, digits, '-', '_' and ':'"
        }
        guard bytes.count <= maxFCMLength else { return "an FCM token has at most \(maxFCMLength) characters" }
        guard !isFIDShaped(token) else {
            return "this is a Firebase installation id (FID), not a registration token: register it with --fid"
        }
        return nil
    }

    private static func isFCMCharacter(_ byte: UInt8) -> Bool {
        switch byte {
        case UInt8(ascii: "a")...UInt8(ascii: "z"), UInt8(ascii: "A")...UInt8(ascii: "Z"),
            UInt8(ascii: "0")...UInt8(ascii: "9"),
            UInt8(ascii: "-"), UInt8(ascii: "_"), UInt8(ascii: ":"):
            true
        default:
            false
        }
    }
}

extension Device {
    /// The kind the device's value is sent as: its stored kind, except that an FCM value of a FID's shape is
    /// always sent as a FID. The schema refuses such a value stored as a token (migration 013), so this only
    /// guards rows that reached the table some other way: a FID is never put in `message.token`, where FCM would
    /// answer that the token is invalid and the device would be retired while it is alive.
    package var sendingKind: TokenKind {
        kind == .token && provider.takes(.fid) && DeviceToken.isFIDShaped(token) ? .fid : kind
    }
}

/// Answers notifications to devices whose stored token violates ``DeviceToken`` itself, as dead tokens with
/// reason `invalid_token` (so the device is deactivated and counted like any dead token), and hands the rest
/// to the sender it wraps. Every job sends through it: a malformed row written by plain SQL before the schema
/// checked tokens is never sent.
package struct TokenCheckingSender: Sender {
    package let inner: any Sender

    /// Wraps `sender`, unless it is already wrapped.
    package static func wrapping(_ sender: any Sender) -> TokenCheckingSender {
        (sender as? TokenCheckingSender) ?? TokenCheckingSender(inner: sender)
    }

    private init(inner: any Sender) { self.inner = inner }

    package func send(_ batch: [OutgoingNotification]) async -> [DeliveryReport] {
        await send(batch) { _, _ in }
    }

    package func send(_ batch: [OutgoingNotification], finished: @escaping FinishedReports) async -> [DeliveryReport] {
        let invalid = batch.indices.filter {
            let device = batch[$0].device
            return DeviceToken.problem(device.token, provider: device.provider, kind: device.sendingKind) != nil
        }
        guard !invalid.isEmpty else { return await inner.send(batch, finished: finished) }
        var reports = [DeliveryReport?](repeating: nil, count: batch.count)
        let refused = invalid.map {
            DeliveryReport(
                channel: DeliveryChannel(batch[$0].device.provider), outcome: .tokenDead,
                reason: DeviceToken.invalidReason,
                attempts: 1)
        }
        for (index, report) in zip(invalid, refused) { reports[index] = report }
        finished(invalid, refused)
        let invalidSet = Set(invalid)
        let valid = batch.indices.filter { !invalidSet.contains($0) }
        if !valid.isEmpty {
            let answered = await inner.send(valid.map { batch[$0] }) { indices, innerReports in
                finished(indices.map { valid[$0] }, innerReports)
            }
            for (index, report) in zip(valid, answered) { reports[index] = report }
        }
        return reports.map { $0! }
    }

    package func canDeliver(to provider: Provider) -> Bool { inner.canDeliver(to: provider) }
    package func beginRun(finishBy: ContinuousClock.Instant?) async { await inner.beginRun(finishBy: finishBy) }
    package func shutdown() async { await inner.shutdown() }
    package func channelFailure() async -> JobError? { await inner.channelFailure() }
    package func credentialMints() async -> [Provider: Int] { await inner.credentialMints() }
    package var outageThreshold: OutageThreshold { inner.outageThreshold }
}

import Crypto
import Foundation

/// What an HTTP API key may call.
package enum APIScope: String, Sendable, Hashable, CaseIterable, Codable {
    /// Everything.
    case admin
    /// A backend's writes: the content-limit hook and entries.
    case hook
    /// An app's own registration: users' settings and devices.
    case devices
    /// A database webhook of the app's own tables (users, devices, entries), as the mapping says.
    case webhook
    /// Support's, read-only: explain a user's reminder (the health report is `token-janitor report`'s).
    case support
}

/// One API key as `pushctl api-key list` shows it: never its secret, which no store holds.
package struct APIKeyRecord: Sendable, Hashable {
    package let id: String
    package let name: String
    package let scope: APIScope
    package let createdAt: Int64
    package let revokedAt: Int64?

    package init(id: String, name: String, scope: APIScope, createdAt: Int64, revokedAt: Int64?) {
        self.id = id
        self.name = name
        self.scope = scope
        self.createdAt = createdAt
        self.revokedAt = revokedAt
    }
}

/// The `api_keys` table (migration 015): the store's primitives; what a key looks like and how it is checked is
/// ``APIKey``'s.
package protocol APIKeyStore: Sendable {
    /// Adds a key; its id is new (a clash is a ``JobError/software(_:)``: ids are random).
    func insertAPIKey(_ record: APIKeyRecord, secretSHA256: String) async throws(JobError)
    /// The key `id`: its scope, its secret's hash and whether it is revoked; nil when there is none.
    func apiKey(id: String) async throws(JobError) -> (scope: APIScope, secretSHA256: String, revoked: Bool)?
    /// Every key, oldest first.
    func apiKeys() async throws(JobError) -> [APIKeyRecord]
    /// Revokes key `id` at `now`; false when there is no such key or it was revoked already.
    func revokeAPIKey(id: String, now: Int64) async throws(JobError) -> Bool
}

/// An HTTP API key: `dpk_<id>_<secret>`, a 16-hex-digit id (the row) and a 43-character base64url secret (32
/// random bytes). The store keeps the secret's SHA-256 only (a random 256-bit secret needs no slow hash); a
/// presented key is looked up by its id and its secret compared in constant time.
package struct APIKey: Sendable, Hashable {
    package static let prefix = "dpk_"

    package let id: String
    package let secret: String

    /// The key as its holder writes it: `Authorization: Bearer <text>`.
    package var text: String { "\(Self.prefix)\(id)_\(secret)" }

    /// A new key from the system's random source.
    package static func generate() -> APIKey {
        var generator = SystemRandomNumberGenerator()
        let id = hex((0..<8).map { _ in UInt8.random(in: 0...255, using: &generator) })
        let bytes = (0..<32).map { _ in UInt8.random(in: 0...255, using: &generator) }
        return APIKey(id: id, secret: Data(bytes).base64URLEncodedString())
    }

    private init(id: String, secret: String) {
        self.id = id
        self.secret = secret
    }

    /// The key `text` spells, or nil when it is not one's shape (no store is asked about such text).
    package init?(parsing text: some StringProtocol) {
        guard text.hasPrefix(Self.prefix) else { return nil }
        let rest = text.dropFirst(Self.prefix.count)
        guard let separator = rest.firstIndex(of: "_") else { return nil }
        let id = rest[..<separator]
        let secret = rest[rest.index(after: separator)...]
        guard id.count == 16, id.allSatisfy(\.isHexDigit), secret.count == 43,
            secret.allSatisfy({ $0.isASCII && ($0.isLetter || $0.isNumber || $0 == "-" || $0 == "_") })
        else { return nil }
        self.init(id: String(id), secret: String(secret))
    }

    /// The hex SHA-256 of the secret: what the store keeps.
    package var secretSHA256: String { Self.sha256(secret) }

    static func sha256(_ text: String) -> String {
        hex(SHA256.hash(data: Data(text.utf8)))
    }

    /// Whether `stored` (a row's hash) is this key's, compared in constant time.
    package func matches(secretSHA256 stored: String) -> Bool {
        let mine = Array(secretSHA256.utf8)
        let theirs = Array(stored.utf8)
        guard mine.count == theirs.count else { return false }
        var difference: UInt8 = 0
        for (a, b) in zip(mine, theirs) { difference |= a ^ b }
        return difference == 0
    }
}

extension APIKeyStore {
    /// Creates a key of `scope` named `name` at `now`; the returned key's text is shown once and kept nowhere.
    package func createAPIKey(scope: APIScope, name: String, now: Int64) async throws(JobError) -> APIKey {
        let key = APIKey.generate()
        try await insertAPIKey(
            APIKeyRecord(id: key.id, name: name, scope: scope, createdAt: now, revokedAt: nil),
            secretSHA256: key.secretSHA256)
        return key
    }
}

/// `bytes` as lower-case hex, two digits a byte: key ids and the SHA-256 digests the API keeps.
package func hex(_ bytes: some Sequence<UInt8>) -> String {
    let digits = Array("0123456789abcdef".utf8)
    var text: [UInt8] = []
    for byte in bytes {
        text.append(digits[Int(byte >> 4)])
        text.append(digits[Int(byte & 0x0F)])
    }
    return String(decoding: text, as: UTF8.self)
}

extension Data {
    fileprivate func base64URLEncodedString() -> String {
        base64EncodedString().replacingOccurrences(of: "+", with: "-").replacingOccurrences(of: "/", with: "_")
            .replacingOccurrences(of: "=", with: "")
    }
}

/// One `Idempotency-Key`'s row: which request it was made for, and its answer once there is one.
package struct IdempotencyRecord: Sendable, Hashable {
    package let requestSHA256: String
    /// The answer's status; 0 while the request is being answered.
    package let status: Int
    package let response: String?
    package let createdAt: Int64

    package init(requestSHA256: String, status: Int, response: String?, createdAt: Int64) {
        self.requestSHA256 = requestSHA256
        self.status = status
        self.response = response
        self.createdAt = createdAt
    }
}

/// The `api_idempotency` table (migration 015): the store's primitives; what a key's row means is
/// ``IdempotencyRule``'s.
package protocol IdempotencyStore: Sendable {
    /// The row of `key` for `caller`, if any.
    func idempotencyRecord(caller: String, key: String) async throws(JobError) -> IdempotencyRecord?
    /// Inserts `record` unless a row of `key` exists; whether it did.
    func insertIdempotency(caller: String, key: String, _ record: IdempotencyRecord) async throws(JobError) -> Bool
    /// Replaces the row of `key` with `record` if it was still created at `createdAt` (one taker wins); whether it
    /// did.
    func replaceIdempotency(caller: String, key: String, createdAt: Int64, with record: IdempotencyRecord)
        async throws(JobError) -> Bool
    /// Records the answer of the request that holds `key`.
    func finishIdempotency(caller: String, key: String, status: Int, response: String) async throws(JobError)
    /// Forgets `key` (its request failed in a way a retry may undo).
    func deleteIdempotency(caller: String, key: String) async throws(JobError)
    /// Deletes the rows created before `before`; how many.
    func deleteIdempotency(createdBefore before: Int64) async throws(JobError) -> Int
}

/// What an `Idempotency-Key` on a request means, given its row (the HTTP API's rule, written once for both stores):
/// a key is kept 24 hours; the same key with the same request replays the first answer; with another request it is
/// a conflict; a request still being answered under it is in progress, unless it has been so for longer than
/// ``abandonedAfter`` (its server died): then the new request takes the key over.
package enum IdempotencyRule {
    package static let keptSeconds: Int64 = 86_400
    package static let abandonedAfter: Int64 = 60

    package enum Decision: Sendable, Hashable {
        /// Answer the request, then record the answer under the key.
        case proceed
        /// Answer with the recorded answer.
        case replay(status: Int, response: String)
        /// The key was used for another request: 422.
        case conflict
        /// The key's first request is still being answered: 409, try again.
        case inProgress
    }

    /// The decision for a request hashing to `requestSHA256` at `now`, by the key's row (`nil`: none).
    package static func decide(_ record: IdempotencyRecord?, requestSHA256: String, now: Int64) -> Decision {
        guard let record, record.createdAt > now - keptSeconds else { return .proceed }
        guard record.requestSHA256 == requestSHA256 else { return .conflict }
        if record.status == 0 { return record.createdAt <= now - abandonedAfter ? .proceed : .inProgress }
        return .replay(status: record.status, response: record.response ?? "")
    }
}

extension IdempotencyStore {
    /// Claims `key` for a request: the row is written (or taken over) before the request is answered, so that two
    /// requests with one key never both proceed.
    package func beginIdempotent(caller: String, key: String, requestSHA256: String, now: Int64)
        async throws(JobError) -> IdempotencyRule.Decision
    {
        let mine = IdempotencyRecord(requestSHA256: requestSHA256, status: 0, response: nil, createdAt: now)
        for _ in 0..<3 {
            let existing = try await idempotencyRecord(caller: caller, key: key)
            let decision = IdempotencyRule.decide(existing, requestSHA256: requestSHA256, now: now)
            guard decision == .proceed else { return decision }
            let won =
                if let existing {
                    try await replaceIdempotency(caller: caller, key: key, createdAt: existing.createdAt, with: mine)
                } else {
                    try await insertIdempotency(caller: caller, key: key, mine)
                }
            if won { return .proceed }
        }
        return .inProgress
    }
}

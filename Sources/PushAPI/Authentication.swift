import HTTPTypes
import JobKit
import NIOConcurrencyHelpers
import OpenAPIRuntime

/// Who may call each operation: the API key scopes (``APIScope``) it takes. An operation not listed takes no
/// credentials (`/healthz`, `/metrics`); `openapi.yaml` says the same for each operation, and a test checks both.
package enum OperationScopes {
    package static let byOperation: [String: Set<APIScope>] = [
        "putUser": [.admin, .devices],
        "deleteUser": [.admin],
        "registerDevice": [.admin, .devices],
        "unregisterDevice": [.admin, .devices],
        "recordEntry": [.admin, .hook],
        "contentLimitHook": [.admin, .hook],
        "explainUser": [.admin, .support],
        "deliveryReport": [.admin, .support],
        "databaseWebhook": [.admin, .webhook],
    ]

    /// The operations an app's signed-in user may call with their own JWT, for themselves only: their settings
    /// and their devices.
    package static let forUsers: Set<String> = ["putUser", "registerDevice", "unregisterDevice"]
}

/// Checks the `Authorization: Bearer …` of every operation that takes credentials: an API key (`dpk_…`), or, when
/// configured, an app user's JWT (``AppUserTokens``). Missing, malformed, unknown, revoked, expired or forged
/// credentials are 401; valid ones that do not cover the operation 403. The caller is then ``Caller/current``.
/// Credentials are never logged.
struct AuthenticationMiddleware: ServerMiddleware {
    let keys: APIKeyCache
    let users: AppUserTokens?
    let limiter: RateLimiter
    let now: @Sendable () -> Int64

    func intercept(
        _ request: HTTPRequest, body: HTTPBody?, metadata: ServerRequestMetadata, operationID: String,
        next: @Sendable (HTTPRequest, HTTPBody?, ServerRequestMetadata) async throws -> (HTTPResponse, HTTPBody?)
    ) async throws -> (HTTPResponse, HTTPBody?) {
        guard let scopes = OperationScopes.byOperation[operationID] else {
            return try await next(request, body, metadata)
        }
        guard let header = request.headerFields[.authorization] else {
            throw APIProblem(.unauthorized, "send Authorization: Bearer <API key>")
        }
        let parts = header.split(separator: " ", maxSplits: 1)
        guard parts.count == 2, parts[0].lowercased() == "bearer" else {
            throw APIProblem(.unauthorized, "the Authorization header is not Bearer <API key>")
        }
        let credential = String(parts[1])
        let caller: Caller
        if !credential.hasPrefix(APIKey.prefix), let users {
            let user = try await users.userID(credential, now: now())
            guard OperationScopes.forUsers.contains(operationID) else {
                throw APIProblem(.forbidden, "a user's token may not call \(operationID) (an API key may)")
            }
            caller = .user(user)
        } else {
            guard let key = try await keys.authenticate(credential), case .key(_, let scope) = key else {
                throw APIProblem(.unauthorized, "the API key is not valid (unknown or revoked)")
            }
            guard scopes.contains(scope) else {
                let allowed = scopes.map(\.rawValue).sorted().joined(separator: " or ")
                throw APIProblem(
                    .forbidden, "a key of scope \(scope.rawValue) may not call \(operationID) (it takes \(allowed))")
            }
            caller = key
        }
        try limit(caller.id)
        return try await Caller.$current.withValue(caller) { try await next(request, body, metadata) }
    }

    private func limit(_ caller: String) throws(APIProblem) {
        if let wait = limiter.take(caller) {
            throw APIProblem(
                .tooManyRequests, "over \(Int(limiter.rate)) requests a second; try again in \(wait) s",
                retryAfter: wait)
        }
    }
}

/// The API keys' rows as the store last said, for at most ``ttl``: a busy backend's key is read from the store
/// once a second, not once a request (BENCHMARKS.md#run-ids-and-api-keys). A revocation therefore takes
/// effect within that second; an unknown id is never cached.
final class APIKeyCache: Sendable {
    static let ttl: Duration = .seconds(1)

    private struct Entry {
        let scope: APIScope
        let secretSHA256: String
        let revoked: Bool
        let readAt: ContinuousClock.Instant
        /// The key's whole text, once a request has shown it matches `secretSHA256`: later requests compare with
        /// it (in constant time) instead of hashing again.
        var verified: [UInt8]?
    }

    let store: any APIKeyStore
    private let entries = NIOLockedValueBox<[String: Entry]>([:])

    init(store: any APIKeyStore) { self.store = store }

    /// The caller the key `text` spells, or nil when it is not a key the store holds unrevoked.
    func authenticate(_ text: String, now: ContinuousClock.Instant = .now) async throws(JobError) -> Caller? {
        guard let key = APIKey(parsing: text) else { return nil }
        var entry = entries.withLockedValue { $0[key.id] }
        if entry == nil || now - entry!.readAt > Self.ttl {
            guard let row = try await store.apiKey(id: key.id) else { return nil }
            entry = Entry(scope: row.scope, secretSHA256: row.secretSHA256, revoked: row.revoked, readAt: now)
            entries.withLockedValue { $0[key.id] = entry }
        }
        guard var entry, !entry.revoked else { return nil }
        let bytes = Array(text.utf8)
        if let verified = entry.verified, Self.equal(verified, bytes) { return .key(id: key.id, scope: entry.scope) }
        guard key.matches(secretSHA256: entry.secretSHA256) else { return nil }
        entry.verified = bytes
        entries.withLockedValue { $0[key.id] = entry }
        return .key(id: key.id, scope: entry.scope)
    }

    /// Byte equality whose time does not depend on where the bytes differ.
    private static func equal(_ a: [UInt8], _ b: [UInt8]) -> Bool {
        guard a.count == b.count else { return false }
        var difference: UInt8 = 0
        for (x, y) in zip(a, b) { difference |= x ^ y }
        return difference == 0
    }
}

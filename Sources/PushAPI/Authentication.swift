import HTTPTypes
import JobKit
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
        "explainUser": [.admin],
    ]
}

/// Checks the `Authorization: Bearer <key>` of every operation that takes credentials: a missing, malformed,
/// unknown or revoked key is 401, a key whose scope does not cover the operation 403. Keys are never logged.
struct AuthenticationMiddleware: ServerMiddleware {
    let keys: any APIKeyStore

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
        guard let scope = try await keys.authenticate(parts[1]) else {
            throw APIProblem(.unauthorized, "the API key is not valid (unknown or revoked)")
        }
        guard scopes.contains(scope) else {
            let allowed = scopes.map(\.rawValue).sorted().joined(separator: " or ")
            throw APIProblem(
                .forbidden, "a key of scope \(scope.rawValue) may not call \(operationID) (it takes \(allowed))")
        }
        return try await next(request, body, metadata)
    }
}

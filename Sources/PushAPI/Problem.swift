import Foundation
import HTTPTypes
import JobKit
import OpenAPIRuntime

/// An RFC 9457 problem: what every 4xx and 5xx of the API answers, as `application/problem+json`, with a stable
/// `type` (`/problems/<kind>`) a client can switch on and a `detail` that says what was wrong.
package struct APIProblem: Error, Sendable, Hashable {
    /// The kinds of problem, each with its status and title.
    package enum Kind: String, Sendable, CaseIterable {
        case badRequest = "bad-request"
        case unauthorized
        case forbidden
        case notFound = "not-found"
        case methodNotAllowed = "method-not-allowed"
        case conflict
        case ownedByTheApp = "owned-by-the-app"
        case unprocessable = "unprocessable"
        case tooLarge = "too-large"
        case unsupportedMediaType = "unsupported-media-type"
        case tooManyRequests = "too-many-requests"
        case unavailable
        case internalError = "internal"

        package var status: Int {
            switch self {
            case .badRequest: 400
            case .unauthorized: 401
            case .forbidden: 403
            case .notFound: 404
            case .methodNotAllowed: 405
            case .conflict: 409
            case .ownedByTheApp: 409
            case .unprocessable: 422
            case .tooLarge: 413
            case .unsupportedMediaType: 415
            case .tooManyRequests: 429
            case .unavailable: 503
            case .internalError: 500
            }
        }

        package var title: String {
            switch self {
            case .badRequest: "The request is not valid"
            case .unauthorized: "No valid credentials"
            case .forbidden: "Not allowed with these credentials"
            case .notFound: "No such resource"
            case .methodNotAllowed: "Not a method of this resource"
            case .conflict: "A request with this Idempotency-Key is in progress"
            case .ownedByTheApp: "The app's own table is the source of truth for these rows"
            case .unprocessable: "This Idempotency-Key was used for another request"
            case .tooLarge: "The body is over 64 KiB"
            case .unsupportedMediaType: "The body must be application/json"
            case .tooManyRequests: "Too many requests with these credentials"
            case .unavailable: "The store is unavailable; try again"
            case .internalError: "The server failed"
            }
        }
    }

    package let kind: Kind
    package let detail: String
    /// Seconds to wait before trying again (`Retry-After`), for ``Kind/unavailable``.
    package var retryAfter: Int?

    package init(_ kind: Kind, _ detail: String, retryAfter: Int? = nil) {
        self.kind = kind
        self.detail = detail
        self.retryAfter = retryAfter ?? (kind == .unavailable ? 5 : nil)
    }

    /// The problem a job's error is, by the meaning of its exit code (the table in docs/API.md): bad input 400, an
    /// unknown user 404, a store that is unavailable, locked or busy 503; a failure of the server's own 500.
    package init(_ error: JobError) {
        if error.isUnknownUser {
            self.init(.notFound, error.message)
            return
        }
        switch error.exitCode {
        case 64, 65: self.init(.badRequest, error.message)
        case 69, 74, 75: self.init(.unavailable, error.message)
        default: self.init(.internalError, "the server could not complete the request (\(error.kind))")
        }
    }

    /// The problem any error thrown while answering is: ours as they are, a job's by its meaning, the OpenAPI
    /// runtime's (a body that does not decode, a wrong content type, a missing parameter) as bad input.
    package init(any error: any Error) {
        switch error {
        case let problem as APIProblem: self = problem
        case let error as JobError: self.init(error)
        case let error as ServerError: self.init(underlying: error.underlyingError, status: error.httpStatus)
        case let error as DecodingError: self.init(.badRequest, Self.describe(error))
        default: self.init(.internalError, "the server could not complete the request")
        }
    }

    private init(underlying: any Error, status: HTTPResponse.Status) {
        switch underlying {
        case let problem as APIProblem: self = problem
        case let error as JobError: self.init(error)
        case let error as DecodingError: self.init(.badRequest, Self.describe(error))
        default:
            switch status.code {
            case 415: self.init(.unsupportedMediaType, "send the body as application/json")
            case 400..<500: self.init(.badRequest, "\(underlying)")
            default: self.init(.internalError, "the server could not complete the request")
            }
        }
    }

    /// What a JSON body that does not decode got wrong, by field (never the value).
    private static func describe(_ error: DecodingError) -> String {
        func path(_ context: DecodingError.Context) -> String {
            let names = context.codingPath.map { $0.intValue.map { "[\($0)]" } ?? $0.stringValue }
            return names.isEmpty ? "body" : names.joined(separator: ".")
        }
        switch error {
        case .keyNotFound(let key, let context):
            return "\(path(context)): missing \(key.stringValue)"
        case .typeMismatch(_, let context), .valueNotFound(_, let context):
            return "\(path(context)): wrong type (\(context.debugDescription))"
        case .dataCorrupted(let context):
            return "\(path(context)): \(context.debugDescription)"
        @unknown default:
            return "the body is not valid"
        }
    }

    /// The problem as its JSON object.
    package var json: Data {
        var object: [String: Any] = [
            "type": "/problems/\(kind.rawValue)", "title": kind.title, "status": kind.status, "detail": detail,
        ]
        if let retryAfter { object["retry_after"] = retryAfter }
        return (try? JSONSerialization.data(withJSONObject: object, options: [.sortedKeys, .withoutEscapingSlashes]))
            ?? Data()
    }

    /// The response's header fields: its content type, `Retry-After` for a wait, `WWW-Authenticate` for 401.
    package var headerFields: HTTPFields {
        var fields: HTTPFields = [.contentType: "application/problem+json"]
        if let retryAfter { fields[.retryAfter] = String(retryAfter) }
        if kind == .unauthorized { fields[.wwwAuthenticate] = #"Bearer realm="diary-push""# }
        return fields
    }
}

/// Turns every error an operation throws into its problem+json answer; nothing else reaches the transport, so no
/// bad input is ever a 500.
struct ProblemMiddleware: ServerMiddleware {
    func intercept(
        _ request: HTTPRequest, body: HTTPBody?, metadata: ServerRequestMetadata, operationID: String,
        next: @Sendable (HTTPRequest, HTTPBody?, ServerRequestMetadata) async throws -> (HTTPResponse, HTTPBody?)
    ) async throws -> (HTTPResponse, HTTPBody?) {
        do {
            return try await next(request, body, metadata)
        } catch {
            let problem = APIProblem(any: error)
            return (
                HTTPResponse(status: .init(code: problem.kind.status), headerFields: problem.headerFields),
                HTTPBody(problem.json)
            )
        }
    }
}

import Foundation
import Hummingbird
import JobKit
import OpenAPIRuntime

/// Before any operation reads a body: one over 64 KiB is 413, and a JSON body must be strict JSON (no key given
/// twice, no trailing text): the same reader the CLI's `--event` uses, so that a body means one thing. And what the
/// router answers itself (no such route, a method the route does not take) is a problem+json too.
///
/// These answers come before any operation, so they are counted here (operation `none`): every answer is in
/// `diary_push_api_requests_total`.
struct BodyLimitMiddleware<Context: RequestContext>: RouterMiddleware {
    static var limit: Int { 64 * 1024 }
    /// The operation label of an answer given before any operation.
    static var noOperation: String { "none" }
    let routes: KnownRoutes
    let metrics: APIMetrics

    func handle(_ request: Request, context: Context, next: (Request, Context) async throws -> Response)
        async throws -> Response
    {
        let start = ContinuousClock.now
        func answer(_ problem: APIProblem) -> Response {
            metrics.record(
                operation: Self.noOperation, status: problem.kind.status, duration: ContinuousClock.now - start)
            return problem.response
        }
        if let length = request.headers[.contentLength].flatMap(Int.init), length > Self.limit {
            return answer(APIProblem(.tooLarge, "the body has \(length) bytes; at most \(Self.limit)"))
        }
        var request = request
        let body: ByteBuffer
        do {
            body = try await request.collectBody(upTo: Self.limit)
        } catch {
            return answer(APIProblem(.tooLarge, "the body is over \(Self.limit) bytes"))
        }
        if body.readableBytes > 0, request.headers[.contentType].map(Self.isJSON) == true {
            do {
                _ = try JSONValue.strict(Data(buffer: body), what: "body")
            } catch {
                return answer(APIProblem(.badRequest, error.message))
            }
        }
        do {
            return try await next(request, context)
        } catch let error as HTTPError where [404, 405].contains(error.status.code) {
            // The router answers 404 for a path it has under another method: 405, with the methods it takes.
            guard let allowed = routes.methods(for: request.uri.path) else {
                return answer(APIProblem(.notFound, "no such route: \(request.method) \(request.uri.path)"))
            }
            var response = answer(
                APIProblem(
                    .methodNotAllowed,
                    "\(request.uri.path) does not take \(request.method); it takes \(allowed.joined(separator: ", "))"))
            response.headers[.allow] = allowed.joined(separator: ", ")
            return response
        }
    }

    static func isJSON(_ contentType: String) -> Bool {
        contentType.split(separator: ";").first?.trimmingCharacters(in: .whitespaces).lowercased()
            == "application/json"
    }
}

extension APIProblem {
    /// The problem as a Hummingbird response (for what is answered before an operation runs).
    var response: Response {
        var headers = HTTPFields()
        for field in headerFields { headers.append(field) }
        return Response(
            status: .init(code: kind.status), headers: headers, body: .init(byteBuffer: ByteBuffer(bytes: json)))
    }
}

/// An empty request body is no body: an operation whose body the contract makes optional (`POST
/// /v1/users/{id}/entries`) is answered as without one, not "not valid JSON" (`curl -X POST` with no `-d`, or a generated
/// client's call with no fields sends that); an operation that needs a body says it is missing.
struct EmptyBodyMiddleware: ServerMiddleware {
    func intercept(
        _ request: HTTPRequest, body: HTTPBody?, metadata: ServerRequestMetadata, operationID: String,
        next: @Sendable (HTTPRequest, HTTPBody?, ServerRequestMetadata) async throws -> (HTTPResponse, HTTPBody?)
    ) async throws -> (HTTPResponse, HTTPBody?) {
        guard let body else { return try await next(request, nil, metadata) }
        switch body.length {
        case .known(0):
            return try await next(request, nil, metadata)
        case .known:
            return try await next(request, body, metadata)
        case .unknown:
            // Collected already, within the limit (``BodyLimitMiddleware``): read again here, and passed on as it was.
            let bytes = try await [UInt8](collecting: body, upTo: BodyLimitMiddleware<APIRequestContext>.limit)
            return try await next(request, bytes.isEmpty ? nil : HTTPBody(bytes), metadata)
        }
    }
}

/// The API's routes as registered, for a 405's `Allow`: which methods a path takes (`{id}` matches any one segment).
struct KnownRoutes: Sendable {
    private let routes: [(segments: [Substring?], methods: [String])]

    /// `routes`: each path as the router spells it (`/v1/users/{id}`) with one method.
    init(_ routes: [(path: String, method: String)]) {
        var methods: [String: [String]] = [:]
        for route in routes { methods[route.path, default: []].append(route.method) }
        self.routes = methods.sorted { $0.key < $1.key }.map { path, methods in
            (
                path.split(separator: "/").map { $0.hasPrefix("{") && $0.hasSuffix("}") ? nil : $0 },
                Array(Set(methods)).sorted()
            )
        }
    }

    /// The methods `path` takes, or nil when the API has no such path.
    func methods(for path: String) -> [String]? {
        let segments = path.split(separator: "/")
        let matches = routes.filter { route in
            route.segments.count == segments.count
                && zip(route.segments, segments).allSatisfy { template, segment in
                    template.map { $0 == segment } ?? true
                }
        }
        guard !matches.isEmpty else { return nil }
        return Array(Set(matches.flatMap(\.methods))).sorted()
    }
}

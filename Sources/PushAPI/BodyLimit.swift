import Foundation
import Hummingbird
import JobKit

/// Before any operation reads a body: one over 64 KiB is 413, and a JSON body must be strict JSON (no key given
/// twice, no trailing text): the same reader the CLI's `--event` uses, so that a body means one thing. And what the
/// router answers itself (no such route, a method the route does not take) is a problem+json too.
struct BodyLimitMiddleware<Context: RequestContext>: RouterMiddleware {
    static var limit: Int { 64 * 1024 }

    func handle(_ request: Request, context: Context, next: (Request, Context) async throws -> Response)
        async throws -> Response
    {
        if let length = request.headers[.contentLength].flatMap(Int.init), length > Self.limit {
            return APIProblem(.tooLarge, "the body has \(length) bytes; at most \(Self.limit)").response
        }
        var request = request
        let body: ByteBuffer
        do {
            body = try await request.collectBody(upTo: Self.limit)
        } catch {
            return APIProblem(.tooLarge, "the body is over \(Self.limit) bytes").response
        }
        if body.readableBytes > 0, request.headers[.contentType].map(Self.isJSON) == true {
            do {
                _ = try JSONValue.strict(Data(buffer: body), what: "body")
            } catch {
                return APIProblem(.badRequest, error.message).response
            }
        }
        do {
            return try await next(request, context)
        } catch let error as HTTPError {
            switch error.status.code {
            case 404: return APIProblem(.notFound, "no such route: \(request.method) \(request.uri.path)").response
            case 405:
                return APIProblem(.methodNotAllowed, "\(request.uri.path) does not take \(request.method)").response
            default: throw error
            }
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

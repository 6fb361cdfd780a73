import Foundation
import HTTPTypes
import Hummingbird
import JobKit
import JobKitDelivery
import Logging
import NIOCore

/// The HTTP API inside AWS Lambda: each invocation is a Lambda Function URL or API Gateway HTTP API (payload 2.0)
/// request, answered by the same routes, middlewares and handlers as the server (``APIServer/responder(store:config:flags:logger:now:)``).
/// Every answer, problems included, is a successful invocation whose payload is the HTTP response; only an event
/// that is not such a request fails the invocation.
package struct APILambdaHandler: ServedJob {
    package typealias Event = HTTPEvent
    package typealias Summary = HTTPEventAnswer

    package static var jobName: String { "push-api" }

    let responder: RouterResponder<APIRequestContext>
    let hook: ContentLimitHookHandler
    let logger: Logger

    /// The instant of the invocation being answered (its arrival), which the handlers read as their clock.
    @TaskLocal static var instant: Int64?

    package static func make(_ config: ConfigResolver, store: any JobStore, logger: Logger) async throws(JobError)
        -> APILambdaHandler
    {
        let (responder, hook) = try await APIServer.responder(
            store: store, config: config, flags: [:], logger: logger,
            now: { instant ?? Int64(Date().timeIntervalSince1970) })
        return APILambdaHandler(responder: responder, hook: hook, logger: logger)
    }

    package func handle(_ event: HTTPEvent, context: InvocationContext) async throws(JobError) -> HTTPEventAnswer {
        let started = ContinuousClock.now
        // A Function URL is on the internet, and `/metrics` needs no credential (a scraper's convention on a
        // private listener). Here it is not served: an execution environment's counters reach no scraper anyway,
        // and Lambda's own metrics and the logs carry the figures to CloudWatch.
        if event.path.split(separator: "?", maxSplits: 1).first == "/metrics" {
            let problem = APIProblem(
                .notFound, "/metrics is not served under Lambda: Lambda's metrics and the logs are in CloudWatch")
            return HTTPEventAnswer(
                request: "\(event.method) \(event.path)", status: problem.kind.status, headers: problem.headerFields,
                body: [UInt8](problem.json), durationMs: Int((ContinuousClock.now - started) / .milliseconds(1)))
        }
        let request = Request(
            head: HTTPRequest(
                method: event.method, scheme: "https", authority: event.authority ?? "lambda",
                path: event.path, headerFields: event.headers),
            body: RequestBody(buffer: ByteBuffer(bytes: event.body)))
        let response: Response
        do {
            response = try await Self.$instant.withValue(context.now) {
                try await responder.respond(to: request, context: APIRequestContext(logger: logger))
            }
        } catch {
            // The middlewares answer every error they know; anything else is the server's own failure.
            response = APIProblem(.internalError, "\(error)").response
        }
        let collector = BodyCollector()
        do {
            try await response.body.write(collector)
        } catch {
            throw .software("writing the answer to \(event.method) \(event.path): \(error)")
        }
        return HTTPEventAnswer(
            request: "\(event.method) \(event.path)", status: Int(response.status.code), headers: response.headers,
            body: collector.bytes, durationMs: Int((ContinuousClock.now - started) / .milliseconds(1)))
    }

    package func shutdown() async { await hook.shutdown() }

    /// Gathers a response body written through Hummingbird's writer.
    private final class BodyCollector: ResponseBodyWriter, @unchecked Sendable {
        var bytes: [UInt8] = []
        func write(_ buffer: ByteBuffer) async throws { bytes += buffer.readableBytesView }
        func finish(_ trailingHeaders: HTTPFields?) async throws {}
    }
}

/// A Lambda Function URL or API Gateway HTTP API request (payload format 2.0): `version` "2.0",
/// `requestContext.http.method`, `rawPath`, `rawQueryString`, `headers`, `body` (base64 when `isBase64Encoded`).
package struct HTTPEvent: Sendable, LambdaEvent {
    let method: HTTPRequest.Method
    /// The path with its query, as the request line has it.
    let path: String
    /// The `host` header, which HTTP/2-style requests carry as their authority.
    let authority: String?
    let headers: HTTPFields
    let body: [UInt8]

    package static func decode(lambdaPayload: [UInt8]) throws(JobError) -> HTTPEvent {
        let event = try JSONValue.strict(Data(lambdaPayload), what: "event")
        let shape = "event: not a Lambda Function URL or API Gateway HTTP API (payload 2.0) request"
        guard event["version"]?.string == "2.0", let method = event["requestContext"]?["http"]?["method"]?.string,
            let parsedMethod = HTTPRequest.Method(method), let rawPath = event["rawPath"]?.string,
            rawPath.hasPrefix("/")
        else { throw .dataError(shape) }
        var headers = HTTPFields()
        var authority: String?
        for (name, value) in event["headers"]?.members ?? [] {
            guard let value = value.string, let field = HTTPField.Name(name) else {
                throw .dataError("\(shape): header \(name) is not a name with a string value")
            }
            if field.canonicalName == "host" {
                authority = value
            } else {
                headers.append(HTTPField(name: field, value: value))
            }
        }
        let query = event["rawQueryString"]?.string ?? ""
        var body: [UInt8] = []
        if let text = event["body"]?.string {
            if event["isBase64Encoded"]?.bool == true {
                guard let data = Data(base64Encoded: text) else { throw .dataError("\(shape): body is not base64") }
                body = Array(data)
            } else {
                body = Array(text.utf8)
            }
        }
        return HTTPEvent(
            method: parsedMethod, path: query.isEmpty ? rawPath : "\(rawPath)?\(query)", authority: authority,
            headers: headers, body: body)
    }
}

/// The HTTP response as Lambda takes it back from a Function URL or HTTP API integration: `statusCode`,
/// `headers` (values of a repeated field joined with commas), `body` (base64 when not UTF-8).
package struct HTTPEventAnswer: JobSummary {
    let request: String
    let status: Int
    let headers: HTTPFields
    let body: [UInt8]
    package let durationMs: Int
    package var troubles: [ProviderTrouble] { [] }

    package var text: String { "\(request) \(status) (\(durationMs) ms)" }

    package var json: String {
        var grouped: [(String, String)] = []
        for field in headers {
            let name = field.name.canonicalName
            if let index = grouped.firstIndex(where: { $0.0 == name }) {
                grouped[index].1 += ", \(field.value)"
            } else {
                grouped.append((name, field.value))
            }
        }
        let text = String(validating: body, as: UTF8.self)
        var out: [UInt8] = []
        out += Array(#"{"statusCode":\#(status),"headers":{"#.utf8)
        for (index, (name, value)) in grouped.enumerated() {
            if index > 0 { out.append(UInt8(ascii: ",")) }
            JSONValue.write(string: name, into: &out)
            out.append(UInt8(ascii: ":"))
            JSONValue.write(string: value, into: &out)
        }
        out += Array(#"},"body":"#.utf8)
        JSONValue.write(string: text ?? Data(body).base64EncodedString(), into: &out)
        out += Array(#","isBase64Encoded":\#(text == nil)}"#.utf8)
        return String(decoding: out, as: UTF8.self)
    }
}

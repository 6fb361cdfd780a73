import Crypto
import Foundation
import HTTPTypes
import JobKit
import NIOConcurrencyHelpers
import OpenAPIRuntime

/// `Idempotency-Key` on the `POST`s that record a fact (an entry, the hook's event): a retried request gets the
/// first answer (`Idempotent-Replayed: true`) and never acts twice; the same key with another request is 422; a key
/// whose first request is still being answered is 409. Keys are per caller and kept 24 hours
/// (``IdempotencyRule``). An answer a retry may change (5xx, 429) is not kept.
struct IdempotencyMiddleware: ServerMiddleware {
    static let operations: Set<String> = ["recordEntry", "contentLimitHook"]
    static let header = HTTPField.Name("Idempotency-Key")!
    static let replayed = HTTPField.Name("Idempotent-Replayed")!

    let store: any IdempotencyStore
    let now: @Sendable () -> Int64
    /// When expired keys were last deleted (at most once a minute, by whichever request comes).
    let lastSweep = NIOLockedValueBox<Int64>(0)

    func intercept(
        _ request: HTTPRequest, body: HTTPBody?, metadata: ServerRequestMetadata, operationID: String,
        next: @Sendable (HTTPRequest, HTTPBody?, ServerRequestMetadata) async throws -> (HTTPResponse, HTTPBody?)
    ) async throws -> (HTTPResponse, HTTPBody?) {
        guard Self.operations.contains(operationID), let key = request.headerFields[Self.header] else {
            return try await next(request, body, metadata)
        }
        guard (1...255).contains(key.utf8.count), key.utf8.allSatisfy({ (0x21...0x7E).contains($0) }) else {
            throw APIProblem(.badRequest, "Idempotency-Key: 1 to 255 visible ASCII characters")
        }
        var bytes = Data()
        if let body { bytes = try await Data(collecting: body, upTo: 64 * 1024) }
        var hasher = SHA256()
        hasher.update(data: Data("\(operationID)\n\(request.path ?? "")\n".utf8))
        hasher.update(data: bytes)
        let requestSHA256 = hex(hasher.finalize())
        let caller = Caller.current?.id ?? "anonymous"
        let now = now()
        try await sweep(now: now)
        switch try await store.beginIdempotent(caller: caller, key: key, requestSHA256: requestSHA256, now: now) {
        case .replay(let status, let response):
            var fields: HTTPFields = [Self.replayed: "true"]
            if !response.isEmpty {
                fields[.contentType] = status >= 400 ? "application/problem+json" : "application/json"
            }
            return (
                HTTPResponse(status: .init(code: status), headerFields: fields),
                response.isEmpty ? nil : HTTPBody(response)
            )
        case .conflict:
            throw APIProblem(.unprocessable, "this Idempotency-Key was used for another request")
        case .inProgress:
            throw APIProblem(
                .conflict, "a request with this Idempotency-Key is still being answered; try again", retryAfter: 1)
        case .proceed:
            break
        }
        do {
            // No body stays no body (``EmptyBodyMiddleware``): the README's `curl -X POST … -H "Idempotency-Key: …"`.
            let (response, responseBody) = try await next(request, bytes.isEmpty ? nil : HTTPBody(bytes), metadata)
            var answer = Data()
            if let responseBody { answer = try await Data(collecting: responseBody, upTo: 1 << 20) }
            try await keep(caller, key, status: response.status.code, answer: answer)
            return (response, answer.isEmpty ? nil : HTTPBody(answer))
        } catch {
            let problem = APIProblem(any: error)
            try await keep(caller, key, status: problem.kind.status, answer: problem.json)
            throw problem
        }
    }

    /// Records the answer under the key, or forgets the key when a retry may be answered otherwise.
    private func keep(_ caller: String, _ key: String, status: Int, answer: Data) async throws(JobError) {
        if status >= 500 || status == 429 {
            try await store.deleteIdempotency(caller: caller, key: key)
        } else {
            try await store.finishIdempotency(
                caller: caller, key: key, status: status, response: String(decoding: answer, as: UTF8.self))
        }
    }

    private func sweep(now: Int64) async throws(JobError) {
        let due = lastSweep.withLockedValue { last in
            guard now - last >= 60 else { return false }
            last = now
            return true
        }
        if due { _ = try await store.deleteIdempotency(createdBefore: now - IdempotencyRule.keptSeconds) }
    }
}

import Foundation
import NIOCore
import NIOHTTP1
import NIOPosix

/// How the runtime answered one invocation.
public enum InvocationOutcome: Sendable, Hashable {
    /// `POST …/invocation/{id}/response` with this body.
    case response(String)
    /// `POST …/invocation/{id}/error`: the body's `errorType` and `errorMessage`, and the
    /// `Lambda-Runtime-Function-Error-Type` header.
    case error(type: String, message: String, header: String?)

    /// The response body, for a successful invocation.
    public var response: String? {
        if case .response(let body) = self { return body }
        return nil
    }
}

/// An error a runtime posted to `…/runtime/init/error`.
public struct InitError: Sendable, Hashable {
    public let type: String
    public let message: String
    public let header: String?
}

/// A local stand-in for the AWS Lambda Runtime API (version 2018-06-01) on loopback: the platform's side of
/// a custom runtime. ``invoke(_:deadlineMs:requestID:)`` queues an event and waits for the runtime's answer;
/// the runtime long-polls `GET /2018-06-01/runtime/invocation/next` for it, as in Lambda. Malformed requests
/// get the API's 4xx answers.
public final class LambdaRuntimeSimulator: Sendable {
    public let port: Int
    private let state: State
    private let server: Task<Void, Never>

    /// `host:port`, the value of `AWS_LAMBDA_RUNTIME_API`.
    public var address: String { "127.0.0.1:\(port)" }

    private init(port: Int, state: State, server: Task<Void, Never>) {
        self.port = port
        self.state = state
        self.server = server
    }

    public static func start(port: Int = 0) async throws -> LambdaRuntimeSimulator {
        let listener = try await ServerBootstrap(group: MultiThreadedEventLoopGroup.singleton)
            .serverChannelOption(ChannelOptions.socketOption(.so_reuseaddr), value: 1)
            .bind(host: "127.0.0.1", port: port) { channel in
                channel.eventLoop.makeCompletedFuture {
                    try channel.pipeline.syncOperations.configureHTTPServerPipeline()
                    return try NIOAsyncChannel<HTTPServerRequestPart, HTTPServerResponsePart>(
                        wrappingChannelSynchronously: channel)
                }
            }
        guard let boundPort = listener.channel.localAddress?.port else {
            throw ChannelError.unknownLocalAddress
        }
        let state = State()
        let server = Task<Void, Never> {
            _ = try? await listener.executeThenClose { connections in
                await withDiscardingTaskGroup { group in
                    do {
                        for try await connection in connections {
                            group.addTask { await Self.serve(connection, state: state) }
                        }
                    } catch {}
                    group.cancelAll()
                }
            }
        }
        return LambdaRuntimeSimulator(port: boundPort, state: state, server: server)
    }

    /// Queues one invocation and waits until the runtime posts its response or error. `nil` when the
    /// simulator stops first.
    public func invoke(
        _ event: String, deadlineMs: Int64, requestID: String = UUID().uuidString.lowercased(),
        functionARN: String = "arn:aws:lambda:eu-west-1:123456789012:function:diary-push"
    ) async -> InvocationOutcome? {
        await state.invoke(
            Invocation(
                requestID: requestID, deadlineMs: deadlineMs, functionARN: functionARN,
                payload: Array(event.utf8)))
    }

    /// Waits for the runtime to report an initialisation error (`nil` when the simulator stops first).
    public func initError() async -> InitError? {
        await state.awaitInitError()
    }

    /// How many `GET …/next` long polls are waiting: 1 once a runtime is idle between invocations.
    public func waitingRuntimes() async -> Int {
        await state.waitingRuntimes
    }

    /// Ends every wait and closes the listener and connections (the runtime sees its connection drop).
    public func stop() async {
        await state.stop()
        server.cancel()
        await server.value
    }

    struct Invocation: Sendable {
        let requestID: String
        let deadlineMs: Int64
        let functionARN: String
        let payload: [UInt8]
    }

    private static func serve(
        _ connection: NIOAsyncChannel<HTTPServerRequestPart, HTTPServerResponsePart>, state: State
    ) async {
        try? await connection.executeThenClose { inbound, outbound in
            var head: HTTPRequestHead?
            var body = ByteBuffer()
            for try await part in inbound {
                switch part {
                case .head(let requestHead):
                    head = requestHead
                    body.clear()
                case .body(var chunk):
                    body.writeBuffer(&chunk)
                case .end:
                    guard let request = head else { return }
                    guard let answer = await route(request, body: String(buffer: body), state: state) else {
                        return  // stopping: close the connection under the waiting runtime
                    }
                    var headers = answer.headers
                    headers.add(name: "Content-Length", value: "\(answer.body.utf8.count)")
                    try await outbound.write(
                        .head(HTTPResponseHead(version: .http1_1, status: answer.status, headers: headers)))
                    if !answer.body.isEmpty {
                        try await outbound.write(.body(.byteBuffer(ByteBuffer(string: answer.body))))
                    }
                    try await outbound.write(.end(nil))
                }
            }
        }
    }

    private struct Answer {
        var status: HTTPResponseStatus
        var headers = HTTPHeaders()
        var body = ""
    }

    private static let prefix = "/2018-06-01/runtime/"

    private static func route(_ request: HTTPRequestHead, body: String, state: State) async -> Answer? {
        guard request.uri.hasPrefix(prefix) else { return apiError(.notFound, "unknown path \(request.uri)") }
        let parts = request.uri.dropFirst(prefix.count).split(separator: "/", omittingEmptySubsequences: false).map(
            String.init)
        let id = parts.count == 3 && parts[0] == "invocation" ? parts[1] : ""
        let action = parts.count == 3 && parts[0] == "invocation" ? parts[2] : parts.joined(separator: "/")
        switch (request.method, action) {
        case (.GET, "invocation/next"):
            guard let invocation = await state.next() else { return nil }
            var headers = HTTPHeaders()
            headers.add(name: "Content-Type", value: "application/json")
            headers.add(name: "Lambda-Runtime-Aws-Request-Id", value: invocation.requestID)
            headers.add(name: "Lambda-Runtime-Deadline-Ms", value: "\(invocation.deadlineMs)")
            headers.add(name: "Lambda-Runtime-Invoked-Function-Arn", value: invocation.functionARN)
            headers.add(name: "Lambda-Runtime-Trace-Id", value: "Root=1-00000000-000000000000000000000000;Sampled=0")
            return Answer(status: .ok, headers: headers, body: String(decoding: invocation.payload, as: UTF8.self))
        case (.POST, "response") where !id.isEmpty:
            return await state.complete(id, .response(body))
                ? Answer(status: .accepted, body: "{\"status\":\"OK\"}")
                : apiError(.badRequest, "unknown or finished request id \(id)")
        case (.POST, "error") where !id.isEmpty:
            guard let report = errorReport(body) else {
                return apiError(.badRequest, "the error body is not {errorMessage, errorType}")
            }
            let header = request.headers.first(name: "Lambda-Runtime-Function-Error-Type")
            return await state.complete(id, .error(type: report.type, message: report.message, header: header))
                ? Answer(status: .accepted, body: "{\"status\":\"OK\"}")
                : apiError(.badRequest, "unknown or finished request id \(id)")
        case (.POST, "init/error"):
            guard let report = errorReport(body) else {
                return apiError(.badRequest, "the error body is not {errorMessage, errorType}")
            }
            await state.recordInitError(
                InitError(
                    type: report.type, message: report.message,
                    header: request.headers.first(name: "Lambda-Runtime-Function-Error-Type")))
            return Answer(status: .accepted, body: "{\"status\":\"OK\"}")
        default:
            return apiError(.notFound, "unknown path \(request.method) \(request.uri)")
        }
    }

    private static func apiError(_ status: HTTPResponseStatus, _ message: String) -> Answer {
        Answer(status: status, body: "{\"errorMessage\":\"\(message)\",\"errorType\":\"InvalidRequest\"}")
    }

    private static func errorReport(_ body: String) -> (type: String, message: String)? {
        guard let object = try? JSONSerialization.jsonObject(with: Data(body.utf8)) as? [String: Any],
            let type = object["errorType"] as? String, let message = object["errorMessage"] as? String
        else { return nil }
        return (type, message)
    }

    /// Queued invocations, waiting runtimes, and the answers awaited.
    private actor State {
        private var queue: [Invocation] = []
        private var runtimes: [CheckedContinuation<Invocation?, Never>] = []
        private var callers: [String: CheckedContinuation<InvocationOutcome?, Never>] = [:]
        private var initErrors: [InitError] = []
        private var initErrorWaiters: [CheckedContinuation<InitError?, Never>] = []
        private var stopped = false

        var waitingRuntimes: Int { runtimes.count }

        func invoke(_ invocation: Invocation) async -> InvocationOutcome? {
            guard !stopped else { return nil }
            return await withCheckedContinuation { continuation in
                callers[invocation.requestID] = continuation
                if runtimes.isEmpty {
                    queue.append(invocation)
                } else {
                    runtimes.removeFirst().resume(returning: invocation)
                }
            }
        }

        func next() async -> Invocation? {
            guard !stopped else { return nil }
            if !queue.isEmpty { return queue.removeFirst() }
            return await withCheckedContinuation { runtimes.append($0) }
        }

        func complete(_ requestID: String, _ outcome: InvocationOutcome) -> Bool {
            guard let caller = callers.removeValue(forKey: requestID) else { return false }
            caller.resume(returning: outcome)
            return true
        }

        func recordInitError(_ error: InitError) {
            initErrors.append(error)
            for waiter in initErrorWaiters { waiter.resume(returning: error) }
            initErrorWaiters.removeAll()
        }

        func awaitInitError() async -> InitError? {
            if let first = initErrors.first { return first }
            guard !stopped else { return nil }
            return await withCheckedContinuation { initErrorWaiters.append($0) }
        }

        func stop() {
            stopped = true
            for runtime in runtimes { runtime.resume(returning: nil) }
            for caller in callers.values { caller.resume(returning: nil) }
            for waiter in initErrorWaiters { waiter.resume(returning: nil) }
            runtimes.removeAll()
            callers.removeAll()
            initErrorWaiters.removeAll()
            queue.removeAll()
        }
    }
}

import Foundation
import JobKit
import JobKitDelivery
import NIOCore
import NIOHTTP1
import NIOPosix

/// One invocation as the Lambda Runtime API hands it out (`GET …/runtime/invocation/next`).
package struct LambdaInvocation: Sendable, Hashable {
    /// `Lambda-Runtime-Aws-Request-Id`.
    package let requestID: String
    /// `Lambda-Runtime-Deadline-Ms`: when the platform ends the invocation, Unix milliseconds.
    package let deadlineMs: Int64
    /// `Lambda-Runtime-Invoked-Function-Arn`.
    package let functionARN: String?
    /// `Lambda-Runtime-Trace-Id` (X-Ray).
    package let traceID: String?
    /// The event, as sent.
    package let payload: [UInt8]
}

/// An error reported to the Runtime API: a type (`JobError.dataError`) and a secret-free message.
package struct LambdaErrorReport: Sendable, Hashable {
    package let type: String
    package let message: String

    package init(type: String, message: String) {
        self.type = type
        self.message = message
    }

    package init(_ error: JobError) {
        self.init(type: "JobError.\(error.kind)", message: error.message)
    }

    /// A run that did its work and still failed: the message carries its summary (JSON) after the error.
    package init(_ error: JobError, summary: String) {
        self.init(type: "JobError.\(error.kind)", message: error.message + "\nsummary: " + summary)
    }

    /// The body the Runtime API expects: `{"errorMessage":…, "errorType":…, "stackTrace":[]}`.
    var body: String {
        "{\"errorMessage\":\(JSONLine.quote(message)),\"errorType\":\(JSONLine.quote(type)),\"stackTrace\":[]}"
    }
}

/// The runtime's side of the Lambda Runtime API (version 2018-06-01): a small HTTP/1.1 client over one
/// kept-alive connection to `AWS_LAMBDA_RUNTIME_API`, one request at a time.
package final class RuntimeAPIClient: Sendable {
    private static let prefix = "/2018-06-01/runtime"
    private let channel: any Channel
    private let host: String

    private init(channel: any Channel, host: String) {
        self.channel = channel
        self.host = host
    }

    /// Connects to `host:port` (the value of `AWS_LAMBDA_RUNTIME_API`).
    package static func connect(
        _ address: String,
        group: any EventLoopGroup = MultiThreadedEventLoopGroup.singleton
    ) async throws(JobError) -> RuntimeAPIClient {
        guard let colon = address.lastIndex(of: ":"), let port = Int(address[address.index(after: colon)...]),
            (1...65_535).contains(port), colon > address.startIndex
        else {
            throw .config("AWS_LAMBDA_RUNTIME_API: not host:port: \(address)")
        }
        let host = String(address[..<colon]).trimmingCharacters(in: ["[", "]"])
        do {
            let channel = try await ClientBootstrap(group: group)
                .connectTimeout(.seconds(5))
                .channelOption(ChannelOptions.socketOption(.tcp_nodelay), value: 1)
                .channelInitializer { channel in
                    channel.eventLoop.makeCompletedFuture {
                        try channel.pipeline.syncOperations.addHTTPClientHandlers()
                        try channel.pipeline.syncOperations.addHandler(HTTP1ExchangeHandler())
                    }
                }
                .connect(host: host, port: port).get()
            return RuntimeAPIClient(channel: channel, host: address)
        } catch {
            throw .unavailable("cannot connect to the Lambda Runtime API at \(address)")
        }
    }

    /// Waits for the next invocation (a long poll: no timeout, as the API asks).
    package func next() async throws(JobError) -> LambdaInvocation {
        let response = try await exchange(.GET, "\(Self.prefix)/invocation/next", body: nil)
        guard response.status == .ok else {
            throw .unavailable("the Runtime API answered \(response.status.code) to invocation/next")
        }
        guard let requestID = response.headers.first(name: "Lambda-Runtime-Aws-Request-Id"), !requestID.isEmpty,
            !requestID.contains("/")
        else {
            throw .unavailable("the Runtime API sent an invocation without a request id")
        }
        guard let deadline = response.headers.first(name: "Lambda-Runtime-Deadline-Ms").flatMap({ Int64($0) }) else {
            throw .unavailable("the Runtime API sent invocation \(requestID) without a deadline")
        }
        return LambdaInvocation(
            requestID: requestID, deadlineMs: deadline,
            functionARN: response.headers.first(name: "Lambda-Runtime-Invoked-Function-Arn"),
            traceID: response.headers.first(name: "Lambda-Runtime-Trace-Id"),
            payload: response.body)
    }

    /// Posts the invocation's result.
    package func respond(to requestID: String, json: String) async throws(JobError) {
        try await expectAccepted(.POST, "\(Self.prefix)/invocation/\(requestID)/response", body: json, errorType: nil)
    }

    /// Reports a failed invocation.
    package func fail(_ requestID: String, _ report: LambdaErrorReport) async throws(JobError) {
        try await expectAccepted(
            .POST, "\(Self.prefix)/invocation/\(requestID)/error", body: report.body, errorType: report.type)
    }

    /// Reports a failed initialisation; the runtime exits afterwards.
    package func failInitialization(_ report: LambdaErrorReport) async throws(JobError) {
        try await expectAccepted(.POST, "\(Self.prefix)/init/error", body: report.body, errorType: report.type)
    }

    package func close() async {
        try? await channel.close()
    }

    private func expectAccepted(_ method: HTTPMethod, _ path: String, body: String, errorType: String?)
        async throws(JobError)
    {
        let response = try await exchange(method, path, body: body, errorType: errorType)
        guard response.status == .accepted else {
            // 400/403/413: our request was wrong; 500: the environment is broken and the runtime must exit.
            throw .unavailable("the Runtime API answered \(response.status.code) to \(path)")
        }
    }

    private func exchange(
        _ method: HTTPMethod, _ path: String, body: String?,
        errorType: String? = nil
    ) async throws(JobError) -> HTTP1Response {
        var head = HTTPRequestHead(version: .http1_1, method: method, uri: path)
        head.headers.add(name: "Host", value: host)
        head.headers.add(name: "User-Agent", value: "diary-push")
        if let errorType { head.headers.add(name: "Lambda-Runtime-Function-Error-Type", value: errorType) }
        var buffer: ByteBuffer?
        if let body {
            buffer = ByteBuffer(string: body)
            head.headers.add(name: "Content-Type", value: "application/json")
            head.headers.add(name: "Content-Length", value: "\(body.utf8.count)")
        }
        let promise = channel.eventLoop.makePromise(of: HTTP1Response.self)
        let request = HTTP1ExchangeHandler.Request(head: head, body: buffer, promise: promise)
        // A write that never reaches the handler (the connection closed and the pipeline is gone) must fail
        // the exchange too; otherwise the runtime would wait forever instead of exiting.
        channel.writeAndFlush(request).whenFailure { promise.fail($0) }
        do {
            return try await promise.futureResult.get()
        } catch {
            throw .unavailable("the Lambda Runtime API connection failed (\(path))")
        }
    }
}

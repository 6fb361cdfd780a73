import Foundation
import JobKit
import NIOCore
import NIOHTTP1
import NIOPosix
import NIOSSL

/// One HTTP/1.1 request on a connection of its own, closed afterwards: the heartbeat's pings and the Lambda
/// secrets fetched at init (a few requests per run, where a pool would be dead weight).
package enum HTTP1OneShot {
    /// Sends the request and returns the whole response; fails when the connection fails or `timeout` passes
    /// (connecting included).
    package static func exchange(
        host: String, port: Int, tls: NIOSSLContext? = nil, method: HTTPMethod, path: String,
        headers: [(String, String)] = [], body: String? = nil, timeout: TimeAmount
    ) async throws -> HTTP1Response {
        let channel = try await ClientBootstrap(group: MultiThreadedEventLoopGroup.singleton)
            .connectTimeout(timeout)
            .channelInitializer { channel in
                channel.eventLoop.makeCompletedFuture {
                    let sync = channel.pipeline.syncOperations
                    if let tls {
                        let isAddress = host.contains(":") || host.allSatisfy { $0.isNumber || $0 == "." }
                        try sync.addHandler(
                            try NIOSSLClientHandler(context: tls, serverHostname: isAddress ? nil : host))
                    }
                    try sync.addHTTPClientHandlers()
                    try sync.addHandler(HTTP1ExchangeHandler())
                }
            }
            .connect(host: host, port: port).get()
        defer { channel.close(promise: nil) }
        var head = HTTPRequestHead(version: .http1_1, method: method, uri: path)
        let defaultPort = tls == nil ? 80 : 443
        head.headers.add(name: "Host", value: port == defaultPort ? host : "\(host):\(port)")
        head.headers.add(name: "User-Agent", value: "diary-push")
        for (name, value) in headers { head.headers.add(name: name, value: value) }
        if let body { head.headers.add(name: "Content-Length", value: "\(body.utf8.count)") }
        head.headers.add(name: "Connection", value: "close")
        let promise = channel.eventLoop.makePromise(of: HTTP1Response.self)
        channel.writeAndFlush(
            HTTP1ExchangeHandler.Request(head: head, body: body.map { ByteBuffer(string: $0) }, promise: promise)
        )
        .whenFailure { promise.fail($0) }
        let deadline = channel.eventLoop.scheduleTask(in: timeout) {
            promise.fail(ChannelError.connectTimeout(timeout))
        }
        defer { deadline.cancel() }
        return try await promise.futureResult.get()
    }
}

/// An `http` or `https` URL as the HTTP/1 clients use it: host, port (the scheme's by default), the path with its
/// query, and the TLS context for `https` (the system's roots, plus `caFile`'s; ALPN `http/1.1`).
package struct HTTP1Endpoint: Sendable {
    package let url: String
    package let host: String
    package let port: Int
    /// The request target: the path (`/` when empty) and the query.
    package let path: String
    package let tls: NIOSSLContext?

    /// Nil when `url` is not an http(s) URL with a host.
    package init?(url: String, caFile: String?) throws(JobError) {
        guard let components = URLComponents(string: url), let scheme = components.scheme?.lowercased(),
            scheme == "http" || scheme == "https", let host = components.host, !host.isEmpty
        else { return nil }
        self.url = url
        self.host = host
        self.port = components.port ?? (scheme == "https" ? 443 : 80)
        let base = components.percentEncodedPath.isEmpty ? "/" : components.percentEncodedPath
        self.path = base + (components.percentEncodedQuery.map { "?\($0)" } ?? "")
        tls = scheme == "https" ? try TLSSettings(additionalCAFile: caFile).makeContext(protocols: ["http/1.1"]) : nil
    }

    /// Whether the host is this machine (`localhost`, `127.0.0.1`, `::1`).
    package var isLoopback: Bool { ["localhost", "127.0.0.1", "::1"].contains(host) }
}

package struct HTTP1Response: Sendable {
    package var status: HTTPResponseStatus
    package var headers: HTTPHeaders
    package var body: [UInt8]
}

/// Writes one request at a time and completes its promise with the whole response: the HTTP/1.1 client of the
/// Lambda Runtime API and of the heartbeat.
package final class HTTP1ExchangeHandler: ChannelDuplexHandler {
    package struct Request: Sendable {
        package let head: HTTPRequestHead
        package let body: ByteBuffer?
        package let promise: EventLoopPromise<HTTP1Response>

        package init(head: HTTPRequestHead, body: ByteBuffer?, promise: EventLoopPromise<HTTP1Response>) {
            self.head = head
            self.body = body
            self.promise = promise
        }
    }
    package typealias InboundIn = HTTPClientResponsePart
    package typealias OutboundIn = Request
    package typealias OutboundOut = HTTPClientRequestPart

    private var waiting: [EventLoopPromise<HTTP1Response>] = []
    private var response: HTTP1Response?

    package init() {}

    package func write(context: ChannelHandlerContext, data: NIOAny, promise: EventLoopPromise<Void>?) {
        let request = unwrapOutboundIn(data)
        guard context.channel.isActive else {
            request.promise.fail(ChannelError.ioOnClosedChannel)
            promise?.fail(ChannelError.ioOnClosedChannel)
            return
        }
        waiting.append(request.promise)
        context.write(wrapOutboundOut(.head(request.head)), promise: nil)
        if let body = request.body { context.write(wrapOutboundOut(.body(.byteBuffer(body))), promise: nil) }
        let written = context.eventLoop.makePromise(of: Void.self)
        written.futureResult.assumeIsolated().whenFailure { [self] error in failAll(error) }
        written.futureResult.cascade(to: promise)
        context.write(wrapOutboundOut(.end(nil)), promise: written)
    }

    package func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        switch unwrapInboundIn(data) {
        case .head(let head):
            response = HTTP1Response(status: head.status, headers: head.headers, body: [])
        case .body(let buffer):
            response?.body.append(contentsOf: buffer.readableBytesView)
        case .end:
            if let response, !waiting.isEmpty { waiting.removeFirst().succeed(response) }
            response = nil
        }
    }

    package func channelInactive(context: ChannelHandlerContext) {
        failAll(ChannelError.ioOnClosedChannel)
        context.fireChannelInactive()
    }

    package func handlerRemoved(context: ChannelHandlerContext) {
        failAll(ChannelError.ioOnClosedChannel)
    }

    package func errorCaught(context: ChannelHandlerContext, error: any Error) {
        failAll(error)
        context.close(promise: nil)
    }

    private func failAll(_ error: any Error) {
        let promises = waiting
        waiting.removeAll()
        for promise in promises { promise.fail(error) }
    }
}

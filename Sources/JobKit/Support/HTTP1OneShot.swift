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

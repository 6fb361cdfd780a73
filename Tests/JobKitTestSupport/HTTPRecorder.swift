import Foundation
import NIOConcurrencyHelpers
import NIOCore
import NIOHTTP1
import NIOPosix
import NIOSSL
import PushSimulator

/// A local HTTP/1.1 server that keeps each request (method, path, headers, body) and answers what `respond`
/// says (by default 200 "OK" to everything): what a heartbeat service such as healthchecks.io sees, or the
/// AWS Parameters and Secrets Lambda Extension. Given simulator credentials, it speaks HTTPS with their server
/// certificate, which their CA signed.
package final class HTTPRecorder: Sendable {
    package struct Request: Sendable, Hashable {
        package let method: String
        package let path: String
        package let headers: [String: String]
        package let body: String
    }
    package typealias Responder = @Sendable (Request) -> (status: HTTPResponseStatus, body: String)

    private let channel: any Channel
    private let stored = NIOLockedValueBox<[Request]>([])
    package var port: Int { channel.localAddress?.port ?? 0 }
    package var requests: [Request] { stored.withLockedValue { $0 } }

    package init(tls credentials: SimulatorCredentials? = nil, respond: @escaping Responder = { _ in (.ok, "OK") })
        async throws
    {
        let stored = self.stored
        let tls = try credentials.map { try NIOSSLContext(configuration: $0.serverTLSConfiguration()) }
        channel = try await ServerBootstrap(group: MultiThreadedEventLoopGroup.singleton)
            .serverChannelOption(ChannelOptions.socketOption(.so_reuseaddr), value: 1)
            .childChannelInitializer { channel in
                channel.eventLoop.makeCompletedFuture {
                    if let tls { try channel.pipeline.syncOperations.addHandler(NIOSSLServerHandler(context: tls)) }
                    try channel.pipeline.syncOperations.configureHTTPServerPipeline()
                    try channel.pipeline.syncOperations.addHandler(Handler(stored: stored, respond: respond))
                }
            }
            .bind(host: "127.0.0.1", port: 0).get()
    }

    package func stop() async { try? await channel.close() }

    private final class Handler: ChannelInboundHandler, @unchecked Sendable {
        typealias InboundIn = HTTPServerRequestPart
        typealias OutboundOut = HTTPServerResponsePart
        let stored: NIOLockedValueBox<[Request]>
        let respond: Responder
        var head: HTTPRequestHead?
        var body = ""

        init(stored: NIOLockedValueBox<[Request]>, respond: @escaping Responder) {
            self.stored = stored
            self.respond = respond
        }

        func channelRead(context: ChannelHandlerContext, data: NIOAny) {
            switch unwrapInboundIn(data) {
            case .head(let head):
                self.head = head
                body = ""
            case .body(let buffer):
                body += String(buffer: buffer)
            case .end:
                guard let head else { return }
                let request = Request(
                    method: head.method.rawValue, path: head.uri,
                    headers: Dictionary(head.headers.map { ($0.name.lowercased(), $0.value) }) { $1 }, body: body)
                stored.withLockedValue { $0.append(request) }
                let (status, answer) = respond(request)
                var headers = HTTPHeaders()
                headers.add(name: "Content-Length", value: "\(answer.utf8.count)")
                context.write(
                    wrapOutboundOut(.head(HTTPResponseHead(version: .http1_1, status: status, headers: headers))),
                    promise: nil)
                context.write(wrapOutboundOut(.body(.byteBuffer(ByteBuffer(string: answer)))), promise: nil)
                context.writeAndFlush(wrapOutboundOut(.end(nil)), promise: nil)
            }
        }
    }
}

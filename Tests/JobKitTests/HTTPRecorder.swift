import Foundation
import NIOConcurrencyHelpers
import NIOCore
import NIOHTTP1
import NIOPosix

/// A local HTTP/1.1 server that answers 200 to everything and keeps each request (method, path, body): what a
/// heartbeat service such as healthchecks.io sees.
final class HTTPRecorder: Sendable {
    struct Request: Sendable, Hashable {
        let method: String
        let path: String
        let body: String
    }

    private let channel: any Channel
    private let stored = NIOLockedValueBox<[Request]>([])
    var port: Int { channel.localAddress?.port ?? 0 }
    var requests: [Request] { stored.withLockedValue { $0 } }

    init() async throws {
        let stored = self.stored
        channel = try await ServerBootstrap(group: MultiThreadedEventLoopGroup.singleton)
            .serverChannelOption(ChannelOptions.socketOption(.so_reuseaddr), value: 1)
            .childChannelInitializer { channel in
                channel.eventLoop.makeCompletedFuture {
                    try channel.pipeline.syncOperations.configureHTTPServerPipeline()
                    try channel.pipeline.syncOperations.addHandler(Handler(stored: stored))
                }
            }
            .bind(host: "127.0.0.1", port: 0).get()
    }

    func stop() async { try? await channel.close() }

    private final class Handler: ChannelInboundHandler, @unchecked Sendable {
        typealias InboundIn = HTTPServerRequestPart
        typealias OutboundOut = HTTPServerResponsePart
        let stored: NIOLockedValueBox<[Request]>
        var head: HTTPRequestHead?
        var body = ""

        init(stored: NIOLockedValueBox<[Request]>) { self.stored = stored }

        func channelRead(context: ChannelHandlerContext, data: NIOAny) {
            switch unwrapInboundIn(data) {
            case .head(let head):
                self.head = head
                body = ""
            case .body(let buffer):
                body += String(buffer: buffer)
            case .end:
                if let head {
                    stored.withLockedValue { $0.append(Request(method: head.method.rawValue, path: head.uri, body: body)) }
                }
                var headers = HTTPHeaders()
                headers.add(name: "Content-Length", value: "2")
                context.write(wrapOutboundOut(.head(HTTPResponseHead(version: .http1_1, status: .ok, headers: headers))), promise: nil)
                context.write(wrapOutboundOut(.body(.byteBuffer(ByteBuffer(string: "OK")))), promise: nil)
                context.writeAndFlush(wrapOutboundOut(.end(nil)), promise: nil)
            }
        }
    }
}

import NIOCore

/// Sits between TLS and HTTP/2 and joins the writes made between two flushes into one buffer.
///
/// `NIOHTTP2Handler` writes every frame on its own: a request is a HEADERS frame, then a DATA frame's 9-byte
/// header, then its payload, three writes. `NIOSSLHandler` seals every write as a TLS record of its own, so
/// without this handler each request costs three records (one of them for 9 bytes): three seals here, three
/// opens at the server, 66 bytes of record overhead. Joined, a flush of 16 requests is one record. Measured
/// with `scripts/bench-send`, the server's CPU per request falls by more than half (BENCHMARKS.md).
///
/// Buffers are copied (a few hundred bytes per request; memcpy costs far less than a record). A joined buffer
/// is written on as soon as it reaches `maximumSize` (a TLS record's payload limit), so memory stays bounded
/// however long the caller goes without flushing. File regions, which TLS cannot send anyway, pass through in
/// order. The promises of joined writes complete with the joined write.
package final class WriteCoalescingHandler: ChannelOutboundHandler, RemovableChannelHandler {
    package typealias OutboundIn = IOData
    package typealias OutboundOut = IOData

    package static let defaultMaximumSize = 16 * 1024

    private let maximumSize: Int
    private var pending: ByteBuffer?
    private var pendingPromise: EventLoopPromise<Void>?

    package init(maximumSize: Int = WriteCoalescingHandler.defaultMaximumSize) {
        self.maximumSize = max(1, maximumSize)
    }

    package func write(context: ChannelHandlerContext, data: NIOAny, promise: EventLoopPromise<Void>?) {
        guard case .byteBuffer(var bytes) = unwrapOutboundIn(data) else {
            writePending(context: context)
            context.write(data, promise: promise)
            return
        }
        if pending == nil {
            pending = context.channel.allocator.buffer(capacity: max(bytes.readableBytes, 2048))
        }
        pending!.writeBuffer(&bytes)
        if let promise {
            if let pendingPromise {
                pendingPromise.futureResult.cascade(to: promise)
            } else {
                pendingPromise = promise
            }
        }
        if pending!.readableBytes >= maximumSize { writePending(context: context) }
    }

    package func flush(context: ChannelHandlerContext) {
        writePending(context: context)
        context.flush()
    }

    package func close(context: ChannelHandlerContext, mode: CloseMode, promise: EventLoopPromise<Void>?) {
        // Unflushed writes go down first, so the handlers below fail or send them as they would have.
        writePending(context: context)
        context.close(mode: mode, promise: promise)
    }

    package func handlerRemoved(context: ChannelHandlerContext) {
        writePending(context: context)
    }

    private func writePending(context: ChannelHandlerContext) {
        guard let buffer = pending else { return }
        let promise = pendingPromise
        pending = nil
        pendingPromise = nil
        context.write(wrapOutboundOut(.byteBuffer(buffer)), promise: promise)
    }
}

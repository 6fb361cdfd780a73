import JobKit
import NIOCore

/// Sits between TLS and HTTP/2 and joins the writes made between two flushes into one buffer.
///
/// `NIOHTTP2Handler` writes every frame on its own: a request is a HEADERS frame, then a DATA frame's 9-byte
/// header, then its payload, three writes. `NIOSSLHandler` seals every write as a TLS record of its own, so
/// without this handler each request costs three records (one of them for 9 bytes): three seals here, three
/// opens at the server, 66 bytes of record overhead. Joined, a flush of 16 requests is one record. Measured
/// with `scripts/bench-send`, the server's CPU per request falls by more than half (BENCHMARKS.md#the-http2-client).
///
/// Buffers are copied (a few hundred bytes per request; memcpy costs far less than a record). A joined buffer
/// is written on as soon as it reaches `maximumSize` (a TLS record's payload limit), so memory stays bounded
/// however long the caller goes without flushing. File regions, which TLS cannot send anyway, pass through in
/// order. The promises of joined writes complete with the joined write.
///
/// A handler above may hold flushes for a while (``Hold``): flushes that reach this handler in between are
/// kept, and the last `.release` sends them as one. This lets the handler that writes requests flush
/// `NIOHTTP2Handler` after every request, so that each request's DATA frame leaves in stream order (frames
/// flushed together leave in the order of a `Set`), while the socket still gets one write per batch.
package final class WriteCoalescingHandler: ChannelOutboundHandler, RemovableChannelHandler {
    package typealias OutboundIn = IOData
    package typealias OutboundOut = IOData

    package static let defaultMaximumSize = 16 * 1024

    /// Outbound user events: between `.hold` and `.release`, flushes are kept and then sent as one.
    package enum Hold: Sendable {
        case hold
        case release
    }

    private let maximumSize: Int
    private var pending: ByteBuffer?
    private var pendingPromise: EventLoopPromise<Void>?
    private var holding = false
    private var flushHeld = false

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
        if holding {
            flushHeld = true
            return
        }
        writePending(context: context)
        context.flush()
    }

    package func triggerUserOutboundEvent(context: ChannelHandlerContext, event: Any, promise: EventLoopPromise<Void>?)
    {
        guard let hold = event as? Hold else {
            context.triggerUserOutboundEvent(event, promise: promise)
            return
        }
        switch hold {
        case .hold:
            holding = true
        case .release:
            holding = false
            if flushHeld {
                flushHeld = false
                flush(context: context)
            }
        }
        promise?.succeed()
    }

    package func close(context: ChannelHandlerContext, mode: CloseMode, promise: EventLoopPromise<Void>?) {
        // Unflushed writes go down first, so the handlers below fail or send them as they would have.
        holding = false
        flushHeld = false
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

import JobKitTestSupport
import NIOConcurrencyHelpers
import NIOCore
import NIOEmbedded
import Testing

@testable import JobKit
@testable import JobKitDelivery

/// The handler between TLS and HTTP/2 that turns the writes of one flush into one buffer (one TLS record).
@Suite struct WriteCoalescingTests {
    private func channel(maximumSize: Int = WriteCoalescingHandler.defaultMaximumSize) throws -> EmbeddedChannel {
        let channel = EmbeddedChannel()
        try channel.pipeline.syncOperations.addHandler(WriteCoalescingHandler(maximumSize: maximumSize))
        return channel
    }

    private func bytes(_ text: String) -> ByteBuffer { ByteBuffer(string: text) }

    @Test func theWritesOfOneFlushLeaveAsOneBufferInOrderAndTheirPromisesComplete() throws {
        let channel = try channel()
        let first = channel.eventLoop.makePromise(of: Void.self)
        let second = channel.eventLoop.makePromise(of: Void.self)
        let completed = NIOLockedValueBox(0)
        first.futureResult.whenSuccess { completed.withLockedValue { $0 += 1 } }
        second.futureResult.whenSuccess { completed.withLockedValue { $0 += 1 } }
        channel.write(bytes("HEADERS|"), promise: first)
        channel.write(bytes("DATA-HEADER|"), promise: nil)
        channel.write(bytes("payload"), promise: second)
        // Nothing leaves before the flush.
        #expect(try channel.readOutbound(as: ByteBuffer.self) == nil)
        #expect(completed.withLockedValue { $0 } == 0)
        channel.flush()
        #expect(try channel.readOutbound(as: ByteBuffer.self) == bytes("HEADERS|DATA-HEADER|payload"))
        #expect(try channel.readOutbound(as: ByteBuffer.self) == nil)
        #expect(completed.withLockedValue { $0 } == 2)
        // The next flush starts a new buffer.
        channel.write(bytes("next"), promise: nil)
        channel.flush()
        #expect(try channel.readOutbound(as: ByteBuffer.self) == bytes("next"))
        #expect(try channel.finish().isClean)
    }

    @Test func aBufferAtTheSizeLimitIsWrittenOnWithoutWaitingForTheFlush() throws {
        let channel = try channel(maximumSize: 8)
        channel.write(bytes("12345"), promise: nil)
        channel.write(bytes("678"), promise: nil)  // reaches 8 bytes: written on (not yet flushed)
        channel.write(bytes("9"), promise: nil)
        // EmbeddedChannel hands out only flushed writes: the first buffer is there after the flush, apart.
        channel.flush()
        #expect(try channel.readOutbound(as: ByteBuffer.self) == bytes("12345678"))
        #expect(try channel.readOutbound(as: ByteBuffer.self) == bytes("9"))
        #expect(try channel.readOutbound(as: ByteBuffer.self) == nil)
        #expect(try channel.finish().isClean)
    }

    /// Records what reaches the handlers below (TLS, then the socket) and passes it on.
    private final class Below: ChannelOutboundHandler {
        typealias OutboundIn = ByteBuffer
        var events: [String] = []

        func write(context: ChannelHandlerContext, data: NIOAny, promise: EventLoopPromise<Void>?) {
            events.append("write \(String(buffer: unwrapOutboundIn(data)))")
            context.write(data, promise: promise)
        }

        func flush(context: ChannelHandlerContext) {
            events.append("flush")
            context.flush()
        }

        func triggerUserOutboundEvent(context: ChannelHandlerContext, event: Any, promise: EventLoopPromise<Void>?) {
            events.append("event \(event)")
            context.triggerUserOutboundEvent(event, promise: promise)
        }

        func close(context: ChannelHandlerContext, mode: CloseMode, promise: EventLoopPromise<Void>?) {
            events.append("close")
            context.close(mode: mode, promise: promise)
        }
    }

    @Test func onCloseUnflushedWritesGoDownFirstSoTheLayersBelowDecideTheirFate() throws {
        let channel = EmbeddedChannel()
        let below = Below()
        try channel.pipeline.syncOperations.addHandler(below)
        try channel.pipeline.syncOperations.addHandler(WriteCoalescingHandler())
        channel.write(bytes("a"), promise: nil)
        channel.write(bytes("b"), promise: nil)
        #expect(below.events.isEmpty)
        try channel.close().wait()
        #expect(below.events == ["write ab", "close"])
    }

    /// Between `.hold` and `.release`, flushes from above are kept: the socket gets one write and one flush at the
    /// release, with everything written in between, in order. Other user events pass through.
    @Test func heldFlushesLeaveAsOneWriteAtTheRelease() throws {
        let channel = EmbeddedChannel()
        let below = Below()
        try channel.pipeline.syncOperations.addHandler(below)
        try channel.pipeline.syncOperations.addHandler(WriteCoalescingHandler())
        let pipeline = channel.pipeline
        pipeline.triggerUserOutboundEvent(WriteCoalescingHandler.Hold.hold, promise: nil)
        for request in ["r1", "r2", "r3"] {
            channel.write(bytes(request + "|"), promise: nil)
            channel.flush()
        }
        #expect(below.events.isEmpty)
        pipeline.triggerUserOutboundEvent(WriteCoalescingHandler.Hold.release, promise: nil)
        #expect(below.events == ["write r1|r2|r3|", "flush"])
        #expect(try channel.readOutbound(as: ByteBuffer.self) == bytes("r1|r2|r3|"))

        // A release with no flush held sends nothing; flushes after it are not held.
        pipeline.triggerUserOutboundEvent(WriteCoalescingHandler.Hold.hold, promise: nil)
        channel.write(bytes("unflushed"), promise: nil)
        pipeline.triggerUserOutboundEvent(WriteCoalescingHandler.Hold.release, promise: nil)
        #expect(below.events.count == 2)
        channel.flush()
        #expect(below.events.suffix(2) == ["write unflushed", "flush"])
        #expect(try channel.readOutbound(as: ByteBuffer.self) == bytes("unflushed"))

        // Anything else travels on to the handlers below.
        pipeline.triggerUserOutboundEvent("something else", promise: nil)
        #expect(below.events.last == "event something else")
        #expect(try channel.finish().isClean)
    }
}

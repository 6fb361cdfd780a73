import NIOCore
import NIOEmbedded
import Testing
@testable import JobKit

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
        var completed = 0
        first.futureResult.whenSuccess { completed += 1 }
        second.futureResult.whenSuccess { completed += 1 }
        channel.write(bytes("HEADERS|"), promise: first)
        channel.write(bytes("DATA-HEADER|"), promise: nil)
        channel.write(bytes("payload"), promise: second)
        // Nothing leaves before the flush.
        #expect(try channel.readOutbound(as: ByteBuffer.self) == nil)
        #expect(completed == 0)
        channel.flush()
        #expect(try channel.readOutbound(as: ByteBuffer.self) == bytes("HEADERS|DATA-HEADER|payload"))
        #expect(try channel.readOutbound(as: ByteBuffer.self) == nil)
        #expect(completed == 2)
        // The next flush starts a new buffer.
        channel.write(bytes("next"), promise: nil)
        channel.flush()
        #expect(try channel.readOutbound(as: ByteBuffer.self) == bytes("next"))
        #expect(try channel.finish().isClean)
    }

    @Test func aBufferAtTheSizeLimitIsWrittenOnWithoutWaitingForTheFlush() throws {
        let channel = try channel(maximumSize: 8)
        channel.write(bytes("12345"), promise: nil)
        channel.write(bytes("678"), promise: nil)      // reaches 8 bytes: written on (not yet flushed)
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
}

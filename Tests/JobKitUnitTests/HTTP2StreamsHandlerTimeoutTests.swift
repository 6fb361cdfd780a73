import Foundation
import JobKitTestSupport
import NIOConcurrencyHelpers
import NIOCore
import NIOEmbedded
import NIOHPACK
import NIOHTTP2
import Testing

@testable import JobKit
@testable import JobKitDelivery

/// The stream bookkeeping's timeouts on an embedded channel, with the event loop's clock.
@Suite struct HTTP2StreamsHandlerTimeoutTests {
    struct Connection {
        let loop: EmbeddedEventLoop
        let channel: EmbeddedChannel
        let handler: HTTP2StreamsHandler

        init(requestTimeout: TimeAmount = .seconds(1)) throws {
            let loop = EmbeddedEventLoop()
            handler = HTTP2StreamsHandler(streamCap: 10, requestTimeout: requestTimeout, now: { loop.now })
            channel = EmbeddedChannel(handler: handler, loop: loop)
            self.loop = loop
            try channel.connect(to: SocketAddress(ipAddress: "127.0.0.1", port: 443)).wait()
        }

        func submit(_ count: Int) -> EventLoopFuture<[HTTP2Batch.Outcome]> {
            let promise = loop.makePromise(of: [HTTP2Batch.Outcome].self)
            let requests = (0..<count).map { _ in
                HTTP2Request(headers: [":method": "POST", ":path": "/"], body: ByteBuffer())
            }
            handler.submit(requests, for: HTTP2Batch(count: count, promise: promise))
            return promise.futureResult
        }

        func written() throws -> [HTTP2Frame.FramePayload] {
            var payloads: [HTTP2Frame.FramePayload] = []
            while let frame = try channel.readOutbound(as: HTTP2Frame.self) { payloads.append(frame.payload) }
            return payloads
        }

        func pings(_ payloads: [HTTP2Frame.FramePayload]) -> [HTTP2PingData] {
            payloads.compactMap { if case .ping(let data, ack: false) = $0 { data } else { nil } }
        }

        func answerPing(_ data: HTTP2PingData) throws {
            try channel.writeInbound(HTTP2Frame(streamID: .rootStream, payload: .ping(data, ack: true)))
        }
    }

    func outcomes(_ future: EventLoopFuture<[HTTP2Batch.Outcome]>) -> [HTTP2Batch.Outcome]? {
        // The embedded loop completes a fulfilled future's callbacks at once, on this thread.
        let result = NIOLockedValueBox<[HTTP2Batch.Outcome]?>(nil)
        future.whenSuccess { outcomes in result.withLockedValue { $0 = outcomes } }
        return result.withLockedValue { $0 }
    }

    /// Each outcome's failure (`nil` for an answer); `nil` while the batch is not complete.
    func failures(_ future: EventLoopFuture<[HTTP2Batch.Outcome]>) -> [HTTP2StreamFailure?]? {
        outcomes(future)?.map { if case .failure(let failure) = $0 { failure } else { nil } }
    }

    @Test func anOverdueStreamSendsAPingAndAnUnansweredPingClosesTheConnection() throws {
        let connection = try Connection()
        let answers = connection.submit(2)
        _ = try connection.written()
        connection.loop.advanceTime(by: .milliseconds(900))
        #expect(connection.pings(try connection.written()).isEmpty)
        connection.loop.advanceTime(by: .milliseconds(200))  // 1.1 s: overdue
        #expect(connection.pings(try connection.written()).count == 1)
        #expect(outcomes(answers) == nil)
        connection.loop.advanceTime(by: .milliseconds(1500))  // the PING 1.5 s unanswered: not yet dead
        #expect(connection.channel.isActive)
        connection.loop.advanceTime(by: .milliseconds(600))  // 2.1 s: dead
        #expect(!connection.channel.isActive)
        #expect(failures(answers) == [.connectionLost, .connectionLost])
    }

    @Test func aConnectionThatAnswersPingsIsWaitedForUntilTheAnswer() throws {
        let connection = try Connection()
        let answers = connection.submit(1)
        _ = try connection.written()
        connection.loop.advanceTime(by: .milliseconds(1100))
        let ping = try #require(connection.pings(try connection.written()).first)
        try connection.answerPing(ping)
        connection.loop.advanceTime(by: .milliseconds(1500))  // 2.6 s: past the request timeout twice over
        #expect(connection.channel.isActive)
        #expect(outcomes(answers) == nil)
        try connection.channel.writeInbound(
            HTTP2Frame(
                streamID: HTTP2StreamID(1),
                payload: .headers(
                    .init(
                        headers: [":status": "200"], endStream: true))))
        let answered = try #require(outcomes(answers))
        guard case .success(let response) = answered.first else {
            Issue.record("expected an answer, got \(answered)")
            return
        }
        #expect(response.status == 200)
    }

    @Test func aLiveConnectionGivesUpOnAStreamAtTheAnswerDeadlineWithoutClosing() throws {
        let connection = try Connection()
        let answers = connection.submit(1)
        _ = try connection.written()
        for _ in 0..<2 {  // PINGs answered at 1.1 s and 2.2 s
            connection.loop.advanceTime(by: .milliseconds(1100))
            for ping in connection.pings(try connection.written()) { try connection.answerPing(ping) }
        }
        #expect(outcomes(answers) == nil)
        connection.loop.advanceTime(by: .milliseconds(900))  // 3.1 s: the answer deadline (3 request timeouts)
        #expect(failures(answers) == [.timeout])
        #expect(connection.channel.isActive)
        let resets = try connection.written().filter { if case .rstStream(.cancel) = $0 { true } else { false } }
        #expect(resets.count == 1)
    }

    /// After GOAWAY the connection takes no new requests, answers what the server processed, and then closes
    /// itself: a server that keeps it open must not leave a socket behind per GOAWAY.
    @Test func aConnectionClosesOnceTheStreamsAGoAwayLeftAreAnswered() throws {
        let connection = try Connection()
        let answers = connection.submit(3)
        _ = try connection.written()
        // The server processed streams 1 and 3; stream 5 was not processed.
        try connection.channel.writeInbound(
            HTTP2Frame(
                streamID: .rootStream,
                payload: .goAway(
                    lastStreamID: HTTP2StreamID(3), errorCode: .noError, opaqueData: nil)))
        #expect(!connection.handler.isUsable)
        #expect(connection.channel.isActive)
        try connection.channel.writeInbound(
            HTTP2Frame(
                streamID: HTTP2StreamID(1),
                payload: .headers(
                    .init(
                        headers: [":status": "200"], endStream: true))))
        #expect(connection.channel.isActive)  // stream 3 is still owed
        try connection.channel.writeInbound(
            HTTP2Frame(
                streamID: HTTP2StreamID(3),
                payload: .headers(
                    .init(
                        headers: [":status": "200"], endStream: true))))
        #expect(!connection.channel.isActive)
        let answered = try #require(outcomes(answers))
        #expect(answered.map { if case .success = $0 { true } else { false } } == [true, true, false])
        #expect(failures(answers)?.last == .notProcessed)
    }
}

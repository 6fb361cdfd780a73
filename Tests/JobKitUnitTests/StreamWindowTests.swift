import JobKitTestSupport
import NIOCore
import NIOEmbedded
import NIOHPACK
import NIOHTTP2
import Testing

@testable import JobKit
@testable import JobKitDelivery

/// The streams a connection keeps in flight (``StreamWindow``): the cap against a distant provider, a few
/// dozen against one that answers in a millisecond, fewer as soon as answers queue.
@Suite struct StreamWindowTests {
    /// Feeds one round (one window's worth of answers) of `latency`.
    static func round(_ window: inout StreamWindow, _ latency: TimeAmount) {
        for _ in 0..<window.limit { window.answered(latency: latency) }
    }

    @Test func aDistantProviderGetsTheCapWithinAFewRoundTrips() {
        var window = StreamWindow(ceiling: 256, queueing: .milliseconds(1))
        #expect(window.limit == 16)
        var limits: [Int] = []
        // 100 ms away, answers jittering by up to 4 ms: no queue.
        for jitter in [0, 3, 1, 4, 2, 0, 3, 1, 4, 2, 0, 3, 1, 4] {
            Self.round(&window, .milliseconds(100 + Int64(jitter)))
            limits.append(window.limit)
        }
        #expect(limits == [20, 25, 31, 38, 47, 58, 72, 90, 112, 140, 175, 218, 256, 256])
    }

    @Test func answersThatQueueShrinkTheWindowToItsFloor() {
        var window = StreamWindow(initial: 64, floor: 8, ceiling: 256, queueing: .milliseconds(1), memory: 64)
        Self.round(&window, .microseconds(800))
        #expect(window.limit == 80)
        var limits: [Int] = []
        for _ in 0..<30 {
            Self.round(&window, .microseconds(800 + 3_000))
            limits.append(window.limit)
        }
        #expect(limits.prefix(6) == [70, 62, 55, 49, 43, 38])
        #expect(limits.last == 8)
        #expect(window.baseline == .microseconds(800))
    }

    @Test(
        arguments: [
            // (the first round's latency, the next round's, the limit after the next round: 40 after the first)
            // waited 0.4 ms, under half of 1 ms: grows
            (TimeAmount.microseconds(500), TimeAmount.microseconds(900), 50),
            (.microseconds(500), .microseconds(1_300), 40),  // 0.8 ms, within 1 ms: holds
            (.microseconds(500), .microseconds(1_700), 35),  // 1.2 ms: shrinks by an eighth
            (.milliseconds(100), .milliseconds(110), 50),  // 10 ms of 100, under an eighth: grows
            (.milliseconds(100), .milliseconds(120), 40),  // 20 ms of 100, within a quarter: holds
            (.milliseconds(100), .milliseconds(130), 35),  // 30 ms of 100: shrinks
            (.milliseconds(2), .microseconds(500), 50),  // quicker than the baseline: grows
        ] as [(TimeAmount, TimeAmount, Int)])
    func whatARoundDoes(first: TimeAmount, next: TimeAmount, expected: Int) {
        var window = StreamWindow(initial: 32, ceiling: 256, queueing: .milliseconds(1))
        Self.round(&window, first)
        #expect(window.limit == 40)
        Self.round(&window, next)
        #expect(window.limit == expected)
    }

    /// A path that became slower for good is the new baseline once the quicker rounds are out of memory:
    /// the window shrinks meanwhile, then grows again.
    @Test func aSlowerPathBecomesTheBaseline() {
        var window = StreamWindow(initial: 64, floor: 8, ceiling: 256, queueing: .milliseconds(1), memory: 4)
        Self.round(&window, .milliseconds(1))
        #expect(window.limit == 80)
        var limits: [Int] = []
        for _ in 0..<6 {
            Self.round(&window, .milliseconds(5))
            limits.append(window.limit)
        }
        // Three rounds still remember the 1 ms one; from the fourth, 5 ms is the baseline.
        #expect(limits == [70, 62, 55, 68, 85, 106])
        #expect(window.baseline == .milliseconds(5))
    }

    @Test func theCapAndTheFloorBoundIt() {
        var small = StreamWindow(initial: 16, floor: 8, ceiling: 10, queueing: .milliseconds(1))
        #expect(small.limit == 10)
        Self.round(&small, .milliseconds(1))
        #expect(small.limit == 10)
        var one = StreamWindow(initial: 16, floor: 8, ceiling: 1)
        #expect(one.limit == 1 && one.floor == 1)
        Self.round(&one, .milliseconds(1))
        Self.round(&one, .milliseconds(50))
        #expect(one.limit == 1)
    }

    /// The handler writes no more requests than the window allows, and opens more streams as the window grows.
    @Test func theHandlerKeepsTheWindowInFlight() throws {
        let loop = EmbeddedEventLoop()
        let handler = HTTP2StreamsHandler(
            streamCap: 256, requestTimeout: .seconds(10), queueing: .milliseconds(1),
            now: { loop.now })
        let channel = EmbeddedChannel(handler: handler, loop: loop)
        try channel.connect(to: SocketAddress(ipAddress: "127.0.0.1", port: 443)).wait()
        try channel.writeInbound(
            HTTP2Frame(
                streamID: .rootStream,
                payload: .settings(
                    .settings([
                        HTTP2Setting(parameter: .maxConcurrentStreams, value: 1000)
                    ]))))
        func opened() throws -> [HTTP2StreamID] {
            var streams: [HTTP2StreamID] = []
            while let frame = try channel.readOutbound(as: HTTP2Frame.self) {
                if case .headers = frame.payload { streams.append(frame.streamID) }
            }
            return streams
        }
        let promise = loop.makePromise(of: [HTTP2Batch.Outcome].self)
        let requests = (0..<200).map { _ in
            HTTP2Request(headers: [":method": "POST", ":path": "/"], body: ByteBuffer())
        }
        handler.submit(requests, for: HTTP2Batch(count: requests.count, promise: promise))
        var inFlight = try opened()
        #expect(inFlight.count == 16)
        // Each round answered 1 ms after it was written: no queue, so each round opens a quarter more.
        var perRound: [Int] = []
        for _ in 0..<3 {
            loop.advanceTime(by: .milliseconds(1))
            for stream in inFlight {
                try channel.writeInbound(
                    HTTP2Frame(
                        streamID: stream,
                        payload: .headers(
                            .init(
                                headers: [":status": "200"],
                                endStream: true))))
            }
            inFlight = try opened()
            perRound.append(inFlight.count)
        }
        #expect(perRound == [20, 25, 31])
    }
}

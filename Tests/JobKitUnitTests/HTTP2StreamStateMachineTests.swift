import JobKitTestSupport
import NIOCore
import NIOHPACK
import NIOHTTP2
import Testing

@testable import JobKit
@testable import JobKitDelivery

/// The HTTP/2 stream bookkeeping as a value: each table row is a sequence of events and what the machine
/// must answer. Items are request numbers; the clock is a number of milliseconds.
@Suite struct HTTP2StreamStateMachineTests {
    typealias Machine = HTTP2StreamStateMachine<Int>

    static func at(_ milliseconds: Int64) -> NIODeadline {
        .uptimeNanoseconds(UInt64(1_000_000_000 + milliseconds * 1_000_000))
    }

    static func machine(cap: Int = 256, timeout: Int64 = 1_000, window: Int = 1 << 24) -> Machine {
        Machine(streamCap: cap, requestTimeout: .milliseconds(timeout), connectionWindow: window)
    }

    /// Queues `count` requests (numbered from `first`) and opens every stream the limits allow.
    @discardableResult
    static func submit(_ count: Int, first: Int = 0, to machine: inout Machine, at time: Int64 = 0) -> [HTTP2StreamID] {
        for item in first..<(first + count) {
            let accepted = machine.enqueue(item)
            #expect(accepted)
        }
        return openAll(&machine, at: time)
    }

    static func openAll(_ machine: inout Machine, at time: Int64 = 0) -> [HTTP2StreamID] {
        var opened: [HTTP2StreamID] = []
        while let (streamID, _) = machine.nextStream(now: at(time)) { opened.append(streamID) }
        return opened
    }

    static func answer(_ streamID: HTTP2StreamID, status: Int = 200, in machine: inout Machine, at time: Int64 = 0)
        -> Machine.Finished?
    {
        machine.receivedHeaders(streamID, [":status": "\(status)"], endStream: true, now: at(time))
    }

    static func failures(_ finished: [Machine.Finished]) -> [Int: HTTP2StreamFailure] {
        var result: [Int: HTTP2StreamFailure] = [:]
        for done in finished {
            guard case .failure(let failure) = done.outcome else {
                Issue.record("request \(done.item) was answered, not failed")
                continue
            }
            result[done.item] = failure
        }
        return result
    }

    // MARK: Streams and their limits

    @Test func streamsAreOddNumberedAndOpenedInRequestOrder() {
        var machine = Self.machine()
        var opened: [(HTTP2StreamID, Int)] = []
        for item in 0..<3 {
            let accepted = machine.enqueue(item)
            #expect(accepted)
        }
        while let (streamID, item) = machine.nextStream(now: Self.at(0)) { opened.append((streamID, item)) }
        #expect(opened.map(\.0) == [1, 3, 5].map { HTTP2StreamID($0) })
        #expect(opened.map(\.1) == [0, 1, 2])
    }

    /// The least of our cap and the server's limit holds; the server's SETTINGS may lower or raise its own
    /// (APNs raises it after the first authenticated request); a lowered limit closes no open stream.
    @Test(
        arguments: [
            // (our cap, server's limits in turn, streams open after each, queued requests)
            (256, [nil, 2, 5, 1000], [100, 100, 100, 256], 300),
            (4, [nil, 2, 3, 1000], [4, 4, 4, 4], 10),
            (256, [1, 3], [1, 3], 10),
            (256, [0], [1], 10),
        ] as [(Int, [Int?], [Int], Int)])
    func theStreamLimitIsTheLeastOfOursAndTheServers(cap: Int, limits: [Int?], expected: [Int], queued: Int) {
        var machine = Self.machine(cap: cap)
        for item in 0..<queued {
            let accepted = machine.enqueue(item)
            #expect(accepted)
        }
        for (limit, expectedOpen) in zip(limits, expected) {
            if let limit { machine.receivedSettings(maxConcurrentStreams: limit) }
            _ = Self.openAll(&machine)
            #expect(machine.openStreams == min(expectedOpen, queued), "limit \(String(describing: limit))")
        }
        // Answers make room for queued requests, up to the last limit.
        let finalLimit = min(cap, max(1, limits.last.flatMap { $0 } ?? 100))
        var answered = 0
        var streamID = HTTP2StreamID(1)
        while machine.openStreams > 0 {
            if Self.answer(streamID, in: &machine) != nil { answered += 1 }
            streamID = streamID.advanced(by: 2)
            _ = Self.openAll(&machine)
            #expect(machine.openStreams <= finalLimit)
        }
        #expect(answered == queued)
        #expect(machine.queued == 0)
    }

    @Test func aSettingsFrameWithoutTheLimitKeepsIt() {
        var machine = Self.machine()
        machine.receivedSettings(maxConcurrentStreams: 7)
        machine.receivedSettings(maxConcurrentStreams: nil)
        #expect(machine.serverStreamLimit == 7)
    }

    // MARK: Answers, resets, GOAWAY

    @Test func anAnswerCarriesItsStatusHeadersBodyAndLatency() throws {
        var machine = Self.machine()
        Self.submit(1, to: &machine, at: 0)
        #expect(machine.receivedHeaders(1, [":status": "100"], endStream: false, now: Self.at(1)) == nil)
        #expect(
            machine.receivedHeaders(1, [":status": "400", "apns-id": "x"], endStream: false, now: Self.at(2)) == nil)
        #expect(
            machine.receivedData(
                1, ByteBuffer(string: "{\"reason\":"), flowControlledLength: 10, endStream: false, now: Self.at(3)
            ).finished == nil)
        let finished = try #require(
            machine.receivedData(
                1, ByteBuffer(string: "\"BadDeviceToken\"}"), flowControlledLength: 17, endStream: true,
                now: Self.at(7)
            ).finished)
        let answer = try finished.outcome.get()
        #expect(answer.status == 400)
        #expect(answer.headers.first(name: "apns-id") == "x")
        #expect(String(buffer: answer.body) == #"{"reason":"BadDeviceToken"}"#)
        #expect(answer.latency == .milliseconds(7))
        #expect(machine.openStreams == 0)
    }

    @Test(arguments: [
        (HTTP2ErrorCode.refusedStream, HTTP2StreamFailure.notProcessed),
        (.cancel, .reset(.cancel)),
        (.internalError, .reset(.internalError)),
        (.enhanceYourCalm, .reset(.enhanceYourCalm)),
    ])
    func aResetSaysWhetherTheServerMayHaveProcessedTheRequest(code: HTTP2ErrorCode, failure: HTTP2StreamFailure) {
        var machine = Self.machine()
        Self.submit(2, to: &machine)
        #expect(Self.failures([machine.receivedReset(3, code)].compactMap { $0 }) == [1: failure])
        #expect(failure.mayHaveBeenProcessed == (code != .refusedStream))
        #expect(machine.receivedReset(3, code) == nil, "a stream fails once")
        #expect(machine.openStreams == 1)
    }

    @Test func aStreamEndedWithoutAStatusIsAProtocolError() {
        var machine = Self.machine()
        Self.submit(1, to: &machine)
        let finished = machine.receivedData(1, nil, flowControlledLength: 0, endStream: true, now: Self.at(1)).finished
        #expect(Self.failures([finished].compactMap { $0 }) == [0: .reset(.protocolError)])
    }

    /// GOAWAY with streams in flight: those above the last stream id and everything queued were not
    /// processed (resent at once elsewhere); those up to it are still answered, then the connection is drained.
    @Test(arguments: [
        // (last stream id the server processed, requests failed notProcessed)
        (0, [0, 1, 2, 3, 4, 5, 6, 7]),
        (3, [2, 3, 4, 5, 6, 7]),
        (9, [5, 6, 7]),
        (Int(Int32.max), [5, 6, 7]),
    ])
    func goAwayFailsWhatTheServerDidNotProcess(lastStreamID: Int, notProcessed: [Int]) {
        var machine = Self.machine(cap: 5)
        Self.submit(8, to: &machine)  // streams 1…9 open, 3 queued
        #expect(machine.openStreams == 5 && machine.queued == 3)
        let failed = Self.failures(machine.receivedGoAway(lastStreamID: HTTP2StreamID(lastStreamID)))
        #expect(failed == Dictionary(uniqueKeysWithValues: notProcessed.map { ($0, .notProcessed) }))
        #expect(!machine.isUsable)
        let accepted = machine.enqueue(99)
        #expect(!accepted, "no new request after GOAWAY")
        #expect(Self.openAll(&machine).isEmpty, "no new stream after GOAWAY")
        let stillOpen = (0..<5).filter { !notProcessed.contains($0) }
        #expect(machine.openStreams == stillOpen.count)
        #expect(machine.isDrained == stillOpen.isEmpty)
        for item in stillOpen {
            #expect(!machine.isDrained)
            #expect((try? Self.answer(HTTP2StreamID(1 + 2 * item), in: &machine)?.outcome.get().status) == 200)
        }
        #expect(machine.isDrained)
        machine.closing()
        #expect(!machine.isDrained, "closed once")
    }

    @Test func aClosedConnectionFailsOpenStreamsAsLostAndQueuedOnesAsNotProcessed() {
        var machine = Self.machine(cap: 2)
        Self.submit(4, to: &machine)
        let failed = Self.failures(machine.connectionClosed())
        #expect(failed == [0: .connectionLost, 1: .connectionLost, 2: .notProcessed, 3: .notProcessed])
        let accepted = machine.enqueue(5)
        #expect(!accepted)
        #expect(machine.connectionClosed().isEmpty)
    }

    // MARK: Timeouts and PING

    /// At `requestTimeout` an unanswered stream makes the connection send one PING; an answered PING keeps it
    /// alive, and the stream is given up at `answerDeadline` (three timeouts); a PING unanswered for two
    /// timeouts closes the connection.
    @Test func timeoutsPingThenGiveUpOrClose() {
        var machine = Self.machine(timeout: 1_000)
        Self.submit(2, to: &machine, at: 0)
        #expect(machine.sweep(now: Self.at(999)).ping == nil)
        #expect(machine.sweep(now: Self.at(1_000)).ping == 1)
        #expect(machine.sweep(now: Self.at(1_500)).ping == nil, "one PING out at a time")
        machine.receivedPingAck(now: Self.at(1_600))
        #expect(machine.sweep(now: Self.at(2_000)).ping == nil, "liveness checked less than a timeout ago")
        #expect(machine.sweep(now: Self.at(2_600)).ping == 2)
        machine.receivedPingAck(now: Self.at(2_610))
        _ = Self.answer(1, in: &machine, at: 2_700)
        let late = machine.sweep(now: Self.at(3_000))
        #expect(late.timedOut.map(\.streamID) == [3])
        #expect(Self.failures(late.timedOut.map(\.finished)) == [1: .timeout])
        #expect(!late.closeConnection && machine.isUsable, "a live connection stays")

        var dead = Self.machine(timeout: 1_000)
        Self.submit(1, to: &dead, at: 0)
        #expect(dead.sweep(now: Self.at(1_000)).ping == 1)
        #expect(!dead.sweep(now: Self.at(2_999)).closeConnection)
        #expect(dead.sweep(now: Self.at(3_000)).closeConnection)
        #expect(!dead.isUsable)
        #expect(Self.failures(dead.connectionClosed()) == [0: .connectionLost])
    }

    @Test func aTimedOutStreamMakesRoomForAQueuedOne() {
        var machine = Self.machine(cap: 1, timeout: 100)
        Self.submit(2, to: &machine, at: 0)
        #expect(machine.queued == 1)
        #expect(machine.sweep(now: Self.at(300)).timedOut.count == 1)
        #expect(Self.openAll(&machine, at: 300) == [3])
        #expect(machine.sweep(now: Self.at(399)).timedOut.isEmpty, "the new stream's clock starts when it opens")
    }

    // MARK: Flow control

    /// Every DATA byte read counts against the connection's window, on any stream (also one already closed);
    /// half the window consumed is returned in one WINDOW_UPDATE.
    @Test(
        arguments: [
            // (window, frame lengths, WINDOW_UPDATE increments expected after each frame)
            (100, [10, 30, 10, 49, 1], [nil, nil, 50, nil, 50]),
            (100, [60, 60], [60, 60]),
            (100, [0, 0, 49], [nil, nil, nil]),
            (1 << 24, [16_384, 16_384], [nil, nil]),
        ] as [(Int, [Int], [Int?])])
    func theReceiveWindowIsReturnedWhenHalfIsConsumed(window: Int, lengths: [Int], updates: [Int?]) {
        var machine = Self.machine(window: window)
        Self.submit(1, to: &machine)
        for (i, (length, update)) in zip(lengths, updates).enumerated() {
            let streamID = HTTP2StreamID(i % 2 == 0 ? 1 : 99)  // 99: no such stream
            let result = machine.receivedData(
                streamID, ByteBuffer(repeating: 0, count: length), flowControlledLength: length, endStream: false,
                now: Self.at(0))
            #expect(result.windowUpdate == update, "frame \(i)")
        }
    }
}

/// The handler around the state machine on an embedded channel: the frames it writes and how it finishes a
/// batch when the server refuses a stream, limits streams or goes away.
@Suite struct HTTP2StreamsHandlerFrameTests {
    typealias Connection = HTTP2StreamsHandlerTimeoutTests.Connection

    /// The stream ids of the HEADERS frames written since the last look.
    func opened(_ connection: Connection) throws -> [HTTP2StreamID] {
        var streams: [HTTP2StreamID] = []
        while let frame = try connection.channel.readOutbound(as: HTTP2Frame.self) {
            if case .headers = frame.payload { streams.append(frame.streamID) }
        }
        return streams
    }

    func answer(_ streamID: HTTP2StreamID, on connection: Connection) throws {
        try connection.channel.writeInbound(
            HTTP2Frame(streamID: streamID, payload: .headers(.init(headers: [":status": "200"], endStream: true))))
    }

    @Test func goAwayWithStreamsInFlightResendsNothingProcessedAndClosesOnceDrained() throws {
        let connection = try Connection()
        let answers = connection.submit(4)
        #expect(try opened(connection) == [1, 3, 5, 7])
        try connection.channel.writeInbound(
            HTTP2Frame(streamID: .rootStream, payload: .goAway(lastStreamID: 3, errorCode: .noError, opaqueData: nil)))
        #expect(HTTP2StreamsHandlerTimeoutTests().outcomes(answers) == nil, "streams 1 and 3 are still answered")
        #expect(connection.channel.isActive)
        try answer(1, on: connection)
        try answer(3, on: connection)
        #expect(HTTP2StreamsHandlerTimeoutTests().failures(answers) == [nil, nil, .notProcessed, .notProcessed])
        #expect(!connection.channel.isActive, "closed once its last stream was answered")
        let late = connection.submit(1)
        #expect(HTTP2StreamsHandlerTimeoutTests().failures(late) == [.notProcessed])
    }

    @Test func aRefusedStreamFreesItsPlaceUnderTheServersLimit() throws {
        let connection = try Connection()
        _ = try connection.written()
        try connection.channel.writeInbound(
            HTTP2Frame(
                streamID: .rootStream,
                payload: .settings(.settings([HTTP2Setting(parameter: .maxConcurrentStreams, value: 1)]))))
        let answers = connection.submit(3)
        #expect(try opened(connection) == [1])
        try connection.channel.writeInbound(HTTP2Frame(streamID: 1, payload: .rstStream(.refusedStream)))
        #expect(try opened(connection) == [3])
        try answer(3, on: connection)
        #expect(try opened(connection) == [5])
        try connection.channel.writeInbound(
            HTTP2Frame(
                streamID: .rootStream,
                payload: .settings(.settings([HTTP2Setting(parameter: .maxConcurrentStreams, value: 10)]))))
        try answer(5, on: connection)
        #expect(HTTP2StreamsHandlerTimeoutTests().failures(answers) == [.notProcessed, nil, nil])
    }
}

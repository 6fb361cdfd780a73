import JobKit
import NIOCore
import NIOHPACK
import NIOHTTP2

/// The stream bookkeeping of one HTTP/2 connection, without I/O: which requests wait in the queue, which
/// streams are open and what they have received, the stream limits, GOAWAY, PING liveness and the
/// connection's receive window. Each event is a method that updates the state and returns what the caller
/// must do (write a stream, finish a request, send a PING, a WINDOW_UPDATE or a RST_STREAM, close the
/// connection). ``HTTP2StreamsHandler`` performs those actions on its channel; the table tests drive this
/// value directly.
///
/// `Item` is the caller's request: the machine queues it, opens a stream for it and hands it back with its
/// outcome, and never looks inside.
struct HTTP2StreamStateMachine<Item> {
    typealias Outcome = Result<HTTP2Response, HTTP2StreamFailure>

    struct Finished {
        var item: Item
        var outcome: Outcome
    }

    /// What a sweep of the timers asks for.
    struct SweepActions {
        /// Streams given up (`timeout`): each is finished, and its stream reset with CANCEL.
        var timedOut: [(streamID: HTTP2StreamID, finished: Finished)] = []
        /// Send a PING with this payload: a stream is overdue and liveness was not checked recently.
        var ping: UInt64?
        /// The PING went unanswered: the connection is dead and must be closed.
        var closeConnection = false
    }

    private struct Open {
        var item: Item
        var status: Int?
        var headers: HPACKHeaders = [:]
        var body: ByteBuffer?
        var started: NIODeadline
    }

    /// Our own cap on streams in flight.
    let streamCap: Int
    /// A stream unanswered this long after it was written makes the connection check liveness with a PING.
    let requestTimeout: TimeAmount
    /// A PING unanswered this long: the connection is dead.
    let pingTimeout: TimeAmount
    /// A stream unanswered this long on a connection that answers PINGs is given up (`timeout`).
    let answerDeadline: TimeAmount
    /// The connection-level receive window the handler announces at the start; half of it consumed is
    /// returned with a WINDOW_UPDATE.
    let connectionWindow: Int

    private var nextStreamID = HTTP2StreamID(1)
    private var open: [HTTP2StreamID: Open] = [:]
    private var queue = CircularBuffer<Item>()
    /// The server's limit: 100 until its SETTINGS say otherwise (RFC 9113 recommends at least 100).
    private(set) var serverStreamLimit = 100
    /// Streams kept in flight below both caps, when set: as many as the server answers without a queue.
    private var window: StreamWindow?
    private(set) var goingAway = false
    private(set) var closed = false
    /// Inbound DATA bytes not yet returned to the connection window.
    private var consumedWindow = 0
    /// When the unanswered PING was sent, if one is.
    private var pingSent: NIODeadline?
    /// When the server last answered a PING.
    private var pingAnswered: NIODeadline?
    private var pingsSent: UInt64 = 0

    init(
        streamCap: Int, requestTimeout: TimeAmount, pingTimeout: TimeAmount? = nil, answerDeadline: TimeAmount? = nil,
        queueing: TimeAmount? = nil, connectionWindow: Int = 1 << 24
    ) {
        self.streamCap = max(1, streamCap)
        self.requestTimeout = requestTimeout
        self.pingTimeout = pingTimeout ?? .nanoseconds(requestTimeout.nanoseconds * 2)
        self.answerDeadline = max(requestTimeout, answerDeadline ?? .nanoseconds(requestTimeout.nanoseconds * 3))
        self.connectionWindow = connectionWindow
        self.window = queueing.map { StreamWindow(ceiling: self.streamCap, queueing: $0) }
    }

    /// True while new requests can be accepted.
    var isUsable: Bool { !goingAway && !closed }
    var openStreams: Int { open.count }
    var queued: Int { queue.count }
    /// Streams that may be open at once now: the least of our cap, the server's limit and the window.
    var streamLimit: Int { min(window?.limit ?? streamCap, serverStreamLimit) }
    /// After the server's GOAWAY, once its last stream is answered: the caller closes the connection (it takes
    /// no new requests, and a client that kept it would hold a socket per GOAWAY).
    var isDrained: Bool { goingAway && !closed && open.isEmpty }

    // MARK: Requests

    /// Queues a request. False when the connection takes no more (GOAWAY or closed): the caller finishes it
    /// as `notProcessed` at once.
    mutating func enqueue(_ item: Item) -> Bool {
        guard isUsable else { return false }
        queue.append(item)
        return true
    }

    /// The next queued request, with the stream just opened for it, when the limits allow one more: the
    /// caller writes it. Call until `nil` after anything that may free a stream.
    mutating func nextStream(now: NIODeadline) -> (streamID: HTTP2StreamID, item: Item)? {
        guard isUsable, open.count < streamLimit, let item = queue.popFirst() else { return nil }
        let streamID = nextStreamID
        nextStreamID = nextStreamID.advanced(by: 2)
        open[streamID] = Open(item: item, started: now)
        return (streamID, item)
    }

    // MARK: Frames read

    /// A HEADERS frame: the first final status (1xx answers are skipped) and its headers; with END_STREAM the
    /// stream is finished.
    mutating func receivedHeaders(
        _ streamID: HTTP2StreamID, _ headers: HPACKHeaders, endStream: Bool, now: NIODeadline
    ) -> Finished? {
        // Updated in place: one lookup, no copy of the stream's state.
        guard let slot = open.index(forKey: streamID) else { return nil }
        if open.values[slot].status == nil, let status = headers.first(name: ":status").flatMap(Int.init) {
            if status >= 200 { open.values[slot].status = status }
            open.values[slot].headers = headers
        }
        return endStream ? complete(streamID, now: now) : nil
    }

    /// A DATA frame of `flowControlledLength` bytes (padding included): appended to the stream's body. Every
    /// DATA frame counts against the connection window, whichever stream it is on; `windowUpdate` is the
    /// increment to send when half the window is consumed.
    mutating func receivedData(
        _ streamID: HTTP2StreamID, _ data: ByteBuffer?, flowControlledLength: Int, endStream: Bool, now: NIODeadline
    ) -> (finished: Finished?, windowUpdate: Int?) {
        consumedWindow += flowControlledLength
        var windowUpdate: Int?
        if consumedWindow >= connectionWindow / 2 {
            windowUpdate = consumedWindow
            consumedWindow = 0
        }
        guard let slot = open.index(forKey: streamID) else { return (nil, windowUpdate) }
        if var data, data.readableBytes > 0 {
            if open.values[slot].body == nil {
                open.values[slot].body = data
            } else {
                open.values[slot].body!.writeBuffer(&data)
            }
        }
        return (endStream ? complete(streamID, now: now) : nil, windowUpdate)
    }

    /// RST_STREAM: REFUSED_STREAM means the server did not process the request (safe to resend at once);
    /// any other code, that it may have.
    mutating func receivedReset(_ streamID: HTTP2StreamID, _ code: HTTP2ErrorCode) -> Finished? {
        fail(streamID, code == .refusedStream ? .notProcessed : .reset(code))
    }

    /// SETTINGS: the server's SETTINGS_MAX_CONCURRENT_STREAMS, when present, replaces its limit (at least 1).
    mutating func receivedSettings(maxConcurrentStreams: Int?) {
        if let maxConcurrentStreams { serverStreamLimit = max(1, maxConcurrentStreams) }
    }

    mutating func receivedPingAck(now: NIODeadline) {
        pingSent = nil
        pingAnswered = now
    }

    /// GOAWAY: streams above `lastStreamID` were not processed, nor was anything queued; both fail
    /// `notProcessed`, for the caller to resend on a new connection. Streams up to it are still answered.
    mutating func receivedGoAway(lastStreamID: HTTP2StreamID) -> [Finished] {
        goingAway = true
        var finished: [Finished] = []
        for streamID in open.keys.sorted() where streamID > lastStreamID {
            if let done = fail(streamID, .notProcessed) { finished.append(done) }
        }
        return finished + failQueue()
    }

    // MARK: Time and the connection's end

    /// Checks the timers at `now`: a PING unanswered for `pingTimeout` closes the connection; streams past
    /// `answerDeadline` are given up; a stream past `requestTimeout` sends a PING unless one is out or was
    /// answered within `requestTimeout`.
    mutating func sweep(now: NIODeadline) -> SweepActions {
        var actions = SweepActions()
        if let pingSent, now - pingSent >= pingTimeout {
            // Dead: nothing came back, not even the PING's answer. Its streams fail as the connection closes.
            closed = true
            actions.closeConnection = true
            return actions
        }
        var overdue = false
        for (streamID, stream) in open {
            let age = now - stream.started
            if age >= answerDeadline {
                if let finished = fail(streamID, .timeout) { actions.timedOut.append((streamID, finished)) }
            } else if age >= requestTimeout {
                overdue = true
            }
        }
        actions.timedOut.sort { $0.streamID < $1.streamID }
        if overdue, pingSent == nil, pingAnswered.map({ now - $0 >= requestTimeout }) ?? true {
            pingSent = now
            pingsSent += 1
            actions.ping = pingsSent
        }
        return actions
    }

    /// The caller is closing the connection (drained after GOAWAY, or on an error): nothing more is accepted.
    mutating func closing() {
        closed = true
    }

    /// The connection is gone: every open stream fails `connectionLost` (the server may have processed it),
    /// every queued request `notProcessed`.
    mutating func connectionClosed() -> [Finished] {
        closed = true
        var finished: [Finished] = []
        for streamID in open.keys.sorted() {
            if let done = fail(streamID, .connectionLost) { finished.append(done) }
        }
        return finished + failQueue()
    }

    // MARK: Private

    private mutating func complete(_ streamID: HTTP2StreamID, now: NIODeadline) -> Finished? {
        guard let stream = open.removeValue(forKey: streamID) else { return nil }
        guard let status = stream.status else {
            // The stream ended without a final status: a protocol error of the server's.
            return Finished(item: stream.item, outcome: .failure(.reset(.protocolError)))
        }
        let answer = HTTP2Response(
            status: status, headers: stream.headers, body: stream.body ?? ByteBuffer(), latency: now - stream.started)
        window?.answered(latency: answer.latency)
        return Finished(item: stream.item, outcome: .success(answer))
    }

    private mutating func fail(_ streamID: HTTP2StreamID, _ failure: HTTP2StreamFailure) -> Finished? {
        guard let stream = open.removeValue(forKey: streamID) else { return nil }
        return Finished(item: stream.item, outcome: .failure(failure))
    }

    private mutating func failQueue() -> [Finished] {
        var finished: [Finished] = []
        while let item = queue.popFirst() { finished.append(Finished(item: item, outcome: .failure(.notProcessed))) }
        return finished
    }
}

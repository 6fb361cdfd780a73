import JobKit
import NIOCore
import NIOHPACK
import NIOHTTP2

/// One request to send on its own stream.
struct HTTP2Request: Sendable {
    var headers: HPACKHeaders
    var body: ByteBuffer
}

/// The answer on a stream.
struct HTTP2Response: Sendable {
    var status: Int
    var headers: HPACKHeaders
    var body: ByteBuffer
    /// From the request's first write to the end of the answer.
    var latency: TimeAmount
}

/// Why a stream produced no answer. What matters to the caller is whether the server may have
/// processed the request: never (`notProcessed`: safe to resend at once) or perhaps (the rest).
enum HTTP2StreamFailure: Error, Sendable, Hashable {
    /// Never reached the server, or the server said it did not process it (GOAWAY with a lower last
    /// stream id, REFUSED_STREAM).
    case notProcessed
    /// The connection closed while the stream was open.
    case connectionLost
    /// The server reset the stream.
    case reset(HTTP2ErrorCode)
    /// No answer by the answer deadline although the connection answered PINGs: the server is alive but did
    /// not answer this request. It may still process it, so it is not resent at once.
    case timeout

    var mayHaveBeenProcessed: Bool { self != .notProcessed }
}

/// The requests of one `HTTP2Connection.send` call: their answers in request order, and one promise that
/// completes when the last is in. One object and one promise per batch, not a promise and a future callback
/// per request: the event loop is the send path's bottleneck (BENCHMARKS.md#the-http2-client). Used on the event loop only.
///
/// With `onAnswers`, the answers are also handed over as they are read (once per read from the socket, in
/// ``HTTP2StreamsHandler/channelReadComplete(context:)``), so that a caller can record them before the whole
/// batch is in: what a process killed mid-batch leaves unrecorded is then what it read last, not the batch.
final class HTTP2Batch {
    typealias Outcome = Result<HTTP2Response, HTTP2StreamFailure>
    /// Answers read since the last call, by index in the batch; called on the event loop.
    typealias Answers = @Sendable (_ answers: [(index: Int, response: HTTP2Response)]) -> Void

    private var outcomes: [Outcome]
    private var remaining: Int
    private let promise: EventLoopPromise<[Outcome]>
    private let onAnswers: Answers?
    private var unreported: [(index: Int, response: HTTP2Response)] = []

    init(count: Int, promise: EventLoopPromise<[Outcome]>, onAnswers: Answers? = nil) {
        // Every slot is overwritten before the promise completes; this value is never seen.
        outcomes = Array(repeating: .failure(.notProcessed), count: count)
        remaining = count
        self.promise = promise
        self.onAnswers = onAnswers
        if count == 0 { promise.succeed([]) }
    }

    /// Sets the outcome of request `index`. True when it is an answer that the batch must hand over and it
    /// had none waiting: the caller then calls ``reportAnswers()`` once the read is done.
    @discardableResult
    func finish(_ index: Int, _ outcome: Outcome) -> Bool {
        outcomes[index] = outcome
        var first = false
        if onAnswers != nil, case .success(let response) = outcome {
            first = unreported.isEmpty
            unreported.append((index, response))
        }
        remaining -= 1
        if remaining == 0 {
            reportAnswers()
            promise.succeed(outcomes)
            return false
        }
        return first
    }

    /// Hands over the answers read since the last call.
    func reportAnswers() {
        guard let onAnswers, !unreported.isEmpty else { return }
        let answers = unreported
        unreported = []
        onAnswers(answers)
    }
}

/// Multiplexes requests over one HTTP/2 connection from a single channel handler: each request is a
/// HEADERS and a DATA frame written straight to the connection, its answer matched back by stream id.
/// No channel per stream, no per-request task: that is what keeps the send path within reach of a C load
/// generator (see BENCHMARKS.md#the-http2-client).
///
/// A stream unanswered for `requestTimeout` after it was written does not fail: it makes the handler send a
/// PING. A server that answers the PING is alive, only slow, and its streams are waited for up to
/// `answerDeadline` (then they fail with `timeout`, and are not resent at once). A PING unanswered for
/// `pingTimeout` means the connection is dead: it is closed, and its streams fail with `connectionLost`.
/// Resending a request as soon as it timed out would deliver it twice whenever the server was only stalled.
///
/// Requests beyond the number of streams the server allows (its SETTINGS_MAX_CONCURRENT_STREAMS, which
/// APNs raises after the first authenticated request), our own cap, or the ``StreamWindow`` (as many as the
/// server answers without queueing them) wait in a queue, where a process killed meanwhile leaves nothing
/// ambiguous. On GOAWAY, streams
/// the server did not process and everything queued fail with `notProcessed`, so the caller resends them
/// on a new connection; no new stream is opened. All methods run on the channel's event loop.
final class HTTP2StreamsHandler: ChannelInboundHandler {
    typealias InboundIn = HTTP2Frame
    typealias OutboundOut = HTTP2Frame

    /// A request and where its outcome goes.
    struct Pending {
        var request: HTTP2Request
        var batch: HTTP2Batch
        var index: Int
    }

    /// The streams' state: queue, limits, GOAWAY, timers, window (``HTTP2StreamStateMachine``). This class
    /// performs what it asks for and keeps the I/O: the frames, the flushes, the sweep timer.
    private var state: HTTP2StreamStateMachine<Pending>
    /// Flush after this many writes while draining the queue.
    let flushEvery: Int

    private var context: ChannelHandlerContext?
    /// The error that closed the connection (a TLS handshake failure, a protocol error), described for
    /// people: why its streams failed.
    private(set) var closeCause: String?
    private var unflushed = 0
    /// True from the first request written after a flush of the socket until the next one (see ``drainQueue()``).
    private var holdingFlushes = false
    /// Batches with answers read and not yet handed over: handed over when the read is done.
    private var answeredBatches: [HTTP2Batch] = []
    /// One timer per connection sweeps for streams past their timeout (a timer per stream cost more CPU
    /// than the HPACK encoding of its request).
    private var sweeper: Scheduled<Void>?
    static let connectionWindow = 1 << 24

    /// The clock of timeouts and latencies (the event loop's, in tests).
    private let now: () -> NIODeadline

    init(
        streamCap: Int, requestTimeout: TimeAmount, pingTimeout: TimeAmount? = nil, answerDeadline: TimeAmount? = nil,
        queueing: TimeAmount? = nil, flushEvery: Int = 16, now: @escaping () -> NIODeadline = NIODeadline.now
    ) {
        self.now = now
        self.state = HTTP2StreamStateMachine(
            streamCap: streamCap, requestTimeout: requestTimeout, pingTimeout: pingTimeout,
            answerDeadline: answerDeadline, queueing: queueing, connectionWindow: Self.connectionWindow)
        self.flushEvery = max(1, flushEvery)
    }

    /// True while new requests can be accepted.
    var isUsable: Bool { state.isUsable }
    var streamCap: Int { state.streamCap }
    var requestTimeout: TimeAmount { state.requestTimeout }

    func handlerAdded(context: ChannelHandlerContext) {
        self.context = context
        scheduleSweep(on: context.eventLoop)
    }

    private func scheduleSweep(on loop: any EventLoop) {
        let interval = max(
            TimeAmount.milliseconds(10), min(TimeAmount.seconds(1), .nanoseconds(requestTimeout.nanoseconds / 10)))
        sweeper = loop.assumeIsolated().scheduleTask(in: interval) { [weak self] () -> Void in
            guard let self, !self.state.closed else { return }
            self.sweepTimeouts()
            self.scheduleSweep(on: loop)
        }
    }

    func handlerRemoved(context: ChannelHandlerContext) {
        // Normally after channelInactive; if not, nothing submitted may be left waiting.
        shutDown()
        self.context = nil
    }

    /// The connection is gone: no more requests, and every stream and queued request fails.
    private func shutDown() {
        sweeper?.cancel()
        sweeper = nil
        for finished in state.connectionClosed() { finish(finished) }
    }

    private func sweepTimeouts() {
        guard let context else { return }
        let actions = state.sweep(now: now())
        if actions.closeConnection {
            // Dead: nothing came back, not even the PING's answer. Its streams fail as the channel closes.
            context.close(promise: nil)
            return
        }
        for (streamID, finished) in actions.timedOut {
            finish(finished)
            context.write(wrapOutboundOut(HTTP2Frame(streamID: streamID, payload: .rstStream(.cancel))), promise: nil)
            unflushed += 1
        }
        if let ping = actions.ping {
            context.write(
                wrapOutboundOut(
                    HTTP2Frame(streamID: .rootStream, payload: .ping(HTTP2PingData(withInteger: ping), ack: false))),
                promise: nil)
            unflushed += 1
        }
        if !actions.timedOut.isEmpty { streamsFreed() }
        // Failed streams freed room for queued requests: those were written, and go out now.
        flushIfNeeded(force: true)
    }

    func channelActive(context: ChannelHandlerContext) {
        // Raise the connection-level receive window once: answers are small, but thousands of them arrive.
        let increment = Self.connectionWindow - 65_535
        context.writeAndFlush(
            wrapOutboundOut(
                HTTP2Frame(
                    streamID: .rootStream,
                    payload: .windowUpdate(windowSizeIncrement: increment))),
            promise: nil)
        context.fireChannelActive()
    }

    /// Queues requests and sends as many as the stream limits allow; flushes every `flushEvery` writes. The
    /// batch gets one answer or failure per request.
    func submit(_ requests: [HTTP2Request], for batch: HTTP2Batch) {
        guard isUsable else {
            for index in requests.indices { batch.finish(index, .failure(.notProcessed)) }
            return
        }
        for (index, request) in requests.enumerated() {
            _ = state.enqueue(Pending(request: request, batch: batch, index: index))
        }
        drainQueue()
        flushIfNeeded(force: true)
    }

    /// Writes queued requests while streams are free. Each request is flushed through `NIOHTTP2Handler` on its
    /// own, so that its DATA frame leaves right behind its HEADERS: DATA frames flushed together leave in the
    /// order of a `Set`, the server then answers out of order, and NIOHTTP2 pays for every stream closed out of
    /// order by moving the streams behind it in its stream maps (a quarter of the event loop's time, measured).
    /// The socket still gets one write per `flushEvery` requests: the `WriteCoalescingHandler` below holds
    /// those flushes until ``flushIfNeeded(force:)`` releases them.
    private func drainQueue() {
        guard let context else { return }
        while let (streamID, pending) = state.nextStream(now: now()) {
            if !holdingFlushes {
                holdingFlushes = true
                context.triggerUserOutboundEvent(WriteCoalescingHandler.Hold.hold, promise: nil)
            }
            context.write(
                wrapOutboundOut(
                    HTTP2Frame(
                        streamID: streamID,
                        payload: .headers(
                            .init(
                                headers: pending.request.headers,
                                endStream: false)))),
                promise: nil)
            context.write(
                wrapOutboundOut(
                    HTTP2Frame(
                        streamID: streamID,
                        payload: .data(
                            .init(
                                data: .byteBuffer(pending.request.body),
                                endStream: true)))),
                promise: nil)
            context.flush()
            unflushed += 1
            if unflushed >= flushEvery { flushIfNeeded(force: true) }
        }
    }

    /// Sends what was written: releases held flushes (which flushes the socket), or flushes.
    private func flushIfNeeded(force: Bool) {
        guard let context, unflushed > 0 || holdingFlushes else { return }
        if force || unflushed >= flushEvery {
            unflushed = 0
            if holdingFlushes {
                holdingFlushes = false
                context.flush()
                context.triggerUserOutboundEvent(WriteCoalescingHandler.Hold.release, promise: nil)
            } else {
                context.flush()
            }
        }
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        let frame = unwrapInboundIn(data)
        switch frame.payload {
        case .headers(let headers):
            if let finished = state.receivedHeaders(
                frame.streamID, headers.headers, endStream: headers.endStream, now: now())
            {
                finish(finished)
                streamsFreed()
            }
        case .data(let payload):
            var body: ByteBuffer?
            if case .byteBuffer(let buffer) = payload.data { body = buffer }
            let (finished, windowUpdate) = state.receivedData(
                frame.streamID, body, flowControlledLength: payload.data.readableBytes + (payload.paddingBytes ?? 0),
                endStream: payload.endStream, now: now())
            if let windowUpdate {
                context.write(
                    wrapOutboundOut(
                        HTTP2Frame(streamID: .rootStream, payload: .windowUpdate(windowSizeIncrement: windowUpdate))),
                    promise: nil)
                unflushed += 1
            }
            if let finished {
                finish(finished)
                streamsFreed()
            }
        case .rstStream(let code):
            if let finished = state.receivedReset(frame.streamID, code) {
                finish(finished)
                streamsFreed()
            }
        case .settings(.settings(let settings)):
            state.receivedSettings(
                maxConcurrentStreams: settings.last(where: { $0.parameter == .maxConcurrentStreams }).map(\.value))
            drainQueue()
        case .ping(_, ack: true):
            state.receivedPingAck(now: now())
        case .goAway(let lastStreamID, _, _):
            for finished in state.receivedGoAway(lastStreamID: lastStreamID) { finish(finished) }
            closeIfDrained()
        default:
            break
        }
    }

    func channelReadComplete(context: ChannelHandlerContext) {
        if !answeredBatches.isEmpty {
            for batch in answeredBatches { batch.reportAnswers() }
            answeredBatches.removeAll(keepingCapacity: true)
        }
        flushIfNeeded(force: true)
        context.fireChannelReadComplete()
    }

    func channelInactive(context: ChannelHandlerContext) {
        shutDown()
        context.fireChannelInactive()
    }

    func errorCaught(context: ChannelHandlerContext, error: any Error) {
        // A connection-level error (TLS, protocol): the connection is done.
        if closeCause == nil { closeCause = ConnectionErrorText.describe(error) }
        state.closing()
        context.close(promise: nil)
    }

    /// Hands a request's outcome to its batch; an answer handed over early is noted for the end of the read.
    private func finish(_ finished: HTTP2StreamStateMachine<Pending>.Finished) {
        let pending = finished.item
        if pending.batch.finish(pending.index, finished.outcome) { answeredBatches.append(pending.batch) }
    }

    /// A stream ended: queued requests may take its place, and a connection going away may be done.
    private func streamsFreed() {
        drainQueue()
        closeIfDrained()
    }

    /// After the server's GOAWAY, the connection closes once its last stream is answered: it takes no new
    /// requests, and a client that kept it would hold a socket per GOAWAY (a warm Lambda, for hours).
    private func closeIfDrained() {
        guard state.isDrained, let context else { return }
        flushIfNeeded(force: true)
        state.closing()
        context.close(promise: nil)
    }
}

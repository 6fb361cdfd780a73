import JobKit
import JobKitDelivery
import NIOCore
import NIOHPACK
import NIOHTTP2

/// Serves one HTTP/2 connection from a single channel handler: frames in, frames out, requests matched by
/// stream id. There is no channel per stream. Under load that per-stream machinery cost the simulator more
/// CPU than the provider checks themselves, and the simulator shares the machine with the sender it
/// measures (see BENCHMARKS.md#the-http2-client).
///
/// Without stream channels this handler returns flow-control credit itself: the connection window is
/// raised once and replenished as DATA arrives, and a stream's window as its DATA arrives, so a request
/// body of any size gets through. All methods run on the connection's event loop.
final class SimulatorConnectionHandler: ChannelInboundHandler {
    typealias InboundIn = HTTP2Frame
    typealias OutboundOut = HTTP2Frame

    private struct Request {
        var headers: HPACKHeaders
        var body: ByteBuffer?
    }

    static let connectionWindow = 1 << 24

    private let state: SimulatorState
    /// Refuse the streams after this many, and send GOAWAY once the ones before are answered (see `admit`).
    private let goAwayAfter: Int?
    private var requests: [HTTP2StreamID: Request] = [:]
    private var streamCount = 0
    private var lastStreamID: HTTP2StreamID?
    private var consumedWindow = 0
    private var needsFlush = false
    private var goAwaySent = false
    /// True while answers are flushed through NIOHTTP2Handler but held from the socket (see `respond`).
    private var holdingFlushes = false
    private var delayedAnswers = 0
    private var removed = false

    init(state: SimulatorState, goAwayAfter: Int?) {
        self.state = state
        self.goAwayAfter = goAwayAfter
    }

    func channelActive(context: ChannelHandlerContext) {
        context.writeAndFlush(
            wrapOutboundOut(
                HTTP2Frame(
                    streamID: .rootStream,
                    payload: .windowUpdate(windowSizeIncrement: Self.connectionWindow - 65_535))),
            promise: nil)
        context.fireChannelActive()
    }

    func handlerRemoved(context: ChannelHandlerContext) {
        removed = true
        requests.removeAll()
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        let frame = unwrapInboundIn(data)
        let streamID = frame.streamID
        switch frame.payload {
        case .headers(let payload):
            if var request = requests[streamID] {
                // Trailers: nothing the providers read.
                request.headers.add(contentsOf: payload.headers)
                requests[streamID] = request
            } else {
                guard admit(streamID, context: context) else { return }
                requests[streamID] = Request(headers: payload.headers)
            }
            if payload.endStream { answer(streamID, context: context) }
        case .data(let payload):
            let length = payload.data.readableBytes + (payload.paddingBytes ?? 0)
            returnConnectionWindow(length, context: context)
            guard var request = requests[streamID] else { return }
            if case .byteBuffer(var buffer) = payload.data {
                if request.body == nil { request.body = buffer } else { request.body!.writeBuffer(&buffer) }
            }
            requests[streamID] = request
            if payload.endStream {
                answer(streamID, context: context)
            } else if length > 0 {
                write(
                    HTTP2Frame(streamID: streamID, payload: .windowUpdate(windowSizeIncrement: length)),
                    context: context)
            }
        case .rstStream:
            requests[streamID] = nil
            goAwayIfDrained(context: context)
        default:
            break
        }
    }

    func channelReadComplete(context: ChannelHandlerContext) {
        flush(context: context)
        context.fireChannelReadComplete()
    }

    /// Counts a new stream. Streams after the `goAwayAfter`th are refused (RFC 9113 §8.7: never processed,
    /// safe to send again), and once every stream up to it is answered, a GOAWAY names it as the last stream
    /// processed.
    ///
    /// The GOAWAY waits for those answers because of how NIOHTTP2 treats a stream the client opens after the
    /// server sent GOAWAY (which the client does until it reads the GOAWAY): it refuses its HEADERS, then takes
    /// its DATA for a protocol error and closes the connection, losing any answer still owed. From the GOAWAY
    /// on, every frame is flushed as it is written.
    private func admit(_ streamID: HTTP2StreamID, context: ChannelHandlerContext) -> Bool {
        if let lastStreamID {
            guard streamID <= lastStreamID else {
                write(HTTP2Frame(streamID: streamID, payload: .rstStream(.refusedStream)), context: context)
                return false
            }
            return true
        }
        streamCount += 1
        if let goAwayAfter, streamCount >= goAwayAfter {
            lastStreamID = streamID
        }
        return true
    }

    /// Sends the GOAWAY once the streams it covers are all answered.
    private func goAwayIfDrained(context: ChannelHandlerContext) {
        guard let lastStreamID, !goAwaySent, requests.isEmpty, delayedAnswers == 0 else { return }
        flush(context: context)
        goAwaySent = true
        state.goAwaySent()
        write(
            HTTP2Frame(
                streamID: .rootStream,
                payload: .goAway(lastStreamID: lastStreamID, errorCode: .noError, opaqueData: nil)),
            context: context)
    }

    private func answer(_ streamID: HTTP2StreamID, context: ChannelHandlerContext) {
        guard let request = requests.removeValue(forKey: streamID) else { return }
        let response = state.handle(
            method: request.headers.first(name: ":method") ?? "",
            path: request.headers.first(name: ":path") ?? "",
            headers: request.headers, body: request.body ?? ByteBuffer())
        guard let delay = response.delayMs else {
            respond(streamID, response, context: context)
            goAwayIfDrained(context: context)
            return
        }
        delayedAnswers += 1
        context.eventLoop.assumeIsolated().scheduleTask(in: .milliseconds(Int64(delay))) { [weak self] () -> Void in
            guard let self, !self.removed else { return }
            self.delayedAnswers -= 1
            self.respond(streamID, response, context: context)
            self.goAwayIfDrained(context: context)
            self.flush(context: context)
        }
    }

    private func respond(_ streamID: HTTP2StreamID, _ response: SimulatedResponse, context: ChannelHandlerContext) {
        var headers = HPACKHeaders()
        headers.reserveCapacity(response.headers.count + 2)
        headers.add(name: ":status", value: String(response.status))
        for (name, value) in response.headers {
            // A message id is new in every answer: kept out of HPACK's dynamic table, on both sides.
            headers.add(name: name, value: value, indexing: name == "apns-id" ? .nonIndexable : .indexable)
        }
        let body = response.body.utf8
        headers.add(name: "content-length", value: String(body.count))
        // No body, no DATA frame: the HEADERS frame ends the stream.
        write(
            HTTP2Frame(streamID: streamID, payload: .headers(.init(headers: headers, endStream: body.isEmpty))),
            context: context)
        if !body.isEmpty {
            let buffer = context.channel.allocator.buffer(string: response.body)
            write(
                HTTP2Frame(streamID: streamID, payload: .data(.init(data: .byteBuffer(buffer), endStream: true))),
                context: context)
            // Through NIOHTTP2Handler at once: DATA frames flushed together leave in the order of a `Set`, and
            // answers would end out of the order they were given (a production server's do not). The socket
            // still gets one write per read: the `WriteCoalescingHandler` below holds these flushes until
            // ``flush(context:)``.
            if !goAwaySent {
                if !holdingFlushes {
                    holdingFlushes = true
                    context.triggerUserOutboundEvent(WriteCoalescingHandler.Hold.hold, promise: nil)
                }
                context.flush()
            }
        }
    }

    private func returnConnectionWindow(_ length: Int, context: ChannelHandlerContext) {
        consumedWindow += length
        guard consumedWindow >= Self.connectionWindow / 2 else { return }
        write(
            HTTP2Frame(streamID: .rootStream, payload: .windowUpdate(windowSizeIncrement: consumedWindow)),
            context: context)
        consumedWindow = 0
    }

    private func write(_ frame: HTTP2Frame, context: ChannelHandlerContext) {
        if !goAwaySent {
            context.write(wrapOutboundOut(frame), promise: nil)
            needsFlush = true
        } else {
            context.writeAndFlush(wrapOutboundOut(frame), promise: nil)
        }
    }

    private func flush(context: ChannelHandlerContext) {
        guard needsFlush || holdingFlushes else { return }
        needsFlush = false
        context.flush()
        if holdingFlushes {
            holdingFlushes = false
            context.triggerUserOutboundEvent(WriteCoalescingHandler.Hold.release, promise: nil)
        }
    }
}

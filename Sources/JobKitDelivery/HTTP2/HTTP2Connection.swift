import Foundation
import JobKit
import NIOCore
import NIOHPACK
import NIOHTTP2
import NIOPosix
import NIOSSL

/// `https://host:port` of a provider.
package struct Endpoint: Sendable, Hashable, CustomStringConvertible {
    package let host: String
    package let port: Int

    package init(host: String, port: Int) {
        self.host = host
        self.port = port
    }

    /// Parses `https://host[:port][/…]`; the path is ignored.
    package init?(url: String) {
        guard let components = URLComponents(string: url), components.scheme?.lowercased() == "https",
            let host = components.host, !host.isEmpty
        else { return nil }
        self.host = host
        self.port = components.port ?? 443
    }

    /// The `:authority` header.
    var authority: String { port == 443 ? host : "\(host):\(port)" }
    package var description: String { "https://\(authority)" }
}

/// TLS settings for provider connections.
package struct TLSSettings: Sendable {
    /// A PEM file of CA certificates trusted in addition to the system roots (a local simulator, a
    /// corporate proxy).
    package var additionalCAFile: String?

    package init(additionalCAFile: String? = nil) {
        self.additionalCAFile = additionalCAFile
    }

    /// A client context offering `protocols` by ALPN: `h2` for the providers, `http/1.1` for the HTTP/1 clients
    /// (a server that speaks both picks what the client offers; offered only `h2`, it would pick that).
    package func makeContext(protocols: [String] = ["h2"]) throws(JobError) -> NIOSSLContext {
        var configuration = TLSConfiguration.makeClientConfiguration()
        configuration.applicationProtocols = protocols
        configuration.minimumTLSVersion = .tlsv12
        if let directory = Self.hashedSystemCADirectory {
            configuration.trustRoots = .file(directory)
        }
        if let file = additionalCAFile {
            _ = try readInputFile(file, what: "the CA file")
            configuration.additionalTrustRoots = [.file(file)]
        }
        do {
            return try NIOSSLContext(configuration: configuration)
        } catch {
            throw .config("TLS setup failed (is \(additionalCAFile ?? "the CA file") a PEM certificate?)")
        }
    }

    /// The system's roots as a hashed directory (`c_rehash` names such as `4042bcee.0`, which Debian, Ubuntu,
    /// Arch and Alpine keep beside their bundle file), when there is one. BoringSSL then reads, during a
    /// handshake, the one root it needs; NIOSSL's default also parses the whole bundle file (~140 certificates,
    /// ~5 ms) in every process, which is a tenth of a hook that sends. Elsewhere (no such directory), the default.
    static let hashedSystemCADirectory: String? = {
        let directory = "/etc/ssl/certs"
        guard let names = try? FileManager.default.contentsOfDirectory(atPath: directory) else { return nil }
        return names.contains(where: isHashedCertificateName) ? directory : nil
    }()

    /// `c_rehash`'s name for a certificate: eight hex digits of its subject's hash, a dot, a sequence number.
    static func isHashedCertificateName(_ name: String) -> Bool {
        let parts = name.utf8.split(separator: UInt8(ascii: "."), omittingEmptySubsequences: false)
        guard parts.count == 2, parts[0].count == 8, !parts[1].isEmpty else { return false }
        return parts[0].allSatisfy {
            (UInt8(ascii: "0")...UInt8(ascii: "9")).contains($0) || (UInt8(ascii: "a")...UInt8(ascii: "f")).contains($0)
        }
            && parts[1].allSatisfy { (UInt8(ascii: "0")...UInt8(ascii: "9")).contains($0) }
    }
}

/// One HTTP/2 connection to a provider, carrying many concurrent streams.
final class HTTP2Connection: Sendable {
    let endpoint: Endpoint
    private let channel: any Channel
    private let handler: NIOLoopBound<HTTP2StreamsHandler>

    private init(endpoint: Endpoint, channel: any Channel, handler: NIOLoopBound<HTTP2StreamsHandler>) {
        self.endpoint = endpoint
        self.channel = channel
        self.handler = handler
    }

    struct Options: Sendable {
        var streamCap = 256
        /// A stream unanswered this long makes the connection send a PING (see ``HTTP2StreamsHandler``).
        var requestTimeout: TimeAmount = .seconds(10)
        /// A PING unanswered this long closes the connection as dead; default twice `requestTimeout`.
        var pingTimeout: TimeAmount?
        /// A stream on a live connection unanswered this long fails with `timeout`; default three times
        /// `requestTimeout`.
        var answerDeadline: TimeAmount?
        /// Requests may wait this long in the server's queue before fewer are kept in flight (``StreamWindow``);
        /// `nil`: `streamCap` always.
        var queueing: TimeAmount? = .milliseconds(2)
        var connectTimeout: TimeAmount = .seconds(10)
        var flushEvery = 16
    }

    static func connect(
        to endpoint: Endpoint, tls: NIOSSLContext, options: Options,
        group: any EventLoopGroup = MultiThreadedEventLoopGroup.singleton
    ) async throws -> HTTP2Connection {
        // SNI must be a name, never an address literal; the certificate is then checked against the address.
        let isAddress = endpoint.host.contains(":") || endpoint.host.allSatisfy { $0.isNumber || $0 == "." }
        let serverHostname = isAddress ? nil : endpoint.host
        let bootstrap = ClientBootstrap(group: group)
            .connectTimeout(options.connectTimeout)
            .channelOption(ChannelOptions.socketOption(.tcp_nodelay), value: 1)
            .channelInitializer { channel in
                channel.eventLoop.makeCompletedFuture {
                    let sync = channel.pipeline.syncOperations
                    try sync.addHandler(try NIOSSLClientHandler(context: tls, serverHostname: serverHostname))
                    // One TLS record per flush rather than up to three per request.
                    try sync.addHandler(WriteCoalescingHandler())
                    var settings = nioDefaultSettings
                    settings.append(HTTP2Setting(parameter: .enablePush, value: 0))
                    // Our own requests are built by us: validating their header blocks again costs CPU per
                    // request and buys nothing. The server's answers are parsed either way.
                    try sync.addHandler(
                        NIOHTTP2Handler(
                            mode: .client, initialSettings: settings,
                            headerBlockValidation: .disabled,
                            contentLengthValidation: .disabled))
                    try sync.addHandler(
                        HTTP2StreamsHandler(
                            streamCap: options.streamCap,
                            requestTimeout: options.requestTimeout,
                            pingTimeout: options.pingTimeout,
                            answerDeadline: options.answerDeadline,
                            queueing: options.queueing,
                            flushEvery: options.flushEvery))
                }
            }
        // An address literal (a local simulator, a proxy) is connected to as it is: no resolver thread and no
        // getaddrinfo call, which were ~2 ms of a hook process that sends.
        let channel: any Channel
        if isAddress, let address = try? SocketAddress(ipAddress: endpoint.host, port: endpoint.port) {
            channel = try await bootstrap.connect(to: address).get()
        } else {
            channel = try await bootstrap.connect(host: endpoint.host, port: endpoint.port).get()
        }
        let handler = try await channel.eventLoop.submit {
            NIOLoopBound(
                try channel.pipeline.syncOperations.handler(type: HTTP2StreamsHandler.self),
                eventLoop: channel.eventLoop)
        }.get()
        return HTTP2Connection(endpoint: endpoint, channel: channel, handler: handler)
    }

    /// Sends every request and waits for all answers. The order of results is the order of requests.
    /// `onAnswers`, if given, also gets the answers as they are read (see ``HTTP2Batch``).
    func send(
        _ requests: [HTTP2Request],
        onAnswers: HTTP2Batch.Answers? = nil
    ) async -> [Result<HTTP2Response, HTTP2StreamFailure>] {
        guard !requests.isEmpty else { return [] }
        let loop = channel.eventLoop
        let handler = self.handler
        do {
            // The batch always completes: every request is answered, fails, times out or is failed when the
            // connection closes. Only an event loop that has shut down fails the submission itself.
            return try await loop.flatSubmit {
                let promise = loop.makePromise(of: [HTTP2Batch.Outcome].self)
                handler.value.submit(
                    requests, for: HTTP2Batch(count: requests.count, promise: promise, onAnswers: onAnswers))
                return promise.futureResult
            }.get()
        } catch {
            return requests.map { _ in .failure(.notProcessed) }
        }
    }

    /// False once the server sent GOAWAY or the connection closed: open a new one.
    var isUsable: Bool {
        get async {
            let handler = self.handler
            return (try? await channel.eventLoop.submit { handler.value.isUsable }.get()) ?? false
        }
    }

    /// Why the connection closed, when an error closed it (a certificate that was not accepted, …).
    var closeCause: String? {
        get async {
            let handler = self.handler
            return (try? await channel.eventLoop.submit { handler.value.closeCause }.get()) ?? nil
        }
    }

    func close() async {
        try? await channel.close()
    }

    /// False once the socket is closed (by us after a drained GOAWAY, by the server, or by an error).
    var isOpen: Bool { channel.isActive }
}

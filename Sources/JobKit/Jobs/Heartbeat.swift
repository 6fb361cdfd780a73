import Foundation
import Logging
import NIOCore
import NIOHTTP1
import NIOPosix
import NIOSSL

/// A dead-man's-switch ping, as healthchecks.io and Cronitor take them: `URL/start` when a run begins, `URL`
/// when it succeeds, `URL/fail` when it exits non-zero, each a POST whose body is the run's summary (JSON). A
/// ping has a few seconds; one that fails is logged and never changes the run's outcome.
public struct Heartbeat: Sendable {
    public enum Event: String, Sendable { case start, success, fail }

    public let url: String
    private let host: String
    private let port: Int
    private let path: String
    private let tls: NIOSSLContext?
    private let timeout: TimeAmount
    private let logger: Logger

    /// Checks the URL (http or https, a host); `caFile` adds trusted CAs as for the providers.
    public init(url: String, caFile: String? = nil, timeout: TimeAmount = .seconds(5), logger: Logger) throws(JobError) {
        guard let components = URLComponents(string: url), let scheme = components.scheme?.lowercased(),
              scheme == "http" || scheme == "https", let host = components.host, !host.isEmpty else {
            throw .usage("--ping-url: not an http(s) URL: \(url)")
        }
        self.url = url
        self.host = host
        self.port = components.port ?? (scheme == "https" ? 443 : 80)
        let basePath = components.percentEncodedPath.isEmpty ? "/" : components.percentEncodedPath
        self.path = basePath + (components.percentEncodedQuery.map { "?\($0)" } ?? "")
        if scheme == "https" {
            var settings = TLSSettings()
            settings.additionalCAFile = caFile
            tls = try settings.makeContext()
        } else {
            tls = nil
        }
        self.timeout = timeout
        self.logger = logger
    }

    /// The URL a ping of `event` goes to: `…/start`, the URL itself, `…/fail` (before any query).
    func path(for event: Event) -> String {
        let (base, query) = path.firstIndex(of: "?").map { (String(path[..<$0]), String(path[$0...])) } ?? (path, "")
        switch event {
        case .success: return path
        case .start, .fail:
            return (base.hasSuffix("/") ? base : base + "/") + event.rawValue + query
        }
    }

    /// Sends one ping; logs (never throws) when it fails.
    public func ping(_ event: Event, body: String = "") async {
        do {
            let status = try await post(path(for: event), body: body)
            if !(200..<300).contains(status) {
                logger.warning("heartbeat ping answered \(status)", metadata: ["event": "\(event.rawValue)", "url": "\(url)"])
            }
        } catch {
            logger.warning("heartbeat ping failed", metadata: ["event": "\(event.rawValue)", "url": "\(url)", "error": "\(error)"])
        }
    }

    private func post(_ path: String, body: String) async throws -> UInt {
        let tls = self.tls
        let host = self.host
        let channel = try await ClientBootstrap(group: MultiThreadedEventLoopGroup.singleton)
            .connectTimeout(timeout)
            .channelInitializer { channel in
                channel.eventLoop.makeCompletedFuture {
                    let sync = channel.pipeline.syncOperations
                    if let tls {
                        let isAddress = host.contains(":") || host.allSatisfy { $0.isNumber || $0 == "." }
                        try sync.addHandler(try NIOSSLClientHandler(context: tls, serverHostname: isAddress ? nil : host))
                    }
                    try sync.addHTTPClientHandlers()
                    try sync.addHandler(HTTP1ExchangeHandler())
                }
            }
            .connect(host: host, port: port).get()
        defer { channel.close(promise: nil) }
        var head = HTTPRequestHead(version: .http1_1, method: .POST, uri: path)
        head.headers.add(name: "Host", value: port == 80 || port == 443 ? host : "\(host):\(port)")
        head.headers.add(name: "User-Agent", value: "diary-push")
        head.headers.add(name: "Content-Type", value: "application/json")
        head.headers.add(name: "Content-Length", value: "\(body.utf8.count)")
        head.headers.add(name: "Connection", value: "close")
        let promise = channel.eventLoop.makePromise(of: HTTP1Response.self)
        channel.writeAndFlush(HTTP1ExchangeHandler.Request(head: head, body: ByteBuffer(string: body), promise: promise))
            .whenFailure { promise.fail($0) }
        let deadline = channel.eventLoop.scheduleTask(in: timeout) { promise.fail(ChannelError.connectTimeout(self.timeout)) }
        defer { deadline.cancel() }
        return try await promise.futureResult.get().status.code
    }
}

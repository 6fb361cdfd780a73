import Foundation
import JobKit
import Logging
import NIOCore
import NIOHTTP1
import NIOPosix
import NIOSSL

/// A dead-man's-switch ping, as healthchecks.io and Cronitor take them: `URL/start` when a run begins, `URL`
/// when it succeeds, `URL/fail` when it exits non-zero, each a POST whose body is the run's summary (JSON). A
/// ping has a few seconds; one that fails is logged and never changes the run's outcome.
package struct Heartbeat: Sendable {
    package enum Event: String, Sendable { case start, success, fail }

    private let endpoint: HTTP1Endpoint
    private let timeout: TimeAmount
    private let logger: Logger

    package var url: String { endpoint.url }
    private var path: String { endpoint.path }

    /// Checks the URL (http or https, a host); `caFile` adds trusted CAs as for the providers.
    package init(url: String, caFile: String? = nil, timeout: TimeAmount = .seconds(5), logger: Logger) throws(JobError)
    {
        guard let endpoint = try HTTP1Endpoint(url: url, caFile: caFile) else {
            throw .usage("--ping-url: not an http(s) URL: \(url)")
        }
        self.endpoint = endpoint
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
    package func ping(_ event: Event, body: String = "") async {
        do {
            let status = try await post(path(for: event), body: body)
            if !(200..<300).contains(status) {
                logger.warning(
                    "heartbeat ping answered \(status)", metadata: ["event": "\(event.rawValue)", "url": "\(url)"])
            }
        } catch {
            logger.warning(
                "heartbeat ping failed", metadata: ["event": "\(event.rawValue)", "url": "\(url)", "error": "\(error)"])
        }
    }

    private func post(_ path: String, body: String) async throws -> UInt {
        try await HTTP1OneShot.exchange(
            host: endpoint.host, port: endpoint.port, tls: endpoint.tls, method: .POST, path: path,
            headers: [("Content-Type", "application/json")], body: body, timeout: timeout
        ).status.code
    }
}

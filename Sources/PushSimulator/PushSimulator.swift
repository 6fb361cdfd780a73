import Crypto
import Foundation
import JobKit
import JobKitDelivery
import NIOConcurrencyHelpers
import NIOCore
import NIOHTTP2
import NIOPosix
import NIOSSL
import _CryptoExtras

/// A scripted behaviour for device tokens starting with `prefix`.
public struct SimulatorRule: Sendable, Codable, Hashable {
    public enum Kind: String, Sendable, Codable, Hashable {
        /// APNs 410 Unregistered (with `timestamp`), FCM 404 UNREGISTERED.
        case dead
        /// APNs 400 BadDeviceToken, FCM 400 INVALID_ARGUMENT about the token.
        case bad
        /// APNs 429 TooManyRequests, FCM 429 QUOTA_EXCEEDED for the device's message rate (a `QuotaFailure`
        /// detail naming the device), with Retry-After: always, or with `times` the first `times` times for each
        /// token.
        case throttle
        /// FCM 429 QUOTA_EXCEEDED for the project's quota (a `QuotaFailure` naming the project), as `throttle`
        /// otherwise; APNs, which has no project quota, answers TooManyRequests.
        case projectQuota
        /// APNs 503 ServiceUnavailable, FCM 503 UNAVAILABLE, the first `times` times for each token.
        case flaky
        /// Answers after `delayMs`.
        case slow
        /// FCM 401 THIRD_PARTY_AUTH_ERROR (the APNs key uploaded to Firebase is wrong).
        case thirdPartyAuth
        /// A token of another app or project: APNs 400 DeviceTokenNotForTopic, FCM 403 SENDER_ID_MISMATCH. (A
        /// wrong topic or service account answers so for every token: ``SimulatorCredentials``.)
        case otherApp
    }

    public var prefix: String
    public var kind: Kind
    public var times: Int?
    public var retryAfter: Int?
    public var delayMs: Int?
    /// For `dead`: the APNs `timestamp` (ms since the epoch) of the 410; default: now.
    public var timestampMs: Int64?

    public init(
        prefix: String, kind: Kind, times: Int? = nil, retryAfter: Int? = nil, delayMs: Int? = nil,
        timestampMs: Int64? = nil
    ) {
        self.prefix = prefix
        self.kind = kind
        self.times = times
        self.retryAfter = retryAfter
        self.delayMs = delayMs
        self.timestampMs = timestampMs
    }

    /// `dead…`, `bad0…`, `7407…` (throttle), `fa11…` (flaky ×2), `5104…` (slow 200 ms), `a0th…` (FCM third-party auth).
    /// Prefixes are hexadecimal where they can be, so that they work for APNs tokens too.
    public static let defaults: [SimulatorRule] = [
        SimulatorRule(prefix: "dead", kind: .dead),
        SimulatorRule(prefix: "bad0", kind: .bad),
        SimulatorRule(prefix: "7407", kind: .throttle, retryAfter: 1),
        SimulatorRule(prefix: "fa11", kind: .flaky, times: 2),
        SimulatorRule(prefix: "5104", kind: .slow, delayMs: 200),
        SimulatorRule(prefix: "a0th", kind: .thirdPartyAuth),
    ]
}

public struct SimulatorConfiguration: Sendable {
    public var host = "127.0.0.1"
    /// 0 picks a free port.
    public var port = 0
    public var credentials: SimulatorCredentials
    public var rules = SimulatorRule.defaults
    /// SETTINGS_MAX_CONCURRENT_STREAMS announced to clients.
    public var maxConcurrentStreams = 1000
    /// Refuse the streams after this many on each connection, and send GOAWAY naming the last one admitted once
    /// the streams up to it are answered.
    public var goAwayAfterStreams: Int?
    /// Share of requests answered 503 at random (APNs ServiceUnavailable, FCM UNAVAILABLE).
    public var faultRate = 0.0
    /// Append every accepted notification to this file as a JSON line.
    public var recordFile: String?
    /// Keep accepted notifications in memory for ``PushSimulator/accepted()``.
    public var recordInMemory = true
    /// FCM's per-project quota: beyond it, sends are answered 429 QUOTA_EXCEEDED with Retry-After.
    public var fcmQuota: SimulatorQuota?
    /// The simulator's clock (JWT age checks, 410 timestamps).
    public var clock: @Sendable () -> Int64 = { Int64(Date().timeIntervalSince1970) }

    public init(credentials: SimulatorCredentials) {
        self.credentials = credentials
    }
}

/// At most `messages` sends in each window of `window`, the windows counted from the first send (FCM's default
/// is 600,000 a minute per project).
public struct SimulatorQuota: Sendable, Hashable {
    public var messages: Int
    public var window: Duration

    public init(messages: Int, window: Duration = .seconds(60)) {
        self.messages = messages
        self.window = window
    }
}

/// Counters, for tests and benchmarks to assert on.
public struct SimulatorStats: Sendable, Codable, Hashable {
    public var requests = 0
    public var accepted = 0
    /// FCM messages checked with `validate_only` (not delivered).
    public var validated = 0
    /// Errors answered, by reason.
    public var errors: [String: Int] = [:]
    /// Distinct APNs provider tokens (JWTs) accepted: how many times the sender minted one.
    public var apnsProviderTokens = 0
    /// OAuth assertions exchanged for access tokens.
    public var oauthExchanges = 0
    public var connections = 0
    public var goAways = 0
    /// FCM sends that came over the quota (each answered 429 QUOTA_EXCEEDED).
    public var fcmOverQuota = 0
    /// Quota windows in which at least one FCM send came over the quota.
    public var fcmWindowsOverQuota = 0
    /// The most FCM sends counted in one quota window.
    public var fcmBusiestWindow = 0
}

/// One notification the simulator accepted.
public struct AcceptedNotification: Sendable, Codable, Hashable {
    public let provider: String
    /// The device token, or the FCM installation id when `target` is `fid`.
    public let token: String
    /// `fid` for an FCM message sent to an installation id (`message.fid`); absent for tokens.
    public let target: String?
    public let collapseID: String?
    public let expiration: String?
    public let title: String?
    public let body: String?
    public let payloadBytes: Int
    public let payload: String
}

/// A local server that speaks the APNs provider API, FCM HTTP v1 and Google's OAuth token endpoint
/// over HTTP/2 and TLS, checks what a real provider checks, and answers with the providers' real reasons.
public final class PushSimulator: Sendable {
    public let port: Int
    public let credentials: SimulatorCredentials
    private let channel: any Channel
    let state: SimulatorState
    /// Open connections, for ``pause()`` and ``resume()``.
    private let connections: NIOLockedValueBox<[ObjectIdentifier: any Channel]>

    private init(
        port: Int, credentials: SimulatorCredentials, channel: any Channel, state: SimulatorState,
        connections: NIOLockedValueBox<[ObjectIdentifier: any Channel]>
    ) {
        self.connections = connections
        self.port = port
        self.credentials = credentials
        self.channel = channel
        self.state = state
    }

    /// `https://127.0.0.1:<port>`.
    public var baseURL: String { "https://127.0.0.1:\(port)" }

    public static func start(
        _ configuration: SimulatorConfiguration,
        group: any EventLoopGroup = MultiThreadedEventLoopGroup.singleton
    ) async throws -> PushSimulator {
        let credentials = configuration.credentials
        var tls = try credentials.serverTLSConfiguration()
        tls.applicationProtocols = ["h2"]
        let sslContext = try NIOSSLContext(configuration: tls)
        let state = try SimulatorState(configuration: configuration)
        let settings = [
            HTTP2Setting(parameter: .maxConcurrentStreams, value: configuration.maxConcurrentStreams),
            HTTP2Setting(parameter: .maxHeaderListSize, value: 1 << 16),
        ]
        let goAwayAfter = configuration.goAwayAfterStreams
        let connections = NIOLockedValueBox<[ObjectIdentifier: any Channel]>([:])
        let channel = try await ServerBootstrap(group: group)
            .serverChannelOption(ChannelOptions.backlog, value: 256)
            .serverChannelOption(ChannelOptions.socketOption(.so_reuseaddr), value: 1)
            .childChannelOption(ChannelOptions.socketOption(.tcp_nodelay), value: 1)
            .childChannelInitializer { channel in
                state.connectionOpened()
                let id = ObjectIdentifier(channel)
                connections.withLockedValue { $0[id] = channel }
                channel.closeFuture.whenComplete { _ in _ = connections.withLockedValue { $0.removeValue(forKey: id) } }
                return channel.eventLoop.makeCompletedFuture {
                    let sync = channel.pipeline.syncOperations
                    try sync.addHandler(NIOSSLServerHandler(context: sslContext))
                    // Answers leave one TLS record per flush, as a production server's do.
                    try sync.addHandler(WriteCoalescingHandler())
                    try sync.addHandler(NIOHTTP2Handler(mode: .server, initialSettings: settings))
                    try sync.addHandler(SimulatorConnectionHandler(state: state, goAwayAfter: goAwayAfter))
                }
            }
            .bind(host: configuration.host, port: configuration.port).get()
        let port = channel.localAddress?.port ?? configuration.port
        try credentials.writeServiceAccount(port: port)
        state.baseURL = "https://127.0.0.1:\(port)"
        return PushSimulator(
            port: port, credentials: credentials, channel: channel, state: state, connections: connections)
    }

    public var stats: SimulatorStats { state.stats }

    /// Every notification accepted so far (in memory; see ``SimulatorConfiguration/recordInMemory``).
    public func accepted() -> [AcceptedNotification] { state.acceptedNotifications }

    /// Changes the rules while running.
    public func setRules(_ rules: [SimulatorRule]) { state.setRules(rules) }

    /// Stalls the whole server, as a stopped process would: nothing more is read from any connection, open or
    /// new (their bytes wait in the kernel), so no request, PING or handshake is answered until ``resume()``.
    public func pause() async {
        await setReading(false)
    }

    /// Reads again what waited since ``pause()``, and answers it.
    public func resume() async {
        await setReading(true)
    }

    /// Client connections open now.
    public var openConnections: Int { connections.withLockedValue { $0.count } }

    private func setReading(_ on: Bool) async {
        let channels = [channel] + connections.withLockedValue { Array($0.values) }
        for channel in channels {
            try? await channel.setOption(ChannelOptions.autoRead, value: on).get()
        }
    }

    public func stop() async {
        try? await channel.close()
        state.closeRecordFile()
    }
}

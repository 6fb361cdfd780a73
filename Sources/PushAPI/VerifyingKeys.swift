import Foundation
import JWTKit
import JobKit
import JobKitDelivery
import Logging
import NIOConcurrencyHelpers
import NIOCore
import NIOHTTP1
import NIOSSL

/// The keys end-user JWTs are verified with: the HS256 secret and the JWKS file as configured, and the JWKS at a
/// URL (Supabase's and Firebase's publish theirs), read again every ``refreshAfter`` (an hour) and, when a token
/// does not verify, if the last read is older than ``retryAfter`` (a minute: the provider rotated its keys). A
/// read that fails keeps the keys it had and is logged.
final class VerifyingKeys: Sendable {
    let refreshAfter: Duration
    let retryAfter: Duration

    private struct State {
        var keys = JWTKeyCollection()
        var readAt: ContinuousClock.Instant?
        var reading: Task<Void, Never>?
    }

    private let secret: String?
    private let jwks: String?
    private let remote: RemoteJWKS?
    private let logger: Logger
    private let state = NIOLockedValueBox(State())

    init(
        secret: String?, jwks: String?, remote: RemoteJWKS?, logger: Logger, refreshAfter: Duration = .seconds(3600),
        retryAfter: Duration = .seconds(60)
    ) {
        self.refreshAfter = refreshAfter
        self.retryAfter = retryAfter
        self.secret = secret
        self.jwks = jwks
        self.remote = remote
        self.logger = logger
    }

    /// The first load: a JWKS file or URL that is not one is a configuration error, a URL that does not answer
    /// ``JobError/unavailable(_:)``.
    func load() async throws(JobError) {
        let keys = try await collection(remote: try await remote?.read())
        state.withLockedValue {
            $0.keys = keys
            $0.readAt = .now
        }
    }

    private func collection(remote text: String?) async throws(JobError) -> JWTKeyCollection {
        let keys = JWTKeyCollection()
        if let secret { await keys.add(hmac: HMACKey(from: secret), digestAlgorithm: .sha256) }
        for (setting, json) in [(ConfigKey.apiJWKSFile, jwks), (.apiJWKSURL, text)] {
            guard let json else { continue }
            do {
                try await keys.add(jwksJSON: json)
            } catch {
                throw .config("\(setting.rawValue): not a JWKS with keys jwt-kit can use: \(error)")
            }
        }
        return keys
    }

    /// The claims of `token` if one of the keys verifies it.
    func verify(_ token: String) async throws -> AppUserTokens.Claims {
        let (keys, age) = state.withLockedValue { ($0.keys, $0.readAt.map { .now - $0 }) }
        // Keys older than an hour are read again in the background: this request is answered with the keys at
        // hand (it does not wait for the URL), and a token they do not verify waits for the read below.
        if remote != nil, let age, age > refreshAfter { _ = rereading() }
        do {
            return try await keys.verify(token, as: AppUserTokens.Claims.self)
        } catch {
            guard remote != nil, let age, age > retryAfter else { throw error }
            await reread()
            return try await state.withLockedValue { $0.keys }.verify(token, as: AppUserTokens.Claims.self)
        }
    }

    /// Reads the URL again (one read at a time: callers arriving meanwhile wait for it).
    private func reread() async {
        await rereading().value
    }

    /// The read of the URL under way, started if none is.
    private func rereading() -> Task<Void, Never> {
        state.withLockedValue { state -> Task<Void, Never> in
            if let reading = state.reading { return reading }
            let reading = Task { await self.readRemote() }
            state.reading = reading
            return reading
        }
    }

    private func readRemote() async {
        do {
            let keys = try await collection(remote: try await remote?.read())
            state.withLockedValue {
                $0.keys = keys
                $0.readAt = .now
                $0.reading = nil
            }
        } catch {
            logger.warning(
                "could not read the end-user JWKS again; keeping the keys read before",
                metadata: ["url": "\(remote?.url ?? "")", "error": "\(error.message)"])
            state.withLockedValue {
                $0.readAt = .now
                $0.reading = nil
            }
        }
    }
}

/// A JWKS published at an https URL (http on this machine only, for tests and sidecars).
struct RemoteJWKS: Sendable {
    private let endpoint: HTTP1Endpoint
    var url: String { endpoint.url }

    init(url: String, caFile: String?) throws(JobError) {
        let setting = ConfigKey.apiJWKSURL.rawValue
        guard let endpoint = try HTTP1Endpoint(url: url, caFile: caFile) else {
            throw .config("\(setting): not an https URL: \(url)")
        }
        guard endpoint.tls != nil || endpoint.isLoopback else {
            throw .config("\(setting): the keys that admit users travel over https only: \(url)")
        }
        self.endpoint = endpoint
    }

    /// The document at the URL; anything but a 200 within 10 s is ``JobError/unavailable(_:)``.
    func read() async throws(JobError) -> String {
        let response: HTTP1Response
        do {
            response = try await HTTP1OneShot.exchange(
                host: endpoint.host, port: endpoint.port, tls: endpoint.tls, method: .GET, path: endpoint.path,
                headers: [("Accept", "application/json")],
                timeout: .seconds(10))
        } catch {
            throw .unavailable("\(ConfigKey.apiJWKSURL.rawValue): cannot read \(url): \(error)")
        }
        guard response.status == .ok else {
            throw .unavailable("\(ConfigKey.apiJWKSURL.rawValue): \(url) answered \(response.status.code)")
        }
        return String(decoding: response.body, as: UTF8.self)
    }
}

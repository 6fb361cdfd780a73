import Foundation
import JWTKit
import JobKit
import Logging

/// The app's own end-user JWTs (Supabase Auth, Firebase Auth, Auth0 all issue them), for an app that calls the API
/// with its signed-in user's token: verified against the configured HS256 secret or JWKS (`alg: none` and any
/// algorithm without a key are refused by jwt-kit), then its expiry, not-before, issuer and audience checked at
/// the server's clock. The user id is the configured claim (`sub` by default).
package struct AppUserTokens: Sendable {
    let keys: VerifyingKeys
    let issuer: String
    let audience: String
    let userClaim: String

    /// The verifier the settings describe, or nil when no JWT key is set (then only API keys are taken). A key
    /// without an issuer and an audience is a configuration error: a token from another project or app must
    /// not pass. A JWKS URL is read now; one that cannot be read stops the start-up.
    package static func resolve(
        _ config: ConfigResolver, flags: [ConfigKey: String] = [:], logger: Logger
    ) async throws(JobError) -> AppUserTokens? {
        func value(_ key: ConfigKey) throws(JobError) -> String? { try config.string(key, flag: flags[key]) }
        let secretFile = try value(.apiJWTSecretFile)
        let jwksFile = try value(.apiJWKSFile)
        let jwksURL = try value(.apiJWKSURL)
        guard secretFile != nil || jwksFile != nil || jwksURL != nil else { return nil }
        guard let issuer = try value(.apiJWTIssuer), let audience = try value(.apiJWTAudience) else {
            throw .config(
                "an end-user JWT key is set: also set \(ConfigKey.apiJWTIssuer.rawValue) and \(ConfigKey.apiJWTAudience.rawValue)"
            )
        }
        var secret: String?
        if let secretFile {
            secret = try read(secretFile, ConfigKey.apiJWTSecretFile).trimmingCharacters(in: .whitespacesAndNewlines)
            guard secret!.utf8.count >= 32 else {
                throw .config("\(ConfigKey.apiJWTSecretFile.rawValue): the secret is shorter than 32 bytes")
            }
        }
        let remote = try jwksURL.map { (url: String) throws(JobError) in
            try RemoteJWKS(url: url, caFile: try value(.caFile))
        }
        let keys = VerifyingKeys(
            secret: secret, jwks: try jwksFile.map { (path: String) throws(JobError) in try read(path, .apiJWKSFile) },
            remote: remote, logger: logger)
        try await keys.load()
        return AppUserTokens(
            keys: keys, issuer: issuer, audience: audience,
            userClaim: try value(.apiJWTUserClaim) ?? ConfigKey.apiJWTUserClaim.defaultValue!)
    }

    private static func read(_ path: String, _ key: ConfigKey) throws(JobError) -> String {
        do { return try String(contentsOfFile: path, encoding: .utf8) } catch {
            throw .noInput("\(key.rawValue): cannot read \(path)")
        }
    }

    /// The user id `token` was issued for, if it is valid at `now`; otherwise a 401 that says why (never the
    /// token).
    package func userID(_ token: String, now: Int64) async throws(APIProblem) -> String {
        let claims: Claims
        do {
            claims = try await keys.verify(token)
        } catch {
            throw APIProblem(.unauthorized, "the token's signature or algorithm is not accepted")
        }
        guard let exp = claims.number("exp") else { throw APIProblem(.unauthorized, "the token has no exp") }
        guard Double(now) < exp else { throw APIProblem(.unauthorized, "the token has expired") }
        if let nbf = claims.number("nbf"), Double(now) < nbf {
            throw APIProblem(.unauthorized, "the token is not valid yet (nbf)")
        }
        guard claims.string("iss") == issuer else {
            throw APIProblem(.unauthorized, "the token's issuer is not this app's")
        }
        let audiences = claims.strings("aud")
        guard audiences.contains(audience) else {
            throw APIProblem(.unauthorized, "the token's audience is not this API's")
        }
        guard let user = claims.string(userClaim), UserProfile.idProblem(user) == nil else {
            throw APIProblem(.unauthorized, "the token's \(userClaim) claim is not a user id")
        }
        return user
    }

    /// A payload's claims, whatever they are; ``userID(_:now:)`` checks the ones that matter.
    struct Claims: JWTPayload {
        let values: [String: JSONClaim]

        enum JSONClaim: Codable, Sendable {
            case string(String)
            case number(Double)
            case strings([String])
            case other

            init(from decoder: any Decoder) throws {
                let container = try decoder.singleValueContainer()
                if let text = try? container.decode(String.self) {
                    self = .string(text)
                } else if let number = try? container.decode(Double.self) {
                    self = .number(number)
                } else if let texts = try? container.decode([String].self) {
                    self = .strings(texts)
                } else {
                    self = .other
                }
            }

            func encode(to encoder: any Encoder) throws {}
        }

        struct Key: CodingKey {
            let stringValue: String
            var intValue: Int? { nil }
            init(stringValue: String) { self.stringValue = stringValue }
            init?(intValue: Int) { nil }
        }

        init(from decoder: any Decoder) throws {
            let container = try decoder.container(keyedBy: Key.self)
            var values: [String: JSONClaim] = [:]
            for key in container.allKeys { values[key.stringValue] = try container.decode(JSONClaim.self, forKey: key) }
            self.values = values
        }

        func encode(to encoder: any Encoder) throws {}

        /// The checks that need the server's clock are made by ``AppUserTokens/userID(_:now:)``.
        func verify(using algorithm: some JWTAlgorithm) async throws {}

        func string(_ name: String) -> String? {
            if case .string(let text) = values[name] { return text }
            return nil
        }

        func number(_ name: String) -> Double? {
            if case .number(let number) = values[name] { return number }
            return nil
        }

        /// A claim that is a string or an array of strings (`aud`).
        func strings(_ name: String) -> [String] {
            switch values[name] {
            case .string(let text): [text]
            case .strings(let texts): texts
            default: []
            }
        }
    }
}

/// Who is calling: a backend's API key (its id and scope), or an app's signed-in user.
package enum Caller: Sendable, Hashable {
    case key(id: String, scope: APIScope)
    case user(String)

    /// The caller as rate limits and idempotency keys are kept: `key <id>` or `user <id>`.
    var id: String {
        switch self {
        case .key(let id, _): "key \(id)"
        case .user(let id): "user \(id)"
        }
    }

    @TaskLocal static var current: Caller?

    /// Passes when the caller may act for user `id`: any key the operation's scopes let through, or that user's
    /// own token.
    static func mayActFor(_ id: String) throws(APIProblem) {
        if case .user(let user) = current, user != id {
            throw APIProblem(.forbidden, "a user's token acts for that user only")
        }
    }
}

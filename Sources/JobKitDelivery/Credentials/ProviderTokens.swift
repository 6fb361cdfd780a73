import Foundation
import JWTKit
import JobKit
import NIOCore
import NIOHPACK
import NIOSSL

/// Minting of provider credentials: the APNs provider JWT and the FCM OAuth2 access token.
enum ProviderTokens {
    /// JWT claims and dates as whole seconds (JWTKit writes fractions unless told otherwise, and Apple
    /// rejects a fractional `iat`).
    static var serializer: DefaultJWTSerializer {
        let encoder = JSONEncoder()
        encoder.dateEncodingStrategy = .integerSecondsSince1970
        return DefaultJWTSerializer(jsonEncoder: encoder)
    }

    struct APNsClaims: JWTPayload {
        let iss: IssuerClaim
        let iat: IssuedAtClaim
        func verify(using algorithm: some JWTAlgorithm) async throws {}
    }

    struct OAuthAssertion: JWTPayload {
        let iss: IssuerClaim
        let scope: String
        let aud: AudienceClaim
        let iat: IssuedAtClaim
        let exp: ExpirationClaim
        func verify(using algorithm: some JWTAlgorithm) async throws {}
    }

    /// APNs: reuse a token until it is 40 minutes old (Apple: refresh no more often than every 20 minutes,
    /// and before 60). A run started at 39 minutes still finishes well inside the hour.
    static let apnsReuseSeconds: Int64 = 40 * 60
    /// FCM: reuse an access token until 5 minutes before it expires.
    static let fcmExpiryMarginSeconds: Int64 = 5 * 60

    static func apnsKey(_ configuration: APNsConfiguration) async throws(JobError) -> JWTKeyCollection {
        let pem = String(decoding: try readInputFile(configuration.keyFile, what: "the APNs key file"), as: UTF8.self)
        let key: ES256PrivateKey
        do { key = try ES256PrivateKey(pem: pem) } catch {
            throw .config("\(configuration.keyFile) is not an APNs .p8 (P-256 private key) file")
        }
        let keys = JWTKeyCollection()
        await keys.add(ecdsa: key, kid: JWKIdentifier(string: configuration.keyID), serializer: serializer)
        return keys
    }

    static func mintAPNs(keys: JWTKeyCollection, configuration: APNsConfiguration, now: Int64) async throws(JobError)
        -> CachedCredential
    {
        do {
            let jwt = try await keys.sign(
                APNsClaims(
                    iss: IssuerClaim(value: configuration.teamID),
                    iat: IssuedAtClaim(value: Date(timeIntervalSince1970: TimeInterval(now)))),
                kid: JWKIdentifier(string: configuration.keyID))
            return CachedCredential(token: jwt, issuedAt: now, expiresAt: now + 3600)
        } catch {
            throw .config("could not sign the APNs provider token with key \(configuration.keyID)")
        }
    }

    static func serviceAccountKey(_ account: ServiceAccount) async throws(JobError) -> JWTKeyCollection {
        let key: Insecure.RSA.PrivateKey
        do { key = try Insecure.RSA.PrivateKey(pem: account.privateKey) } catch {
            throw .config("the service account's private_key is not an RSA private key")
        }
        let keys = JWTKeyCollection()
        await keys.add(
            rsa: key, digestAlgorithm: .sha256, kid: JWKIdentifier(string: account.privateKeyID),
            serializer: serializer)
        return keys
    }

    /// The JWT bearer grant: an RS256 assertion posted to the account's `token_uri`.
    static func mintFCM(keys: JWTKeyCollection, account: ServiceAccount, tls: NIOSSLContext, now: Int64)
        async throws(JobError) -> CachedCredential
    {
        guard let endpoint = Endpoint(url: account.tokenURI), let path = URLComponents(string: account.tokenURI)?.path
        else {
            throw .config("the service account's token_uri is not an https URL")
        }
        let assertion: String
        do {
            assertion = try await keys.sign(
                OAuthAssertion(
                    iss: IssuerClaim(value: account.clientEmail), scope: ServiceAccount.scope,
                    aud: AudienceClaim(value: [account.tokenURI]),
                    iat: IssuedAtClaim(value: Date(timeIntervalSince1970: TimeInterval(now))),
                    exp: ExpirationClaim(value: Date(timeIntervalSince1970: TimeInterval(now + 3600)))),
                kid: JWKIdentifier(string: account.privateKeyID))
        } catch {
            throw .config("could not sign the OAuth assertion for \(account.clientEmail)")
        }
        let form = "grant_type=urn%3Aietf%3Aparams%3Aoauth%3Agrant-type%3Ajwt-bearer&assertion=\(assertion)"
        let request = HTTP2Request(
            headers: [
                ":method": "POST", ":scheme": "https", ":path": path.isEmpty ? "/" : path,
                ":authority": endpoint.authority,
                "content-type": "application/x-www-form-urlencoded", "content-length": String(form.utf8.count),
            ], body: ByteBuffer(string: form))
        let connection: HTTP2Connection
        do {
            connection = try await HTTP2Connection.connect(to: endpoint, tls: tls, options: .init(streamCap: 1))
        } catch {
            throw .unavailable("cannot reach the OAuth token endpoint \(endpoint)")
        }
        let result = await connection.send([request]).first
        let cause = await connection.closeCause
        await connection.close()
        guard case .success(let response) = result else {
            throw .unavailable("no answer from the OAuth token endpoint \(endpoint)" + (cause.map { ": \($0)" } ?? ""))
        }
        struct TokenAnswer: Decodable {
            let access_token: String
            let expires_in: Int64
        }
        struct Refusal: Decodable {
            let error: String?
            let error_description: String?
        }
        let body = Data(response.body.readableBytesView)
        guard response.status == 200, let answer = try? JSONDecoder().decode(TokenAnswer.self, from: body) else {
            // The OAuth error code and its description (Google's never quote the assertion), cut short and
            // printable; nothing else of the answer.
            let refusal = try? JSONDecoder().decode(Refusal.self, from: body)
            let said = [refusal?.error, refusal?.error_description].compactMap { $0 }.joined(separator: ": ")
            let printable = String(
                said.unicodeScalars.filter { $0.value >= 0x20 && $0.value < 0x7F }.prefix(160).map(Character.init))
            let message =
                "the OAuth token endpoint refused the service account \(account.clientEmail) (HTTP \(response.status)"
                + (printable.isEmpty ? ")" : ": \(printable))")
            // A server error is the endpoint's trouble, not a verdict on our key.
            throw response.status >= 500 ? .unavailable(message) : .noPermission(message)
        }
        return CachedCredential(token: answer.access_token, issuedAt: now, expiresAt: now + answer.expires_in)
    }
}

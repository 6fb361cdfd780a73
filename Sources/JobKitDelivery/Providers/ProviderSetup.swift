import JobKit
import Logging
import NIOSSL

/// A configured provider, as its own file builds it: its settings (``APNsConfiguration``, ``FCMConfiguration``)
/// read from the `PUSH_*` settings, its key files checked, and its client (credential, request writer, answer
/// classifier) made. `PushSender` routes to the clients and knows no provider by name.
protocol ProviderSetup: Sendable {
    /// The provider it configures.
    var provider: Provider { get }
    /// Reads and parses its key files, so that a bad one is reported before anything is opened or written.
    func checkFiles() async throws(JobError)
    /// Its client, over what every provider shares (`shared`).
    func client(_ shared: SharedDelivery) async throws(JobError) -> ProviderClient
}

/// What every provider's client is built with: the TLS context, the credential cache, the clocks, the retry policy
/// and the payload settings of the configuration.
struct SharedDelivery: Sendable {
    let configuration: DeliveryConfiguration
    let tls: NIOSSLContext
    let credentials: any CredentialStore
    let logger: Logger

    /// The client of `provider`, given its protocol, its credential and its rate (of which it takes this runner's
    /// share, ``DeliveryConfiguration/share(of:)``).
    func client(
        _ provider: ProviderProtocol, credential: SharedCredential, rate: ProviderRate?
    ) -> ProviderClient {
        ProviderClient(
            provider: provider, credential: credential, tls: tls, policy: configuration.retry,
            rate: configuration.share(of: rate),
            deadTokenGuard: configuration.deadTokenGuard, clock: configuration.retryClock,
            jitter: configuration.retryJitter, logger: logger)
    }

    /// The credential cached in the store under `key`, minted by `mint` when `isFresh` says the cached one is not.
    func credential(
        key: String, isFresh: @escaping @Sendable (CachedCredential, Int64) -> Bool,
        mint: @escaping @Sendable (Int64) async throws(JobError) -> CachedCredential
    ) -> SharedCredential {
        SharedCredential(
            key: key, store: credentials, clock: configuration.credentialClock, waitClock: configuration.retryClock,
            isFresh: isFresh, logger: logger, mint: mint)
    }
}

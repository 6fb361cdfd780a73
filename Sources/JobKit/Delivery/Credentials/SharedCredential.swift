import Foundation

/// A provider credential (an APNs provider JWT, an FCM access token) as cached in the store.
public struct CachedCredential: Sendable, Hashable {
    public let token: String
    public let issuedAt: Int64
    public let expiresAt: Int64

    public init(token: String, issuedAt: Int64, expiresAt: Int64) {
        self.token = token
        self.issuedAt = issuedAt
        self.expiresAt = expiresAt
    }
}

/// What a run should do about a credential that is missing or stale.
public enum MintDecision: Sendable, Hashable {
    /// Another run minted a fresh one meanwhile: use it.
    case use(CachedCredential)
    /// This run holds the mint lease: mint, then ``CredentialStore/finishMint(key:holder:credential:)``.
    case mint
    /// Another run holds the lease: wait and look again.
    case wait
}

/// Where credentials are shared between runs (and hosts). The store is the cache: a cron run every 15
/// minutes and a hook per write reuse one token instead of each minting its own (Apple answers
/// `TooManyProviderTokenUpdates` to tokens refreshed more often than every 20 minutes).
public protocol CredentialStore: Sendable {
    func cachedCredential(key: String) async throws(JobError) -> CachedCredential?
    /// Atomically: returns `.use` if the cached credential is fresh, `.wait` if another holder's lease is
    /// running, else takes the lease for `holder` until `now + leaseSeconds` and returns `.mint`.
    func beginMint(key: String, holder: String, now: Int64, leaseSeconds: Int64,
                   isFresh: @escaping @Sendable (CachedCredential) -> Bool) async throws(JobError) -> MintDecision
    /// Stores the new credential and releases the lease.
    func finishMint(key: String, holder: String, credential: CachedCredential) async throws(JobError)
}

/// One credential shared through a ``CredentialStore``: reused while fresh, minted by one run at a time.
actor SharedCredential {
    let key: String
    private let store: any CredentialStore
    private let clock: @Sendable () -> Int64
    private let isFresh: @Sendable (CachedCredential, Int64) -> Bool
    private let mint: @Sendable (Int64) async throws(JobError) -> CachedCredential
    private let holder = UUID().uuidString
    private var current: CachedCredential?

    init(key: String, store: any CredentialStore, clock: @escaping @Sendable () -> Int64,
         isFresh: @escaping @Sendable (CachedCredential, Int64) -> Bool,
         mint: @escaping @Sendable (Int64) async throws(JobError) -> CachedCredential) {
        self.key = key
        self.store = store
        self.clock = clock
        self.isFresh = isFresh
        self.mint = mint
    }

    /// A fresh credential. With `rejected`, that token is not reused (the provider refused it).
    func get(rejected: String? = nil) async throws(JobError) -> CachedCredential {
        let now = clock()
        let isFresh = self.isFresh
        let usable: @Sendable (CachedCredential) -> Bool = { $0.token != rejected && isFresh($0, now) }
        if let current, usable(current) { return current }
        if let cached = try await store.cachedCredential(key: key), usable(cached) {
            current = cached
            return cached
        }
        let waitUntil = ContinuousClock.now + .seconds(30)
        while true {
            switch try await store.beginMint(key: key, holder: holder, now: clock(), leaseSeconds: 30, isFresh: usable) {
            case .use(let credential):
                current = credential
                return credential
            case .mint:
                let credential = try await mint(clock())
                try await store.finishMint(key: key, holder: holder, credential: credential)
                current = credential
                return credential
            case .wait:
                guard ContinuousClock.now < waitUntil else {
                    throw .tempFailure("timed out waiting for another run to mint the \(key) credential")
                }
                try? await Task.sleep(for: .milliseconds(100))
            }
        }
    }
}

import Foundation
import JobKit
import Logging

/// One credential shared through a ``CredentialStore``: reused while fresh, minted by one run at a time.
///
/// The store is only a cache: a store that cannot be read or written (a locked database) costs at most one
/// more mint, never the credential. A mint that fails releases its lease at once, so that nobody waits on a
/// lease whose holder has given up.
actor SharedCredential {
    let key: String
    private let store: any CredentialStore
    private let clock: @Sendable () -> Int64
    /// What the wait for another holder's mint is kept on; a manual clock in tests.
    private let waitClock: any RetryClock
    private let isFresh: @Sendable (CachedCredential, Int64) -> Bool
    private let mint: @Sendable (Int64) async throws(JobError) -> CachedCredential
    private let logger: Logger
    private let holder = UUID().uuidString
    private var current: CachedCredential?
    /// The look-up or mint under way: concurrent callers of this process (pages in delivery at once) join it
    /// instead of each minting their own.
    private var refreshing: Task<Result<CachedCredential, JobError>, Never>?
    /// Credentials this process minted (successfully): a metric, and the sign of a refused credential.
    private(set) var mints = 0
    /// How long a run waits for another holder's mint before minting its own.
    static let leaseSeconds: Int64 = 30

    init(
        key: String, store: any CredentialStore, clock: @escaping @Sendable () -> Int64,
        waitClock: any RetryClock = SystemRetryClock(),
        isFresh: @escaping @Sendable (CachedCredential, Int64) -> Bool, logger: Logger = Logger(label: "diary-push"),
        mint: @escaping @Sendable (Int64) async throws(JobError) -> CachedCredential
    ) {
        self.key = key
        self.store = store
        self.clock = clock
        self.waitClock = waitClock
        self.isFresh = isFresh
        self.logger = logger
        self.mint = mint
    }

    /// A fresh credential. With `rejected`, that token is not reused (the provider refused it).
    func get(rejected: String? = nil) async throws(JobError) -> CachedCredential {
        let now = clock()
        let isFresh = self.isFresh
        let usable: @Sendable (CachedCredential) -> Bool = { $0.token != rejected && isFresh($0, now) }
        if let current, usable(current) { return current }
        if let refreshing, case .success(let credential) = await refreshing.value, usable(credential) {
            return credential
        }
        let task = Task { await self.refresh(usable) }
        refreshing = task
        let result = await task.value
        if refreshing == task { refreshing = nil }
        return try result.get()
    }

    private func refresh(_ usable: @escaping @Sendable (CachedCredential) -> Bool) async -> Result<
        CachedCredential, JobError
    > {
        do throws(JobError) { return .success(try await fetchOrMint(usable)) } catch { return .failure(error) }
    }

    /// The cached credential if usable, else one minted under the store's lease (or waited for).
    private func fetchOrMint(_ usable: @escaping @Sendable (CachedCredential) -> Bool) async throws(JobError)
        -> CachedCredential
    {
        do {
            if let cached = try await store.cachedCredential(key: key), usable(cached) {
                current = cached
                return cached
            }
        } catch {
            logger.warning(
                "cannot read the cached credential: minting one",
                metadata: [
                    "credential": "\(key)", "reason": "\(error.message)",
                ])
            return try await mintWithoutLease()
        }
        let waitUntil = Deadline.after(.seconds(Self.leaseSeconds), on: waitClock)
        while true {
            let decision: MintDecision
            do {
                decision = try await store.beginMint(
                    key: key, holder: holder, now: clock(), leaseSeconds: Self.leaseSeconds,
                    isFresh: usable)
            } catch {
                logger.warning(
                    "cannot lease the credential in the store: minting one",
                    metadata: [
                        "credential": "\(key)", "reason": "\(error.message)",
                    ])
                return try await mintWithoutLease()
            }
            switch decision {
            case .use(let credential):
                current = credential
                return credential
            case .mint:
                let credential: CachedCredential
                do {
                    credential = try await mint(clock())
                    mints += 1
                } catch {
                    try? await store.abandonMint(key: key, holder: holder)
                    throw error
                }
                current = credential
                do {
                    try await store.finishMint(key: key, holder: holder, credential: credential)
                } catch {
                    // Used all the same; the next run mints again when its lease check allows.
                    logger.warning(
                        "cannot cache the new credential in the store",
                        metadata: [
                            "credential": "\(key)", "reason": "\(error.message)",
                        ])
                }
                return credential
            case .wait:
                // A holder whose lease outlasts it (its host's clock runs ahead, or it hangs) costs one more mint,
                // never the provider.
                guard !waitUntil.hasPassed else {
                    logger.warning(
                        "another run's mint of the credential is taking too long: minting one",
                        metadata: ["credential": "\(key)", "waited_seconds": "\(Self.leaseSeconds)"])
                    return try await mintWithoutLease()
                }
                await waitClock.sleep(for: .milliseconds(100))
            }
        }
    }

    /// A mint when the store cannot be used as the cache: costs one more mint than sharing would.
    private func mintWithoutLease() async throws(JobError) -> CachedCredential {
        let credential = try await mint(clock())
        mints += 1
        current = credential
        try? await store.finishMint(key: key, holder: holder, credential: credential)
        return credential
    }
}

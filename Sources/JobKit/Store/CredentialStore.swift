import Foundation
import Logging

/// A provider credential (an APNs provider JWT, an FCM access token) as cached in the store.
package struct CachedCredential: Sendable, Hashable {
    package let token: String
    package let issuedAt: Int64
    package let expiresAt: Int64

    package init(token: String, issuedAt: Int64, expiresAt: Int64) {
        self.token = token
        self.issuedAt = issuedAt
        self.expiresAt = expiresAt
    }
}

/// What a run should do about a credential that is missing or stale.
package enum MintDecision: Sendable, Hashable {
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
package protocol CredentialStore: Sendable {
    func cachedCredential(key: String) async throws(JobError) -> CachedCredential?
    /// Atomically: returns `.use` if the cached credential is fresh, `.wait` if another holder's lease is
    /// running, else takes the lease for `holder` until `now + leaseSeconds` and returns `.mint`.
    func beginMint(
        key: String, holder: String, now: Int64, leaseSeconds: Int64,
        isFresh: @escaping @Sendable (CachedCredential) -> Bool
    ) async throws(JobError) -> MintDecision
    /// Stores the new credential and releases the lease.
    func finishMint(key: String, holder: String, credential: CachedCredential) async throws(JobError)
    /// Releases `holder`'s lease without a credential (the mint failed), so that the next run or hook
    /// mints at once instead of waiting for the lease to run out. Another holder's lease is left alone.
    func abandonMint(key: String, holder: String) async throws(JobError)
}

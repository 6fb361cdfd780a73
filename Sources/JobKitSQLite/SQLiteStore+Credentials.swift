import GRDB
import JobKit

extension SQLiteStore: CredentialStore {
    package func cachedCredential(key: String) async throws(JobError) -> CachedCredential? {
        try await read("reading a provider credential") { db in
            try Row.fetchOne(
                db,
                sql: """
                    SELECT token, issued_at, expires_at FROM provider_credentials WHERE credential_key = ? AND token IS NOT NULL
                    """, arguments: [key]
            ).map { CachedCredential(token: $0[0], issuedAt: $0[1], expiresAt: $0[2]) }
        }
    }

    package func beginMint(
        key: String, holder: String, now: Int64, leaseSeconds: Int64,
        isFresh: @escaping @Sendable (CachedCredential) -> Bool
    ) async throws(JobError) -> MintDecision {
        try await write("leasing a provider credential") { db in
            let row = try Row.fetchOne(
                db,
                sql: """
                    SELECT token, issued_at, expires_at, minting_by, minting_until FROM provider_credentials
                    WHERE credential_key = ?
                    """, arguments: [key])
            if let row, let token: String = row[0] {
                let credential = CachedCredential(token: token, issuedAt: row[1], expiresAt: row[2])
                if isFresh(credential) { return .use(credential) }
            }
            if let row, let by: String = row[3], by != holder, let until: Int64 = row[4], until > now {
                return .wait
            }
            try db.execute(
                sql: """
                    INSERT INTO provider_credentials (credential_key, minting_by, minting_until, updated_at) VALUES (?, ?, ?, ?)
                    ON CONFLICT (credential_key) DO UPDATE SET minting_by = excluded.minting_by,
                        minting_until = excluded.minting_until, updated_at = excluded.updated_at
                    """, arguments: [key, holder, now + leaseSeconds, now])
            return .mint
        }
    }

    package func finishMint(key: String, holder: String, credential: CachedCredential) async throws(JobError) {
        try await write("storing a provider credential") { db in
            try db.execute(
                sql: """
                    UPDATE provider_credentials
                    SET token = ?, issued_at = ?, expires_at = ?, minting_by = NULL, minting_until = NULL, updated_at = ?
                    WHERE credential_key = ?
                    """,
                arguments: [credential.token, credential.issuedAt, credential.expiresAt, credential.issuedAt, key])
        }
    }

    package func abandonMint(key: String, holder: String) async throws(JobError) {
        try await write("releasing a provider credential lease") { db in
            try db.execute(
                sql: """
                    UPDATE provider_credentials SET minting_by = NULL, minting_until = NULL
                    WHERE credential_key = ? AND minting_by = ?
                    """, arguments: [key, holder])
        }
    }
}

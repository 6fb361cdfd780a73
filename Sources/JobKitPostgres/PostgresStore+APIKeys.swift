import JobKit
import PostgresNIO

extension PostgresStore: APIKeyStore {
    package func insertAPIKey(_ record: APIKeyRecord, secretSHA256: String) async throws(JobError) {
        _ = try await write(
            "creating an API key",
            """
            INSERT INTO api_keys (id, name, scope, secret_sha256, created_at)
            VALUES (\(record.id), \(record.name), \(record.scope.rawValue), \(secretSHA256), to_timestamp(\(record.createdAt)))
            """)
    }

    package func apiKey(id: String) async throws(JobError) -> (scope: APIScope, secretSHA256: String, revoked: Bool)? {
        let rows = try await rows(
            "reading an API key",
            "SELECT scope, secret_sha256, revoked_at IS NOT NULL FROM api_keys WHERE id = \(id)")
        guard let row = rows.first else { return nil }
        do {
            let (scope, hash, revoked) = try row.decode((String, String, Bool).self)
            return APIScope(rawValue: scope).map { ($0, hash, revoked) }
        } catch {
            throw Self.mapError(error, "reading an API key", location: location)
        }
    }

    package func apiKeys() async throws(JobError) -> [APIKeyRecord] {
        let rows = try await rows(
            "listing API keys",
            """
            SELECT id, name, scope, \(unescaped: Self.epoch("created_at")), \(unescaped: Self.epoch("revoked_at"))
            FROM api_keys ORDER BY created_at, id
            """)
        do {
            return try rows.compactMap { row in
                let (id, name, scope, created, revoked) = try row.decode((String, String, String, Int64, Int64?).self)
                return APIScope(rawValue: scope).map {
                    APIKeyRecord(id: id, name: name, scope: $0, createdAt: created, revokedAt: revoked)
                }
            }
        } catch {
            throw Self.mapError(error, "listing API keys", location: location)
        }
    }

    package func revokeAPIKey(id: String, now: Int64) async throws(JobError) -> Bool {
        try await changed(
            "revoking an API key",
            "UPDATE api_keys SET revoked_at = to_timestamp(\(now)) WHERE id = \(id) AND revoked_at IS NULL RETURNING 1"
        ) > 0
    }
}

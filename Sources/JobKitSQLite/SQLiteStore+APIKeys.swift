import GRDB
import JobKit

extension SQLiteStore: APIKeyStore {
    package func insertAPIKey(_ record: APIKeyRecord, secretSHA256: String) async throws(JobError) {
        try await write("creating an API key") { db in
            try db.execute(
                sql: "INSERT INTO api_keys (id, name, scope, secret_sha256, created_at) VALUES (?, ?, ?, ?, ?)",
                arguments: [record.id, record.name, record.scope.rawValue, secretSHA256, record.createdAt])
        }
    }

    package func apiKey(id: String) async throws(JobError) -> (scope: APIScope, secretSHA256: String, revoked: Bool)? {
        let row = try await read("reading an API key") { db -> (String, String, Bool)? in
            try Row.fetchOne(
                db, sql: "SELECT scope, secret_sha256, revoked_at IS NOT NULL FROM api_keys WHERE id = ?",
                arguments: [id]
            ).map { ($0[0], $0[1], $0[2]) }
        }
        guard let row, let scope = APIScope(rawValue: row.0) else { return nil }
        return (scope, row.1, row.2)
    }

    package func apiKeys() async throws(JobError) -> [APIKeyRecord] {
        try await read("listing API keys") { db in
            try Row.fetchAll(
                db, sql: "SELECT id, name, scope, created_at, revoked_at FROM api_keys ORDER BY created_at, id"
            ).compactMap { row in
                APIScope(rawValue: row[2]).map {
                    APIKeyRecord(id: row[0], name: row[1], scope: $0, createdAt: row[3], revokedAt: row[4])
                }
            }
        }
    }

    package func revokeAPIKey(id: String, now: Int64) async throws(JobError) -> Bool {
        try await write("revoking an API key") { db in
            try db.execute(
                sql: "UPDATE api_keys SET revoked_at = ? WHERE id = ? AND revoked_at IS NULL", arguments: [now, id])
            return db.changesCount > 0
        }
    }
}

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

extension SQLiteStore: IdempotencyStore {
    package func idempotencyRecord(caller: String, key: String) async throws(JobError) -> IdempotencyRecord? {
        try await read("reading an idempotency key") { db -> IdempotencyRecord? in
            try Row.fetchOne(
                db,
                sql: """
                    SELECT request_sha256, status, response, created_at FROM api_idempotency
                    WHERE caller = ? AND key = ?
                    """, arguments: [caller, key]
            ).map { IdempotencyRecord(requestSHA256: $0[0], status: $0[1], response: $0[2], createdAt: $0[3]) }
        }
    }

    package func insertIdempotency(caller: String, key: String, _ record: IdempotencyRecord) async throws(JobError)
        -> Bool
    {
        try await write("claiming an idempotency key") { db in
            try db.execute(
                sql: """
                    INSERT INTO api_idempotency (caller, key, request_sha256, status, response, created_at)
                    VALUES (?, ?, ?, ?, ?, ?) ON CONFLICT DO NOTHING
                    """,
                arguments: [caller, key, record.requestSHA256, record.status, record.response, record.createdAt])
            return db.changesCount > 0
        }
    }

    package func replaceIdempotency(caller: String, key: String, createdAt: Int64, with record: IdempotencyRecord)
        async throws(JobError) -> Bool
    {
        try await write("taking over an idempotency key") { db in
            try db.execute(
                sql: """
                    UPDATE api_idempotency SET request_sha256 = ?, status = ?, response = ?, created_at = ?
                    WHERE caller = ? AND key = ? AND created_at = ?
                    """,
                arguments: [
                    record.requestSHA256, record.status, record.response, record.createdAt, caller, key, createdAt,
                ])
            return db.changesCount > 0
        }
    }

    package func finishIdempotency(caller: String, key: String, status: Int, response: String) async throws(JobError) {
        try await write("recording an idempotent answer") { db in
            try db.execute(
                sql: "UPDATE api_idempotency SET status = ?, response = ? WHERE caller = ? AND key = ?",
                arguments: [status, response, caller, key])
        }
    }

    package func deleteIdempotency(caller: String, key: String) async throws(JobError) {
        try await write("forgetting an idempotency key") { db in
            try db.execute(sql: "DELETE FROM api_idempotency WHERE caller = ? AND key = ?", arguments: [caller, key])
        }
    }

    package func deleteIdempotency(createdBefore before: Int64) async throws(JobError) -> Int {
        try await write("deleting old idempotency keys") { db in
            try db.execute(sql: "DELETE FROM api_idempotency WHERE created_at < ?", arguments: [before])
            return db.changesCount
        }
    }
}

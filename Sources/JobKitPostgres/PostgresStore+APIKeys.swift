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

extension PostgresStore: IdempotencyStore {
    package func idempotencyRecord(caller: String, key: String) async throws(JobError) -> IdempotencyRecord? {
        let rows = try await rows(
            "reading an idempotency key",
            """
            SELECT request_sha256, status, response, \(unescaped: Self.epoch("created_at"))
            FROM api_idempotency WHERE caller = \(caller) AND key = \(key)
            """)
        guard let row = rows.first else { return nil }
        do {
            let (hash, status, response, created) = try row.decode((String, Int, String?, Int64).self)
            return IdempotencyRecord(requestSHA256: hash, status: status, response: response, createdAt: created)
        } catch {
            throw Self.mapError(error, "reading an idempotency key", location: location)
        }
    }

    package func insertIdempotency(caller: String, key: String, _ record: IdempotencyRecord) async throws(JobError)
        -> Bool
    {
        try await changed(
            "claiming an idempotency key",
            """
            INSERT INTO api_idempotency (caller, key, request_sha256, status, response, created_at)
            VALUES (\(caller), \(key), \(record.requestSHA256), \(record.status), \(record.response),
                    to_timestamp(\(record.createdAt)))
            ON CONFLICT DO NOTHING RETURNING 1
            """) > 0
    }

    package func replaceIdempotency(caller: String, key: String, createdAt: Int64, with record: IdempotencyRecord)
        async throws(JobError) -> Bool
    {
        try await changed(
            "taking over an idempotency key",
            """
            UPDATE api_idempotency SET request_sha256 = \(record.requestSHA256), status = \(record.status),
                   response = \(record.response), created_at = to_timestamp(\(record.createdAt))
            WHERE caller = \(caller) AND key = \(key) AND created_at = to_timestamp(\(createdAt))
            RETURNING 1
            """) > 0
    }

    package func finishIdempotency(caller: String, key: String, status: Int, response: String) async throws(JobError) {
        _ = try await changed(
            "recording an idempotent answer",
            """
            UPDATE api_idempotency SET status = \(status), response = \(response)
            WHERE caller = \(caller) AND key = \(key) RETURNING 1
            """)
    }

    package func deleteIdempotency(caller: String, key: String) async throws(JobError) {
        _ = try await changed(
            "forgetting an idempotency key",
            "DELETE FROM api_idempotency WHERE caller = \(caller) AND key = \(key) RETURNING 1")
    }

    package func deleteIdempotency(createdBefore before: Int64) async throws(JobError) -> Int {
        try await changed(
            "deleting old idempotency keys",
            "DELETE FROM api_idempotency WHERE created_at < to_timestamp(\(before)) RETURNING 1")
    }
}

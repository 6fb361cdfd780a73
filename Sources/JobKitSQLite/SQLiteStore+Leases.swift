import GRDB
import JobKit

extension SQLiteStore: DueSetLeases {
    package func openLeases(runKey: String, buckets: Int, now: Int64) async throws(JobError) {
        try await write("opening the run's due-set leases") { db in
            try db.execute(sql: "DELETE FROM due_set_leases WHERE expires_at < ?", arguments: [now - 86_400])
            try db.execute(
                sql: """
                    WITH RECURSIVE b(n) AS (SELECT 0 UNION ALL SELECT n + 1 FROM b WHERE n + 1 < ?)
                    INSERT OR IGNORE INTO due_set_leases (run_key, bucket, expires_at) SELECT ?, n, ? FROM b
                    """, arguments: [buckets, runKey, now])
        }
    }

    package func leaseBucket(runKey: String, holder: String, now: Int64, until: Int64) async throws(JobError) -> Int? {
        try await write("leasing a bucket of the due set") { db in
            try Int.fetchOne(
                db,
                sql: """
                    UPDATE due_set_leases SET holder = ?, expires_at = ?
                    WHERE run_key = ? AND bucket = (
                        SELECT bucket FROM due_set_leases
                        WHERE run_key = ? AND finished_at IS NULL AND expires_at <= ? ORDER BY bucket LIMIT 1)
                    RETURNING bucket
                    """, arguments: [holder, until, runKey, runKey, now])
        }
    }

    package func finishBucket(runKey: String, bucket: Int, holder: String, now: Int64) async throws(JobError) {
        try await write("finishing a bucket of the due set") { db in
            try db.execute(
                sql: "UPDATE due_set_leases SET finished_at = ? WHERE run_key = ? AND bucket = ? AND holder = ?",
                arguments: [now, runKey, bucket, holder])
        }
    }

    package func releaseBucket(runKey: String, bucket: Int, holder: String, freeFrom: Int64) async throws(JobError) {
        try await write("giving back a bucket of the due set") { db in
            try db.execute(
                sql: """
                    UPDATE due_set_leases SET holder = NULL, expires_at = ?
                    WHERE run_key = ? AND bucket = ? AND holder = ? AND finished_at IS NULL
                    """, arguments: [freeFrom, runKey, bucket, holder])
        }
    }
}

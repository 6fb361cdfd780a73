import JobKit
import PostgresNIO

extension PostgresStore: DueSetLeases {
    package func openLeases(runKey: String, buckets: Int, now: Int64) async throws(JobError) {
        _ = try await write(
            "opening the run's due-set leases",
            """
            WITH forgotten AS (DELETE FROM due_set_leases WHERE expires_at < to_timestamp(\(now - 86_400)))
            INSERT INTO due_set_leases (run_key, bucket, expires_at)
            SELECT \(runKey), b, to_timestamp(\(now)) FROM generate_series(0, \(buckets - 1)) b
            ON CONFLICT DO NOTHING
            """)
    }

    /// `SKIP LOCKED`: runners asking at once get different buckets, without waiting for each other. The free
    /// bucket is a scalar subquery (evaluated once): written as a join to a `LIMIT 1` subquery, the planner
    /// could run that subquery once per row and lease every bucket at once.
    package func leaseBucket(runKey: String, holder: String, now: Int64, until: Int64) async throws(JobError) -> Int? {
        let rows = try await write(
            "leasing a bucket of the due set",
            """
            UPDATE due_set_leases SET holder = \(holder), expires_at = to_timestamp(\(until))
            WHERE run_key = \(runKey) AND bucket = (
                SELECT bucket FROM due_set_leases
                WHERE run_key = \(runKey) AND finished_at IS NULL AND expires_at <= to_timestamp(\(now))
                ORDER BY bucket LIMIT 1 FOR UPDATE SKIP LOCKED)
            RETURNING bucket
            """)
        guard let row = rows.first else { return nil }
        let bucket: Int32 = try decode(row, Int32.self)
        return Int(bucket)
    }

    package func finishBucket(runKey: String, bucket: Int, holder: String, now: Int64) async throws(JobError) {
        _ = try await write(
            "finishing a bucket of the due set",
            """
            UPDATE due_set_leases SET finished_at = to_timestamp(\(now))
            WHERE run_key = \(runKey) AND bucket = \(Int32(bucket)) AND holder = \(holder)
            """)
    }

    package func releaseBucket(runKey: String, bucket: Int, holder: String, freeFrom: Int64) async throws(JobError) {
        _ = try await write(
            "giving back a bucket of the due set",
            """
            UPDATE due_set_leases SET holder = NULL, expires_at = to_timestamp(\(freeFrom))
            WHERE run_key = \(runKey) AND bucket = \(Int32(bucket)) AND holder = \(holder) AND finished_at IS NULL
            """)
    }
}

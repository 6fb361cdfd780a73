import JobKit
import PostgresNIO

extension PostgresStore: WaitingDevices {
    package func keepWaitingDevice(token: String, userID: String, registration: String, now: Int64)
        async throws(JobError)
    {
        _ = try await changed(
            "keeping a waiting device",
            """
            INSERT INTO waiting_devices (token, user_id, registration, received_at)
            VALUES (\(token), \(userID), \(registration), to_timestamp(\(now)))
            ON CONFLICT (token) DO UPDATE SET
                user_id = excluded.user_id, registration = excluded.registration, received_at = excluded.received_at
            RETURNING 1
            """)
    }

    package func takeWaitingDevices(userID: String) async throws(JobError) -> [String] {
        var kept: [(Int64, String, String)] = []
        for row in try await rows(
            "taking waiting devices",
            """
            DELETE FROM waiting_devices WHERE user_id = \(userID)
            RETURNING extract(epoch FROM received_at)::int8, token, registration
            """)
        {
            kept.append(try decode(row, (Int64, String, String).self))
        }
        return kept.sorted { ($0.0, $0.1) < ($1.0, $1.1) }.map(\.2)
    }

    package func dropWaitingDevice(token: String, userID: String) async throws(JobError) -> Bool {
        try await changed(
            "dropping a waiting device",
            "DELETE FROM waiting_devices WHERE token IN (\(token), lower(\(token))) AND user_id = \(userID) RETURNING 1"
        ) > 0
    }
}

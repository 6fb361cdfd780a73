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

    package func takeWaiting(userID: String) async throws(JobError) -> WaitingForUser {
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
        let user = try await rows(
            "taking a waiting user",
            "DELETE FROM waiting_users WHERE user_id = \(userID) RETURNING extract(epoch FROM entry_at)::int8"
        ).first
        var entryAt: Int64?
        if let user { entryAt = try decode(user, Int64?.self) }
        return WaitingForUser(
            devices: kept.sorted { ($0.0, $0.1) < ($1.0, $1.1) }.map(\.2), entryAt: entryAt,
            found: user != nil || !kept.isEmpty)
    }

    package func keepWaitingUser(userID: String, profileAt: Int64?, entryAt: Int64?) async throws(JobError) {
        _ = try await changed(
            "keeping what waits for a user",
            """
            INSERT INTO waiting_users AS w (user_id, profile_at, entry_at)
            VALUES (\(userID), to_timestamp(\(profileAt)), to_timestamp(\(entryAt)))
            ON CONFLICT (user_id) DO UPDATE SET
                profile_at = coalesce(excluded.profile_at, w.profile_at),
                entry_at = greatest(excluded.entry_at, w.entry_at)
            RETURNING 1
            """)
    }

    /// What waits for `userID` and, where the SQL mirror is installed, their row in the app's users table (read by
    /// the mirror's `integration_user_row`, which the jobs' role may call).
    package func notPushUser(userID: String) async throws(JobError) -> NotPushUser? {
        guard
            let row = try await rows(
                "reading what waits for a user",
                """
                SELECT (SELECT extract(epoch FROM profile_at)::int8 FROM waiting_users WHERE user_id = \(userID)),
                       (SELECT count(*) FROM waiting_devices WHERE user_id = \(userID))::int8,
                       EXISTS (SELECT 1 FROM waiting_users WHERE user_id = \(userID) AND entry_at IS NOT NULL),
                       to_regprocedure('integration_user_row(text)') IS NOT NULL
                """
            ).first
        else { return nil }
        let (profileAt, devices, entry, mirrored) = try decode(row, (Int64?, Int64, Bool, Bool).self)
        var zone: String?
        if mirrored,
            let answer = try await rows("reading the app's row of a user", "SELECT integration_user_row(\(userID))")
                .first
        {
            zone = try decode(answer, String?.self)
        }
        return NotPushUser.from(
            profileReceivedAt: profileAt, waitingDevices: Int(devices), waitingEntry: entry, appRowZone: zone)
    }

    package func dropWaitingDevice(token: String, userID: String) async throws(JobError) -> Bool {
        try await changed(
            "dropping a waiting device",
            "DELETE FROM waiting_devices WHERE token IN (\(token), lower(\(token))) AND user_id = \(userID) RETURNING 1"
        ) > 0
    }
}

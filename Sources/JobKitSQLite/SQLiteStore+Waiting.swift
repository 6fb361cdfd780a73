import GRDB
import JobKit

extension SQLiteStore: WaitingDevices {
    package func keepWaitingDevice(token: String, userID: String, registration: String, now: Int64)
        async throws(JobError)
    {
        try await write("keeping a waiting device") { db in
            try db.execute(
                sql: """
                    INSERT INTO waiting_devices (token, user_id, registration, received_at) VALUES (?, ?, ?, ?)
                    ON CONFLICT (token) DO UPDATE SET
                        user_id = excluded.user_id, registration = excluded.registration, received_at = excluded.received_at
                    """, arguments: [token, userID, registration, now])
        }
    }

    package func takeWaiting(userID: String) async throws(JobError) -> WaitingForUser {
        try await write("taking what waits for a user") { db in
            let devices = try String.fetchAll(
                db, sql: "SELECT registration FROM waiting_devices WHERE user_id = ? ORDER BY received_at, token",
                arguments: [userID])
            let user = try Row.fetchOne(
                db, sql: "SELECT entry_at FROM waiting_users WHERE user_id = ?", arguments: [userID])
            try db.execute(sql: "DELETE FROM waiting_devices WHERE user_id = ?", arguments: [userID])
            try db.execute(sql: "DELETE FROM waiting_users WHERE user_id = ?", arguments: [userID])
            let entryAt: Int64? = user.flatMap { $0["entry_at"] }
            return WaitingForUser(devices: devices, entryAt: entryAt, found: user != nil || !devices.isEmpty)
        }
    }

    package func keepWaitingUser(userID: String, profileAt: Int64?, entryAt: Int64?) async throws(JobError) {
        try await write("keeping what waits for a user") { db in
            try db.execute(
                sql: """
                    INSERT INTO waiting_users (user_id, profile_at, entry_at) VALUES (?, ?, ?)
                    ON CONFLICT (user_id) DO UPDATE SET
                        profile_at = coalesce(excluded.profile_at, profile_at),
                        entry_at = CASE WHEN entry_at IS NULL OR excluded.entry_at > entry_at
                                        THEN coalesce(excluded.entry_at, entry_at) ELSE entry_at END
                    """, arguments: [userID, profileAt, entryAt])
        }
    }

    /// What waits for `userID` (SQLite has no SQL mirror: the app's row is not the store's to read).
    package func notPushUser(userID: String) async throws(JobError) -> NotPushUser? {
        try await read("reading what waits for a user") { db in
            let waiting = try Row.fetchOne(
                db, sql: "SELECT profile_at, entry_at IS NOT NULL FROM waiting_users WHERE user_id = ?",
                arguments: [userID])
            let devices =
                try Int.fetchOne(db, sql: "SELECT count(*) FROM waiting_devices WHERE user_id = ?", arguments: [userID])
                ?? 0
            return NotPushUser.from(
                profileReceivedAt: waiting?[0], waitingDevices: devices, waitingEntry: waiting?[1] ?? false,
                appRowZone: nil)
        }
    }

    package func dropWaitingDevice(token: String, userID: String) async throws(JobError) -> Bool {
        try await write("dropping a waiting device") { db in
            try db.execute(
                sql: "DELETE FROM waiting_devices WHERE token IN (?, lower(?)) AND user_id = ?",
                arguments: [token, token, userID])
            return db.changesCount > 0
        }
    }
}

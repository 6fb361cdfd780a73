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

    package func takeWaitingDevices(userID: String) async throws(JobError) -> [String] {
        try await write("taking waiting devices") { db in
            let kept = try String.fetchAll(
                db, sql: "SELECT registration FROM waiting_devices WHERE user_id = ? ORDER BY received_at, token",
                arguments: [userID])
            try db.execute(sql: "DELETE FROM waiting_devices WHERE user_id = ?", arguments: [userID])
            return kept
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

import GRDB
import JobKit

extension SQLiteStore: DeviceHolds {
    package func holdDevices(_ holds: [DeviceHold], runID: String, now: Int64) async throws(JobError) {
        guard !holds.isEmpty else { return }
        try await write("holding devices") { db in
            let statement = try db.cachedStatement(
                sql: """
                    INSERT INTO device_holds (device_id, provider, reason, held_at, run_id)
                    SELECT id, ?, ?, ?, ? FROM user_devices WHERE id = ?
                    ON CONFLICT (device_id) DO UPDATE SET
                        provider = excluded.provider, reason = excluded.reason, held_at = excluded.held_at,
                        run_id = excluded.run_id
                    """)
            for hold in holds {
                try statement.execute(arguments: [hold.provider.rawValue, hold.reason, now, runID, hold.deviceID])
            }
        }
    }

    package func releaseHeldDevices(provider: Provider) async throws(JobError) -> Int {
        try await write("releasing held devices") { db in
            try db.execute(sql: "DELETE FROM device_holds WHERE provider = ?", arguments: [provider.rawValue])
            return db.changesCount
        }
    }

    package func heldDevices(userID: String?) async throws(JobError) -> [DeviceHold] {
        try await read("reading held devices") { db in
            try Row.fetchAll(
                db,
                sql: """
                    SELECT h.device_id, h.provider, h.reason, h.held_at FROM device_holds h
                    JOIN user_devices d ON d.id = h.device_id
                    WHERE ? IS NULL OR d.user_id = ? ORDER BY h.device_id
                    """, arguments: [userID, userID]
            ).compactMap { row -> DeviceHold? in
                guard let provider = Provider(rawValue: row[1]) else { return nil }
                return DeviceHold(deviceID: row[0], provider: provider, reason: row[2], heldAt: row[3])
            }
        }
    }
}

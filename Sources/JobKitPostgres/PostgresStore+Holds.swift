import Foundation
import JobKit
import PostgresNIO

extension PostgresStore: DeviceHolds {
    package func holdDevices(_ holds: [DeviceHold], runID: String, now: Int64) async throws(JobError) {
        guard !holds.isEmpty else { return }
        _ = try await changed(
            "holding devices",
            """
            INSERT INTO device_holds (device_id, provider, reason, held_at, run_id)
            SELECT h.id, h.provider, h.reason, to_timestamp(\(now)), \(runID)
            FROM unnest(\(holds.map(\.deviceID))::int8[], \(holds.map(\.provider.rawValue))::text[],
                        \(holds.map(\.reason))::text[]) AS h(id, provider, reason)
            WHERE EXISTS (SELECT 1 FROM user_devices d WHERE d.id = h.id)
            ON CONFLICT (device_id) DO UPDATE SET
                provider = excluded.provider, reason = excluded.reason, held_at = excluded.held_at,
                run_id = excluded.run_id
            RETURNING 1
            """)
    }

    package func releaseHeldDevices(provider: Provider) async throws(JobError) -> Int {
        try await changed(
            "releasing held devices", "DELETE FROM device_holds WHERE provider = \(provider.rawValue) RETURNING 1")
    }

    package func heldDevices(userID: String?) async throws(JobError) -> [DeviceHold] {
        var holds: [DeviceHold] = []
        for row in try await rows(
            "reading held devices",
            """
            SELECT h.device_id, h.provider, h.reason, extract(epoch FROM h.held_at)::int8 FROM device_holds h
            JOIN user_devices d ON d.id = h.device_id
            WHERE \(userID)::text IS NULL OR d.user_id = \(userID) ORDER BY h.device_id
            """)
        {
            let (id, provider, reason, heldAt) = try decode(row, (Int64, String, String, Int64).self)
            guard let provider = Provider(rawValue: provider) else { continue }
            holds.append(DeviceHold(deviceID: id, provider: provider, reason: reason, heldAt: heldAt))
        }
        return holds
    }
}

import JobKit
import PostgresNIO

extension PostgresStore: IntegrationStore {
    package func integrationBackfill(kind: AppTableMapping.Kind, blocks: Int) async throws(JobError)
        -> BackfillProgress
    {
        guard
            let row = try await rows(
                "backfilling \(kind.rawValue)",
                "SELECT * FROM integration_backfill(\(kind.rawValue), \(Int32(clamping: blocks)))"
            ).first
        else { throw .software("integration_backfill answered no row") }
        let (next, total, done, finished) = try decode(row, (Int64, Int64, Int64, Bool).self)
        return BackfillProgress(nextBlock: next, totalBlocks: total, rows: done, done: finished)
    }

    package func integrationDrift(max: Int) async throws(JobError) -> [DriftRow] {
        try await rows(
            "checking the integration", "SELECT kind, key, what FROM integration_drift(\(Int32(clamping: max)))"
        ).map {
            (row: PostgresRow) throws(JobError) -> DriftRow in
            let (kind, key, what) = try decode(row, (String, String, String).self)
            return DriftRow(kind: kind, key: key, what: what)
        }
    }

    package func integratedKinds() async throws(JobError) -> Set<AppTableMapping.Kind> {
        var kinds: Set<AppTableMapping.Kind> = []
        for row in try await rows(
            "looking for the integration",
            """
            SELECT p.proname FROM pg_catalog.pg_proc p
            WHERE p.pronamespace = current_schema()::regnamespace
              AND p.proname IN ('integration_users_apply', 'integration_devices_apply')
            """)
        {
            let name = try decode(row, String.self)
            if let kind = AppTableMapping.Kind(rawValue: name.split(separator: "_")[1].description) {
                kinds.insert(kind)
            }
        }
        return kinds
    }
}

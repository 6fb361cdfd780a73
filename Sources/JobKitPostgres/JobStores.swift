import JobKit
import Logging

/// Opens the store a database location names: a SQLite file or a PostgreSQL database.
public enum JobStores {
    /// - Parameters:
    ///   - passwordFile: the PostgreSQL password file (`PUSH_DATABASE_PASSWORD_FILE`), when the URL has no password.
    ///   - applicationName: shown in PostgreSQL's `pg_stat_activity` (the job's name).
    public static func open(
        _ location: DatabaseLocation, mode: StoreOpenMode, passwordFile: String? = nil,
        applicationName: String, source: String = "PUSH_DATABASE_URL",
        logger: Logger = Logger(label: "store")
    ) async throws(JobError) -> any JobStore {
        switch location.kind {
        case .sqlite(let path):
            if passwordFile != nil {
                throw .config("a database password file applies to PostgreSQL only; \(source) names a SQLite file")
            }
            return try SQLiteStore.open(path: path, mode: mode)
        case .postgres(let url):
            let postgres = try PostgresLocation.parse(url, passwordFile: passwordFile, source: source)
            return try await PostgresStore.open(postgres, mode: mode, applicationName: applicationName, logger: logger)
        }
    }
}

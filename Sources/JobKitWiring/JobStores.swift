import JobKit
import JobKitPostgres
import JobKitSQLite
import Logging

/// Opens the store a database location names: a SQLite file or a PostgreSQL database.
public struct JobStores: StoreOpener {
    public init() {}

    public func open(
        _ location: DatabaseLocation, mode: StoreOpenMode, passwordFile: String? = nil, applicationName: String,
        source: String = "PUSH_DATABASE_URL", logger: Logger = Logger(label: "store")
    ) async throws(JobError) -> any JobStore {
        switch location.kind {
        case .sqlite:
            return try await SQLiteStores().open(
                location, mode: mode, passwordFile: passwordFile, applicationName: applicationName, source: source,
                logger: logger)
        case .postgres(let url):
            let postgres = try PostgresLocation.parse(url, passwordFile: passwordFile, source: source)
            return try await PostgresStore.open(postgres, mode: mode, applicationName: applicationName, logger: logger)
        }
    }

    /// Copies the SQLite database the settings name, while the jobs run (``SQLiteStore/backup(_:to:)``): its
    /// path, and the copy. A PostgreSQL database is refused: `pg_dump` copies one.
    public static func backup(
        _ config: ConfigResolver, flags: (database: String?, passwordFile: String?), to path: String
    ) throws(JobError) -> (source: String, copy: SQLiteBackup) {
        let (location, source) = try DatabaseLocation.resolve(config, flag: flags.database, flagged: true)
        switch location.kind {
        case .sqlite(let database):
            try DatabaseLocation.refusePasswordFile(
                try config.string(.databasePasswordFile, flag: flags.passwordFile), source: source)
            return (database, try SQLiteStore.backup(database, to: path))
        case .postgres:
            throw .usage(
                "\(source) names a PostgreSQL database: copy it with pg_dump (or the server's own backups)")
        }
    }
}

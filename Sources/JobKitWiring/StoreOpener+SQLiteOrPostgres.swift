import JobKit
import JobKitPostgres
import JobKitSQLite
import Logging

extension StoreOpener {
    /// Opens the store the settings name: a SQLite file or a PostgreSQL database.
    public static let sqliteOrPostgres = StoreOpener {
        location, mode, passwordFile, applicationName, source, logger throws(JobError) in
        switch location.kind {
        case .sqlite:
            return try await StoreOpener.sqliteOnly.open(
                location, mode: mode, passwordFile: passwordFile, applicationName: applicationName, source: source,
                logger: logger)
        case .postgres(let url):
            let postgres = try PostgresLocation.parse(url, passwordFile: passwordFile, source: source)
            return try await PostgresStore.open(postgres, mode: mode, applicationName: applicationName, logger: logger)
        }
    }
}

/// The SQLite file the settings name, copied while the jobs run (`pushctl backup`).
package enum DatabaseBackup {
    /// Copies the SQLite database the settings name (``SQLiteStore/backup(_:to:)``): its path, and the copy. A
    /// PostgreSQL database is refused: `pg_dump` copies one.
    package static func copy(
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

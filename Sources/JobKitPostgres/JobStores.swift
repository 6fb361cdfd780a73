import JobKit
import Logging

/// Opens the store a database location names: a SQLite file or a PostgreSQL database.
public enum JobStores {
    /// Opens the store the settings name: the `--database` flag (`flags`, on the command line) or
    /// `PUSH_DATABASE_URL`, with `--database-password-file` or `PUSH_DATABASE_PASSWORD_FILE`. What the command
    /// line and an in-process ``JobService`` both call.
    public static func open(
        _ config: ConfigResolver, flags: (database: String?, passwordFile: String?)? = nil, mode: StoreOpenMode,
        applicationName: String, logger: Logger = Logger(label: "store")
    ) async throws(JobError) -> any JobStore {
        let (location, source) = try location(config, flag: flags?.database, flagged: flags != nil)
        return try await open(
            location, mode: mode, passwordFile: try config.string(.databasePasswordFile, flag: flags?.passwordFile),
            applicationName: applicationName, source: source, logger: logger)
    }

    /// Copies the SQLite database the settings name, while the jobs run (``SQLiteStore/backup(_:to:)``): its
    /// path, and the copy. A PostgreSQL database is refused: `pg_dump` copies one.
    public static func backup(
        _ config: ConfigResolver, flags: (database: String?, passwordFile: String?), to path: String
    ) throws(JobError) -> (source: String, copy: SQLiteBackup) {
        let (location, source) = try location(config, flag: flags.database, flagged: true)
        switch location.kind {
        case .sqlite(let database):
            try noPasswordFile(try config.string(.databasePasswordFile, flag: flags.passwordFile), source: source)
            return (database, try SQLiteStore.backup(database, to: path))
        case .postgres:
            throw .usage(
                "\(source) names a PostgreSQL database: copy it with pg_dump (or the server's own backups)")
        }
    }

    /// A password file given for a SQLite database is a mistake to name: it applies to PostgreSQL only.
    private static func noPasswordFile(_ passwordFile: String?, source: String) throws(JobError) {
        if passwordFile != nil {
            throw .config("a database password file applies to PostgreSQL only; \(source) names a SQLite file")
        }
    }

    /// The database location the settings name, and the setting that named it.
    private static func location(_ config: ConfigResolver, flag: String?, flagged: Bool) throws(JobError)
        -> (DatabaseLocation, String)
    {
        guard let raw = try config.raw(.databaseURL, flag: flag) else {
            throw .config(
                flagged
                    ? "no database: pass --database PATH|URL or set PUSH_DATABASE_URL"
                    : "no database: set PUSH_DATABASE_URL")
        }
        return (try DatabaseLocation.parse(raw.value, source: raw.source), raw.source)
    }

    /// Opens the store as ``open(_:flags:mode:applicationName:logger:)`` does, runs `body` with it and closes
    /// it, also when `body` fails.
    public static func with<T>(
        _ config: ConfigResolver, flags: (database: String?, passwordFile: String?)? = nil, mode: StoreOpenMode,
        applicationName: String, _ body: (any JobStore) async throws(JobError) -> T
    ) async throws(JobError) -> T {
        let store = try await open(config, flags: flags, mode: mode, applicationName: applicationName)
        do throws(JobError) {
            let result = try await body(store)
            await store.close()
            return result
        } catch {
            await store.close()
            throw error
        }
    }

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
            try noPasswordFile(passwordFile, source: source)
            return try SQLiteStore.open(path: path, mode: mode)
        case .postgres(let url):
            let postgres = try PostgresLocation.parse(url, passwordFile: passwordFile, source: source)
            return try await PostgresStore.open(postgres, mode: mode, applicationName: applicationName, logger: logger)
        }
    }
}

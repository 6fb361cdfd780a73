import Logging

/// Opens the store a database location names. ``JobService`` and the command-line tools take one: `JobStores`
/// (module JobKitWiring) opens SQLite and PostgreSQL; `SQLiteStores` (module JobKitSQLite) opens SQLite only, for
/// a program that should not link postgres-nio.
public protocol StoreOpener: Sendable {
    /// Opens the store at `location`, which setting `source` named (for messages).
    /// - Parameters:
    ///   - passwordFile: the PostgreSQL password file (`PUSH_DATABASE_PASSWORD_FILE`), when the URL has no password.
    ///   - applicationName: shown in PostgreSQL's `pg_stat_activity` (the job's name).
    func open(
        _ location: DatabaseLocation, mode: StoreOpenMode, passwordFile: String?, applicationName: String,
        source: String, logger: Logger
    ) async throws(JobError) -> any JobStore
}

extension StoreOpener {
    /// Opens the store the settings name: the `--database` flag (`flags`, on the command line) or
    /// `PUSH_DATABASE_URL`, with `--database-password-file` or `PUSH_DATABASE_PASSWORD_FILE`.
    public func open(
        _ config: ConfigResolver, flags: (database: String?, passwordFile: String?)? = nil, mode: StoreOpenMode,
        applicationName: String, logger: Logger = Logger(label: "store")
    ) async throws(JobError) -> any JobStore {
        let (location, source) = try DatabaseLocation.resolve(config, flag: flags?.database, flagged: flags != nil)
        return try await open(
            location, mode: mode, passwordFile: try config.string(.databasePasswordFile, flag: flags?.passwordFile),
            applicationName: applicationName, source: source, logger: logger)
    }

    /// Opens the store as ``open(_:flags:mode:applicationName:logger:)`` does, runs `body` with it and closes
    /// it, also when `body` fails.
    public func with<T>(
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
}

extension DatabaseLocation {
    /// The database location the settings name, and the setting that named it (`flagged`: the command has a
    /// `--database` flag to name in the message).
    package static func resolve(_ config: ConfigResolver, flag: String?, flagged: Bool) throws(JobError)
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

    /// A password file given for a SQLite database is a mistake to name: it applies to PostgreSQL only.
    package static func refusePasswordFile(_ passwordFile: String?, source: String) throws(JobError) {
        if passwordFile != nil {
            throw .config("a database password file applies to PostgreSQL only; \(source) names a SQLite file")
        }
    }
}

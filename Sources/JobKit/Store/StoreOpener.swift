import Logging

/// How a program opens the store a database location names, for ``JobService``: `sqliteOrPostgres` (module
/// JobKitWiring) opens a SQLite file or a PostgreSQL database; `sqliteOnly` (module JobKitSQLite) opens SQLite
/// only, for a program that should not link postgres-nio.
///
/// ```swift
/// let hook = try await JobService.contentLimitHook(stores: .sqliteOnly)
/// ```
public struct StoreOpener: Sendable {
    /// Opens the store at a location, which a setting named (for messages): the location, the mode, the
    /// PostgreSQL password file (when the URL has none), the application name PostgreSQL shows in
    /// `pg_stat_activity` (the job's name), the setting's name, and the logger.
    package typealias Open =
        @Sendable (
            _ location: DatabaseLocation, _ mode: StoreOpenMode, _ passwordFile: String?, _ applicationName: String,
            _ source: String, _ logger: Logger
        ) async throws(JobError) -> any JobStore

    private let openLocation: Open

    package init(_ open: @escaping Open) { self.openLocation = open }

    package func open(
        _ location: DatabaseLocation, mode: StoreOpenMode, passwordFile: String? = nil, applicationName: String,
        source: String = "PUSH_DATABASE_URL", logger: Logger = Logger(label: "store")
    ) async throws(JobError) -> any JobStore {
        try await openLocation(location, mode, passwordFile, applicationName, source, logger)
    }

    /// Opens the store the settings name: the `--database` flag (`flags`, on the command line) or
    /// `PUSH_DATABASE_URL`, with `--database-password-file` or `PUSH_DATABASE_PASSWORD_FILE`.
    package func open(
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
    package func with<T>(
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

import JobKit
import Logging

/// Opens the SQLite store the settings name, for a program that links SQLite only: a PostgreSQL URL is refused
/// with a message that names the module that opens one (`JobStores`, in JobKitWiring).
///
/// ```swift
/// let hook = try await JobService.contentLimitHook(stores: SQLiteStores())
/// ```
public struct SQLiteStores: StoreOpener {
    public init() {}

    public func open(
        _ location: DatabaseLocation, mode: StoreOpenMode, passwordFile: String? = nil, applicationName: String,
        source: String = "PUSH_DATABASE_URL", logger: Logger = Logger(label: "store")
    ) async throws(JobError) -> any JobStore {
        switch location.kind {
        case .sqlite(let path):
            try DatabaseLocation.refusePasswordFile(passwordFile, source: source)
            return try SQLiteStore.open(path: path, mode: mode)
        case .postgres:
            throw .config(
                "\(source) names a PostgreSQL database, and this program opens SQLite only (JobKitSQLite); "
                    + "a program that links JobKitWiring opens both")
        }
    }
}

import JobKit
import Logging

extension StoreOpener {
    /// Opens the SQLite file the settings name, for a program that links SQLite only: a PostgreSQL URL is refused
    /// with a message that names the opener that takes one (``sqliteOrPostgres``, module JobKitWiring).
    public static let sqliteOnly = StoreOpener { location, mode, passwordFile, _, source, _ throws(JobError) in
        switch location.kind {
        case .sqlite(let path):
            try DatabaseLocation.refusePasswordFile(passwordFile, source: source)
            return try SQLiteStore.open(path: path, mode: mode)
        case .postgres:
            throw .config(
                "\(source) names a PostgreSQL database, and this program opens SQLite only (StoreOpener.sqliteOnly); "
                    + "StoreOpener.sqliteOrPostgres, in JobKitWiring, opens both")
        }
    }
}

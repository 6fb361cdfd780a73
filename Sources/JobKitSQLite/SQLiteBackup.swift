import Foundation
import GRDB
import JobKit

#if canImport(Glibc)
    import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif

/// A copy of a SQLite database that ``SQLiteStore/backup(_:to:)`` wrote.
package struct SQLiteBackup: Sendable, Hashable {
    package let path: String
    package let bytes: Int64
    package let users: Int
    /// The migrations the copy has, oldest first.
    package let migrations: [String]
}

extension SQLiteStore {
    /// Copies the database at `source`, as it was at one instant, to `path`, while runs go on.
    ///
    /// A file copy (`cp`) of a database in WAL mode that a run is writing can miss the pages still in the
    /// `-wal` file, or hold half of a transaction. This is SQLite's online backup, in one step from one read
    /// transaction: in WAL mode it neither waits for a run nor makes one wait. The copy replaces `path` whole
    /// (written beside it, then renamed), mode 0600 (it holds the cached provider credentials), as one file in
    /// rollback-journal mode: no `-wal` file belongs with it. The source is neither migrated nor required to be
    /// (a copy before an upgrade is the point), and nothing is written to it.
    package static func backup(_ source: String, to path: String) throws(JobError) -> SQLiteBackup {
        guard !path.isEmpty else { throw .usage("no path to write the copy to") }
        try checkFile(source, mode: .readOnly)
        let target = URL(fileURLWithPath: path)
        if target.resolvingSymlinksInPath().path == URL(fileURLWithPath: source).resolvingSymlinksInPath().path {
            throw .usage("\(path) is the database itself: write the copy to another path")
        }
        if FileManager.default.fileExists(atPath: path + "-wal") {
            throw .cantCreate(
                "\(path)-wal exists: the file at \(path) is open as a database, or was not closed cleanly; write the copy to another path"
            )
        }
        let temporary = target.deletingLastPathComponent()
            .appendingPathComponent(".\(target.lastPathComponent).\(getpid()).tmp").path
        let leftovers = ["", "-journal", "-wal", "-shm"].map { temporary + $0 }
        for file in leftovers { unlink(file) }
        do { try AtomicFile.create(temporary, mode: 0o600) } catch {
            throw .cantCreate("cannot create the copy beside \(path): \(systemReason(error))")
        }
        do throws(JobError) {
            let (users, migrations) = try copy(source, to: temporary, path: path)
            guard rename(temporary, path) == 0 else {
                throw .cantCreate("cannot move the copy to \(path): \(String(cString: strerror(errno)))")
            }
            let bytes = (try? FileManager.default.attributesOfItem(atPath: path)[.size] as? NSNumber)?.int64Value ?? 0
            return SQLiteBackup(path: path, bytes: bytes, users: users, migrations: migrations)
        } catch {
            for file in leftovers { unlink(file) }
            throw error
        }
    }

    /// The online backup of `source` into the empty file `temporary`, then switched to rollback-journal mode;
    /// the copy's users and migrations.
    private static func copy(_ source: String, to temporary: String, path: String) throws(JobError) -> (Int, [String]) {
        var configuration = Configuration()
        configuration.readonly = true
        configuration.busyMode = .timeout(30)
        configuration.label = "diary-push backup"
        let reader: DatabasePool
        do { reader = try DatabasePool(path: source, configuration: configuration) } catch {
            throw mapError(error, "opening \(source)")
        }
        do {
            let destination = try DatabaseQueue(path: temporary)
            try reader.backup(to: destination)
            let counts = try destination.writeWithoutTransaction { db in
                try db.execute(sql: "PRAGMA journal_mode = DELETE")
                let users = try db.tableExists("users") ? try Int.fetchOne(db, sql: "SELECT count(*) FROM users") : 0
                return (users ?? 0, try SQLiteSchema.migrator.appliedIdentifiers(db).sorted())
            }
            try destination.close()
            try reader.close()
            return counts
        } catch {
            try? reader.close()
            throw mapError(error, "backing up \(source) to \(path)")
        }
    }
}

import Foundation
import GRDB
import JobKitTestSupport
import Testing

@testable import JobKit
@testable import JobKitSQLite

/// `pushctl backup`: a SQLite database copied while the jobs run. There was no way but `cp`, which copies a
/// database in WAL mode without the pages still in its `-wal` file, or with half of a transaction.
@Suite struct SQLiteBackupTests {
    /// The copy is the database as of one instant: what was committed, not what a writer has under way, and not
    /// what is committed after. It is one self-contained file, mode 0600, that the jobs open and run on.
    @Test func theCopyIsTheCommittedDatabaseInOneFile() async throws {
        let db = try await TemporaryDatabase(.sqlite)
        for user in ["u1", "u2", "u3"] { try await db.store.addUser(user, time: "20:00") }
        // Committed but still in the -wal file: a file copy of the database alone would not have it.
        try await db.store.addUser("u4", time: "20:00")
        #expect((try FileManager.default.attributesOfItem(atPath: db.path + "-wal")[.size] as? Int ?? 0) > 0)
        // A writer with a transaction under way while the copy is made.
        let writer = try DatabaseQueue(path: db.path)
        let copy = db.directory.appendingPathComponent("backup.sqlite").path
        var made: SQLiteBackup?
        try writer.inDatabase { connection in
            try connection.inTransaction {
                try connection.execute(sql: "INSERT INTO users (id, timezone) VALUES ('uncommitted', 'UTC')")
                #expect(try Int.fetchOne(connection, sql: "SELECT count(*) FROM users") == 5)
                made = try SQLiteStore.backup(db.path, to: copy)
                return .rollback
            }
        }
        let backup = try #require(made)
        #expect(backup.path == copy && backup.users == 4)
        #expect(backup.migrations == SQLiteSchema.migrator.migrations)
        #expect(
            backup.bytes == (try FileManager.default.attributesOfItem(atPath: copy)[.size] as? NSNumber)?.int64Value)
        let mode = try FileManager.default.attributesOfItem(atPath: copy)[.posixPermissions] as? NSNumber
        #expect(mode?.intValue == 0o600)
        // One file: rollback-journal mode, no -wal beside it, and nothing left in the directory but the copy.
        let header = try Data(contentsOf: URL(fileURLWithPath: copy)).prefix(20)
        #expect(Array(header.suffix(2)) == [1, 1], "\(Array(header.suffix(2)))")
        let files = try FileManager.default.contentsOfDirectory(atPath: db.directory.path)
        #expect(files.filter { $0.hasPrefix("backup") || $0.hasPrefix(".backup") } == ["backup.sqlite"], "\(files)")
        // The jobs open the copy and run on it.
        let store = try SQLiteStore.open(path: copy, mode: .readWrite)
        let summary = try await DiaryReminderRunner(store: store, sender: RecordingSender(), logger: quietLogger).run(
            ReminderRunOptions(now: instant("2026-11-21T20:00:00Z")))
        #expect(summary.due == 4)
        let checked = try DatabaseQueue(path: copy)
        let integrity = try await checked.read { try String.fetchOne($0, sql: "PRAGMA integrity_check") }
        try checked.close()
        #expect(integrity == "ok")
        await store.close()
        // A second copy to the same path replaces the first whole (once nothing has it open).
        try await db.execute("DELETE FROM users WHERE id = 'u1'")
        #expect(try SQLiteStore.backup(db.path, to: copy).users == 3)
    }

    /// What cannot be copied is refused before anything is written: no database, the database itself as the
    /// copy, a copy path that a database in WAL mode is open at, a directory that is not there.
    @Test func aCopyThatCannotBeMadeIsRefusedAndLeavesNothing() async throws {
        let db = try await TemporaryDatabase(.sqlite)
        try await db.store.addUser("u1", time: "20:00")
        let directory = db.directory.path
        let cases: [(source: String, target: String, status: Int32, message: String)] = [
            (
                "\(directory)/none.sqlite", "\(directory)/copy.sqlite", 66,
                "no database at \(directory)/none.sqlite (create it with: pushctl migrate --database \(directory)/none.sqlite)"
            ),
            (db.path, db.path, 64, "\(db.path) is the database itself: write the copy to another path"),
            (
                db.path, "\(directory)/missing/copy.sqlite", 73,
                "cannot create the copy beside \(directory)/missing/copy.sqlite: No such file or directory"
            ),
        ]
        for testCase in cases {
            let error = #expect(throws: JobError.self, "\(testCase.target)") {
                try SQLiteStore.backup(testCase.source, to: testCase.target)
            }
            #expect(error?.exitCode == testCase.status, "\(error?.message ?? "")")
            #expect(error?.message == testCase.message)
        }
        // A database open in WAL mode at the copy's path: its -wal would be read with the copy.
        let open = "\(directory)/open.sqlite"
        let other = try SQLiteStore.open(path: open, mode: .create)
        try await other.addUser("x", time: "20:00")
        let error = #expect(throws: JobError.self) { try SQLiteStore.backup(db.path, to: open) }
        #expect(error?.exitCode == 73, "\(error?.message ?? "")")
        #expect(error?.message.hasPrefix("\(open)-wal exists") == true, "\(error?.message ?? "")")
        await other.close()
        let files = try FileManager.default.contentsOfDirectory(atPath: directory)
        #expect(!files.contains { $0.hasSuffix(".tmp") || $0.hasPrefix("copy") }, "\(files)")
    }
}

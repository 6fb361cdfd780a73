import Foundation
import GRDB
import NIOConcurrencyHelpers

@testable import JobKit
@testable import JobKitSQLite

// The doubles more than one test can use: senders that fault on cue, a disk that fills, a clock moved by hand.

/// A clock tests move by hand.
package final class ManualClock: @unchecked Sendable {
    package let start: Int64
    private let lock = NSLock()
    private var current: Int64
    package init(start: Int64) {
        self.start = start
        current = start
    }
    package var now: Int64 { lock.withLock { current } }
    package func set(_ value: Int64) { lock.withLock { current = value } }
}

/// Delivers everything, and does `first` as the first batch goes out: a fault the run meets after the providers
/// accepted what it sent (a full disk), or a request to stop. Once only: a second page's batch that came while
/// `first` was still running (the actor is reentrant at that `await`) filled the disk again after the test had
/// made room, and the run gave its answers up at the end of the lease.
package actor DeliveringSender: Sender {
    private let first: @Sendable () async -> Void
    private var firstDone = false
    package private(set) var sent: [OutgoingNotification] = []

    package init(first: @escaping @Sendable () async -> Void) {
        self.first = first
    }

    package func send(_ batch: [OutgoingNotification]) async -> [DeliveryReport] {
        if !firstDone {
            firstDone = true
            await first()
        }
        sent += batch
        return batch.map { DeliveryReport(channel: DeliveryChannel($0.device.provider), outcome: .delivered) }
    }
}

/// Accepts every notification, and before it answers the first batch takes the database's write lock
/// (another process's long transaction) until ``release()``: the run's record meets a locked database.
package actor LockingSender: Sender {
    package let path: String
    package private(set) var sent: [OutgoingNotification] = []
    private var lock: SQLiteWriteLock?
    private var locked = false

    package init(path: String) {
        self.path = path
    }

    package func send(_ batch: [OutgoingNotification]) async -> [DeliveryReport] {
        sent += batch
        if !locked {
            locked = true
            // The run's own short transactions (a claim of the next page) may hold the lock for a moment.
            for _ in 0..<400 where lock == nil {
                lock = try? await SQLiteWriteLock(path: path)
                if lock == nil { try? await Task.sleep(for: .milliseconds(5)) }
            }
        }
        return batch.map { DeliveryReport(channel: DeliveryChannel($0.device.provider), outcome: .delivered) }
    }

    package func release() async {
        await lock?.release()
        lock = nil
    }
}

/// A full disk under the store's writes of claims and answers, switched on and off by the test: SQLite's own
/// `SQLITE_FULL` ("database or disk is full", from a function the writer connection's triggers call), and
/// PostgreSQL's `disk_full` (53100, raised by a trigger), which is what each reports when its disk is full.
package struct FullDisk: Sendable {
    private let db: TemporaryDatabase
    private let full = NIOLockedValueBox(false)

    package init(_ db: TemporaryDatabase) async throws {
        self.db = db
        switch db.backend {
        case .sqlite:
            let full = self.full
            try await db.sqlite.pool.writeWithoutTransaction { connection in
                connection.add(
                    function: DatabaseFunction("test_disk_space", argumentCount: 0, pure: false) { _ in
                        guard !full.withLockedValue({ $0 }) else {
                            throw DatabaseError(resultCode: .SQLITE_FULL, message: "database or disk is full")
                        }
                        return nil
                    })
                for table in ["notification_logs", "notification_deliveries"] {
                    try connection.execute(
                        sql: """
                            CREATE TEMP TRIGGER test_disk_\(table) BEFORE INSERT ON main.\(table)
                            BEGIN SELECT test_disk_space(); END
                            """)
                }
            }
        case .postgres:
            try await db.execute("CREATE TABLE test_disk (is_full boolean NOT NULL)")
            try await db.execute("INSERT INTO test_disk VALUES (false)")
            try await db.execute(
                """
                CREATE FUNCTION test_disk_space() RETURNS trigger LANGUAGE plpgsql AS $$
                BEGIN
                    IF (SELECT is_full FROM test_disk) THEN
                        RAISE EXCEPTION 'could not extend file: No space left on device' USING ERRCODE = 'disk_full';
                    END IF;
                    RETURN NEW;
                END $$
                """)
            for table in ["notification_logs", "notification_deliveries"] {
                try await db.execute(
                    "CREATE TRIGGER test_disk BEFORE INSERT ON \(table) FOR EACH ROW EXECUTE FUNCTION test_disk_space()"
                )
            }
        }
    }

    package func set(full value: Bool) async throws {
        switch db.backend {
        case .sqlite: full.withLockedValue { $0 = value }
        case .postgres: try await db.execute("UPDATE test_disk SET is_full = \(value)")
        }
    }
}

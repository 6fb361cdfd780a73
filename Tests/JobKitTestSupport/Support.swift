import Foundation
import GRDB
import Logging
import PostgresNIO
import Testing

@testable import JobKit
@testable import JobKitDelivery
@testable import JobKitPostgres
@testable import JobKitSQLite

/// The stores every contract and end-to-end test runs against.
package enum Backend: String, CaseIterable, Sendable, CustomTestStringConvertible {
    case sqlite, postgres
    package var testDescription: String { rawValue }

    /// The admin URL of the throwaway PostgreSQL server that scripts/test starts (scripts/with-postgres).
    package static var postgresAdminURL: String {
        get throws { try postgresSetting("PUSH_TEST_POSTGRES_URL") }
    }
}

extension Backend {
    /// A file of the test server's TLS set-up (`scripts/with-postgres`): `ca.pem`, `client.pem`, `client.key`.
    package static func postgresTLSFile(_ name: String) throws -> String {
        try postgresSetting("PUSH_TEST_POSTGRES_TLS_DIR") + "/" + name
    }

    /// The directory of the test server's Unix-domain socket.
    package static var postgresSocketDirectory: String {
        get throws { try postgresSetting("PUSH_TEST_POSTGRES_SOCKET_DIR") }
    }

    /// A setting `scripts/with-postgres` gives the tests. Without it (a plain `swift test`), the test case is
    /// cancelled, which Swift Testing reports as skipped, and one line says why; scripts/test sets
    /// `PUSH_TEST_REQUIRE_POSTGRES`, under which a missing server fails the test instead.
    private static func postgresSetting(_ name: String) throws -> String {
        let environment = ProcessInfo.processInfo.environment
        guard let value = environment[name], !value.isEmpty else {
            let message =
                "\(name) is not set: run the suite with scripts/test, which starts a throwaway PostgreSQL (or: scripts/with-postgres swift test)"
            if environment["PUSH_TEST_REQUIRE_POSTGRES"] == "1" { throw TestSetupError(message: message) }
            _ = skippedNotice
            try Test.cancel("PostgreSQL test skipped: \(message)")
        }
        return value
    }

    /// Printed once a run, the first time a PostgreSQL test is skipped.
    private static let skippedNotice: Void = {
        FileHandle.standardError.write(
            Data(
                "note: PostgreSQL tests skipped: PUSH_TEST_POSTGRES_URL is not set (scripts/test, or scripts/with-postgres swift test, runs them)\n"
                    .utf8))
    }()
}

package struct TestSetupError: Error, CustomStringConvertible {
    package let message: String
    package init(message: String) { self.message = message }
    package var description: String { message }
}

/// A fresh database: a SQLite file in its own temporary directory, or a new database on the test
/// PostgreSQL server. Raw SQL in tests is written to run on both (`ts` and `epoch` bridge the one
/// difference that matters: instants are INTEGER seconds in SQLite and timestamptz in PostgreSQL).
package struct TemporaryDatabase: Sendable {
    package let backend: Backend
    /// A working directory for files the test writes.
    package let directory: URL
    /// What `--database` / PUSH_DATABASE_URL takes: the SQLite file, or the postgres:// URL.
    package let path: String
    package let store: any JobStore

    package init(_ backend: Backend = .sqlite) async throws {
        self.backend = backend
        directory = FileManager.default.temporaryDirectory.appendingPathComponent("jobkit-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        switch backend {
        case .sqlite:
            path = directory.appendingPathComponent("push.sqlite").path
            store = try SQLiteStore.open(path: path, mode: .create)
        case .postgres:
            path = try await Self.createPostgresDatabase()
            store = try await PostgresStore.open(
                try PostgresLocation.parse(path), mode: .create, applicationName: "tests",
                logger: quietLogger)
        }
    }

    /// A PostgreSQL database a test made itself (e.g. at an earlier schema version), with its store.
    package init(postgres store: PostgresStore, url: String) {
        backend = .postgres
        directory = FileManager.default.temporaryDirectory.appendingPathComponent("jobkit-\(UUID().uuidString)")
        path = url
        self.store = store
    }

    /// The SQLite store (for tests of SQLite-only behaviour).
    package var sqlite: SQLiteStore { store as! SQLiteStore }

    /// Another store on the same database, as a second process would open it.
    package func reopen(_ mode: StoreOpenMode = .readWrite) async throws -> any JobStore {
        switch backend {
        case .sqlite: try SQLiteStore.open(path: path, mode: mode)
        case .postgres: try await PostgresStore.open(try PostgresLocation.parse(path), mode: mode, logger: quietLogger)
        }
    }

    /// An instant as an SQL literal of this backend.
    package func ts(_ seconds: Int64) -> String {
        backend == .sqlite ? "\(seconds)" : "to_timestamp(\(seconds))"
    }

    /// An instant column as Unix seconds.
    package func epoch(_ column: String) -> String {
        backend == .sqlite ? column : "floor(extract(epoch FROM \(column)))::int8"
    }

    package func count(_ sql: String) async throws -> Int {
        switch backend {
        case .sqlite:
            return try await sqlite.pool.read { db in try Int.fetchOne(db, sql: sql) ?? 0 }
        case .postgres:
            guard let row = try await postgres.rows("test query", PostgresQuery(unsafeSQL: sql)).first else { return 0 }
            return try row.decode(Int?.self) ?? 0
        }
    }

    package func strings(_ sql: String) async throws -> [String] {
        switch backend {
        case .sqlite:
            return try await sqlite.pool.read { db in try String.fetchAll(db, sql: sql) }
        case .postgres:
            return try await postgres.rows("test query", PostgresQuery(unsafeSQL: sql)).map {
                try $0.decode(String.self)
            }
        }
    }

    /// Changes when anything in the database changes: the SQLite file's bytes, or a digest of every
    /// PostgreSQL table's rows.
    package func contentDigest() async throws -> String {
        switch backend {
        case .sqlite:
            return try Data(contentsOf: URL(fileURLWithPath: path)).base64EncodedString()
        case .postgres:
            var digest: [String] = []
            for table in [
                "users", "notification_settings", "user_devices", "diary_entries", "notification_logs",
                "notification_deliveries", "job_runs", "provider_credentials", "schema_migrations",
            ] {
                digest += try await strings(
                    "SELECT coalesce(md5(string_agg(t::text, '|' ORDER BY t::text)), '-') FROM \(table) t")
            }
            return digest.joined(separator: " ")
        }
    }

    /// One statement, in its own transaction.
    package func execute(_ sql: String) async throws {
        switch backend {
        case .sqlite:
            try await sqlite.pool.write { db in try db.execute(sql: sql) }
        case .postgres:
            _ = try await postgres.write("test statement", PostgresQuery(unsafeSQL: sql))
        }
    }

    private var postgres: PostgresStore { store as! PostgresStore }

    /// A new, empty database on the test server; its URL.
    package static func createPostgresDatabase() async throws -> String {
        let admin = try Backend.postgresAdminURL
        let location = try PostgresLocation.parse(admin)
        let name = "t_" + UUID().uuidString.lowercased().replacingOccurrences(of: "-", with: "")
        let connection = try await PostgresConnection.connect(
            configuration: try location.connectionConfiguration(applicationName: "tests"),
            id: 0, logger: quietLogger)
        do {
            _ = try await connection.query(PostgresQuery(unsafeSQL: "CREATE DATABASE \(name)"), logger: quietLogger)
                .collect()
        } catch {
            try? await connection.close()
            throw error
        }
        try await connection.close()
        guard var components = URLComponents(string: admin) else { throw TestSetupError(message: "bad admin URL") }
        components.path = "/" + name
        return components.string!
    }
}

/// Records what it is asked to send; answers by token prefix:
/// `dead` → token dead, `flaky` → retry later, `auth` → credentials, anything else → delivered.
package actor RecordingSender: Sender {
    package private(set) var sent: [OutgoingNotification] = []

    package init() {}

    package func send(_ batch: [OutgoingNotification]) async -> [DeliveryReport] {
        sent += batch
        return batch.map { notification in
            let token = notification.device.token
            let outcome: DeliveryOutcome =
                token.hasPrefix("dead")
                ? .tokenDead
                : token.hasPrefix("flaky")
                    ? .retryLater
                    : token.hasPrefix("auth") ? .credentials : .delivered
            return DeliveryReport(
                channel: DeliveryChannel(notification.device.provider), outcome: outcome,
                reason: outcome == .tokenDead ? "Unregistered" : nil)
        }
    }

    package func users() -> [String] { sent.map(\.device.userID) }
}

/// Collects output lines.
package final class LineBuffer: LineSink, @unchecked Sendable {
    private let lock = NSLock()
    private var stored: [String] = []
    package init() {}
    package func write(_ line: String) { lock.withLock { stored.append(line) } }
    package var lines: [String] { lock.withLock { stored } }
}

package let quietLogger: Logger = {
    var logger = Logger(label: "test")
    logger.logLevel = .critical
    return logger
}()

extension JobStore {
    /// A user with reminders at `time`, and `devices` active tokens (`token-<user>-<n>` unless given).
    package func addUser(
        _ id: String, zone: String = "UTC", time: String = "20:00", locale: String = "en",
        enabled: Bool = true, tokens: [String]? = nil, now: Int64 = 0
    ) async throws {
        try await upsertUser(
            UserProfile(
                id: id, timezone: zone, locale: locale, diaryReminderEnabled: enabled,
                reminderTime: time), now: now)
        // User ids may hold any character (zone names are used as ids); a token holds only FCM's.
        let safeID = String(id.map { $0.isASCII && ($0.isLetter || $0.isNumber) ? $0 : "_" })
        for token in tokens ?? ["token-\(safeID)-1"] {
            _ = try await register(
                DeviceRegistration(userID: id, token: token, provider: .fcm, platform: .android), now: now)
        }
    }
}

/// Another process's write lock on a SQLite file: a connection of its own holds `BEGIN IMMEDIATE` on its own
/// thread until ``release()``.
package final class SQLiteWriteLock: Sendable {
    private let released = DispatchSemaphore(value: 0)
    private let done = DispatchSemaphore(value: 0)

    package init(path: String) async throws {
        let queue = try DatabaseQueue(path: path)
        let (released, done) = (released, done)
        try await withCheckedThrowingContinuation { (locked: CheckedContinuation<Void, any Error>) in
            Thread.detachNewThread {
                do {
                    try queue.inDatabase { db in
                        try db.execute(sql: "BEGIN IMMEDIATE")
                        locked.resume()
                        released.wait()
                        try db.execute(sql: "ROLLBACK")
                    }
                } catch {
                    locked.resume(throwing: error)
                }
                done.signal()
            }
        }
    }

    package func release() async {
        released.signal()
        let done = self.done
        await withCheckedContinuation { (finished: CheckedContinuation<Void, Never>) in
            Thread.detachNewThread {
                done.wait()
                finished.resume()
            }
        }
    }
}

/// A ledger that forwards to `inner`, and asks `beforeRecord` first on each `record` (and a run's end): a test
/// makes recording fail by throwing there, as a database that goes away or a process killed between sending
/// and recording. The runner takes it as its `ledger`, beside the real store.
package struct InterceptingLedger: ClaimLedger, RunJournal {
    package let inner: any ClaimLedger & RunJournal
    package let beforeRecord: @Sendable () throws(JobError) -> Void
    /// Changes the claims the store returns (a test's deliberately broken store).
    package var transformClaims: @Sendable ([Claim]) -> [Claim] = { $0 }
    /// Runs before each claim reaches the store, with its requests (a change made meanwhile by somebody else).
    package var beforeClaim: @Sendable ([ClaimRequest]) async -> Void = { _ in }

    package init(inner: any ClaimLedger & RunJournal, beforeRecord: @escaping @Sendable () throws(JobError) -> Void) {
        self.inner = inner
        self.beforeRecord = beforeRecord
    }

    package func claim(_ requests: [ClaimRequest], runID: String, now: Int64, staleBefore: Int64) async throws(JobError)
        -> [Claim]
    {
        await beforeClaim(requests)
        return transformClaims(try await inner.claim(requests, runID: runID, now: now, staleBefore: staleBefore))
    }
    package func activeDevices(userIDs: [String]) async throws(JobError) -> [String: [Device]] {
        try await inner.activeDevices(userIDs: userIDs)
    }
    package func record(_ deliveries: [DeliveryRecord], resolutions: [ClaimResolution], runID: String, now: Int64)
        async throws(JobError)
    {
        try beforeRecord()
        try await inner.record(deliveries, resolutions: resolutions, runID: runID, now: now)
    }
    package func recordRun(
        id: String, job: String, runAt: Int64, durationMs: Int?, outcome: RunOutcome, summaryJSON: String
    )
        async throws(JobError)
    {
        // A run's `running` row is written before it claims or sends anything: only its end is a recording.
        if outcome != .running { try beforeRecord() }
        try await inner.recordRun(
            id: id, job: job, runAt: runAt, durationMs: durationMs, outcome: outcome, summaryJSON: summaryJSON)
    }
    package func failRunsWithoutEnd(job: String, before: Int64, error: String) async throws(JobError)
        -> [(id: String, runAt: Int64)]
    {
        try await inner.failRunsWithoutEnd(job: job, before: before, error: error)
    }
    package func holdDevices(_ holds: [DeviceHold], runID: String, now: Int64) async throws(JobError) {
        try await inner.holdDevices(holds, runID: runID, now: now)
    }
    package func releaseHeldDevices(provider: Provider) async throws(JobError) -> Int {
        try await inner.releaseHeldDevices(provider: provider)
    }
    package func heldDevices(userID: String?) async throws(JobError) -> [DeviceHold] {
        try await inner.heldDevices(userID: userID)
    }
}

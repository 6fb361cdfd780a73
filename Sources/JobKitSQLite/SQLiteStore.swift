internal import CSQLiteSetup
import Foundation
import GRDB
import JobKit
import JobKitSchema

/// The embedded default store: one SQLite file in WAL mode, safe for several processes at once
/// (claims run in `BEGIN IMMEDIATE` transactions; readers never block the writer).
package final class SQLiteStore: Sendable {
    /// How to open the file (see ``StoreOpenMode``).
    package typealias OpenMode = StoreOpenMode

    package let path: String
    let pool: DatabasePool

    private init(path: String, pool: DatabasePool) {
        self.path = path
        self.pool = pool
    }

    /// Process-wide SQLite settings, made once before the first connection opens (see CSQLiteSetup.h). If
    /// something else in the process opened a database first, SQLite keeps its defaults: slower, not wrong.
    private static let processSetup: Void = {
        _ = diary_push_sqlite_disable_memory_statistics()
    }()

    package static func open(path: String, mode: OpenMode, busyTimeout: TimeInterval = 30) throws(JobError)
        -> SQLiteStore
    {
        _ = processSetup
        try checkFile(path, mode: mode)
        var configuration = Configuration()
        configuration.busyMode = .timeout(busyTimeout)
        configuration.readonly = mode == .readOnly
        configuration.label = "diary-push"
        let pool: DatabasePool
        do {
            pool = try DatabasePool(path: path, configuration: configuration)
        } catch {
            throw mapError(error, "opening \(path)")
        }
        let store = SQLiteStore(path: path, pool: pool)
        try store.prepareSchema(migrate: mode != .readOnly)
        return store
    }

    /// What must hold of the file before SQLite opens it: a directory, a missing file (unless creating) or an
    /// empty one (which SQLite would take for a new database and the job would then fill with a schema) is
    /// refused before anything is written. A new file is created readable and writable by its owner only: it
    /// holds the cached provider credentials (docs/SCHEMA.md), and SQLite gives its WAL and shared-memory
    /// files the same permissions.
    static func checkFile(_ path: String, mode: OpenMode) throws(JobError) {
        var isDirectory: ObjCBool = false
        let exists = FileManager.default.fileExists(atPath: path, isDirectory: &isDirectory)
        if exists && isDirectory.boolValue {
            throw .noInput("\(path) is a directory, not a database file")
        }
        if !exists {
            guard mode == .create else {
                throw .noInput("no database at \(path) (create it with: pushctl migrate --database \(path))")
            }
            do { try AtomicFile.create(path, mode: 0o600) } catch {
                throw .cantCreate("cannot create the database file \(path): \(systemReason(error))")
            }
            return
        }
        let size = (try? FileManager.default.attributesOfItem(atPath: path)[.size] as? NSNumber)?.intValue ?? 0
        if size == 0 && mode != .create {
            throw .noInput(
                "\(path) is an empty file, not a diary-push database (create one with: pushctl migrate --database \(path))"
            )
        }
    }

    /// Applies pending migrations (the only writer of the schema). Safe when several processes start at
    /// once: a process that loses the race re-checks and finds the schema complete.
    private func prepareSchema(migrate: Bool) throws(JobError) {
        let migrator = SQLiteSchema.migrator
        do {
            let (complete, unknown) = try pool.read { db in
                (
                    try migrator.hasCompletedMigrations(db),
                    try migrator.appliedIdentifiers(db).subtracting(SchemaMigrations.all.map(\.id)).sorted()
                )
            }
            if let newer = unknown.first {
                throw JobError.config(
                    "the database at \(path) is newer than this program (it has migration \(newer), which this version does not know): upgrade diary-push"
                )
            }
            if complete { return }
        } catch {
            throw Self.mapError(error, "reading the schema of \(path)")
        }
        guard migrate else {
            throw .config(
                "the database at \(path) is not migrated to this version's schema (run: pushctl migrate --database \(path))"
            )
        }
        do {
            try migrator.migrate(pool)
        } catch {
            let done = (try? pool.read { try migrator.hasCompletedMigrations($0) }) ?? false
            if !done { throw Self.mapError(error, "migrating \(path)") }
        }
    }

    /// The identifiers of applied migrations, oldest first.
    package func appliedMigrations() throws(JobError) -> [String] {
        do { return try pool.read { try SQLiteSchema.migrator.appliedMigrations($0) } } catch {
            throw Self.mapError(error, "reading migrations")
        }
    }

    /// The string at `key` of the JSON text in `column`, or NULL (``SQLDialect/jsonString(_:key:)``).
    static func jsonString(_ column: String, key: String) -> String { SQLDialect.sqlite.jsonString(column, key: key) }

    static func mapError(_ error: any Error, _ context: String) -> JobError {
        if let error = error as? JobError { return error }
        guard let error = error as? DatabaseError else { return .software("\(context): \(error)") }
        let detail = error.message ?? "SQLite error \(error.resultCode.rawValue)"
        switch error.resultCode {
        case .SQLITE_BUSY, .SQLITE_LOCKED:
            return .tempFailure("\(context): the database stayed locked by another process; try again")
        case .SQLITE_CANTOPEN:
            return .noInput("\(context): cannot open the database file")
        case .SQLITE_CONSTRAINT:
            return .dataError("\(context): \(detail)")
        case .SQLITE_NOTADB, .SQLITE_CORRUPT:
            return .dataError("\(context): not a valid SQLite database")
        case .SQLITE_READONLY:
            return .cantCreate("\(context): the database is read-only")
        case .SQLITE_IOERR, .SQLITE_FULL:
            return .ioError("\(context): \(detail)")
        default:
            return .unavailable("\(context): \(detail)")
        }
    }

    func read<T: Sendable>(_ context: String, _ body: @Sendable @escaping (Database) throws -> T) async throws(JobError)
        -> T
    {
        do { return try await pool.read(body) } catch { throw Self.mapError(error, context) }
    }

    /// A write in a `BEGIN IMMEDIATE` transaction: takes the write lock up front, so two processes never
    /// deadlock upgrading a read lock.
    func write<T: Sendable>(_ context: String, _ body: @Sendable @escaping (Database) throws -> T)
        async throws(JobError) -> T
    {
        do {
            return try await pool.writeWithoutTransaction { db in
                var result: T?
                try db.inTransaction(.immediate) {
                    result = try body(db)
                    return .commit
                }
                return result!
            }
        } catch {
            throw Self.mapError(error, context)
        }
    }
}

// MARK: - ReminderStore

extension SQLiteStore: ReminderStore {
    /// One query's part of the due set, from the `notification_settings_due` index alone.
    static let dueKeysSQL = """
        SELECT user_id FROM notification_settings
        WHERE diary_reminder_enabled = 1 AND timezone = ? AND due_minute BETWEEN ? AND ?
        """

    /// The candidates query for up to 500 keys in one statement (a page of 1,000 takes two): 10 parameters a
    /// row, well under SQLite's 32,766.
    static let dueCandidatesStatements = ChunkedSQL(largest: 500, dueCandidatesSQL(rows:))

    /// The candidates of `rows` keys, each row of `p` being (query, user, zone, low, high, day start, day end,
    /// period, type, first period of the previous reminder). `p` is the outer loop (CROSS JOIN fixes the order)
    /// and every other rule is an index probe by user id; as the keys come in user-id order, neighbouring probes
    /// read the same pages.
    static func dueCandidatesSQL(rows: Int) -> String {
        let values = Array(repeating: "(?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)", count: rows).joined(separator: ", ")
        return """
            WITH p(query, user_id, zone, low, high, day_start, day_end, period, type, previous_from, history_from)
                AS (VALUES \(values))
            SELECT p.query, s.user_id, u.locale,
                   EXISTS (SELECT 1 FROM user_devices d WHERE d.user_id = s.user_id AND d.is_active = 1),
                   -- With the history (history_from not NULL), "wrote today" and the previous words come from its
                   -- columns: the latest entry before the day's end, and the reminders of its periods.
                   CASE WHEN p.history_from IS NULL THEN
                       EXISTS (SELECT 1 FROM diary_entries e
                               WHERE e.user_id = s.user_id AND e.created_at >= p.day_start AND e.created_at < p.day_end)
                   END,
                   l.id, l.status, l.claimed_at, l.message_index, l.locale, l.run_id,
                   CASE WHEN p.history_from IS NULL THEN
                       (SELECT x.message_index FROM notification_logs x
                        WHERE x.user_id = s.user_id AND x.notification_type = p.type AND x.period_key < p.period
                          AND x.period_key >= p.previous_from AND x.message_index IS NOT NULL
                        ORDER BY x.period_key DESC LIMIT 1)
                   END,
                   -- The history (``ReminderHistory``), when the run reads it.
                   CASE WHEN p.history_from IS NOT NULL THEN
                       (SELECT max(e.created_at) FROM diary_entries e
                        WHERE e.user_id = s.user_id AND e.created_at < p.day_end) END,
                   s.updated_at, r.period_key, r.paused_at, r.ignored,
                   CASE WHEN p.history_from IS NOT NULL THEN
                       (SELECT group_concat(h.period_key || ' ' || h.claimed_at || ' ' || coalesce(h.message_index, -1)
                                            || ' ' || (h.status IN ('sent', 'partial')), ',')
                        FROM notification_logs h
                        WHERE h.user_id = s.user_id AND h.notification_type = p.type
                          AND h.period_key >= p.history_from AND h.period_key < p.period) END
            FROM p
            CROSS JOIN notification_settings s
            CROSS JOIN users u
            LEFT JOIN notification_logs l
                   ON l.user_id = s.user_id AND l.notification_type = p.type AND l.period_key = p.period
            LEFT JOIN reminder_pauses r ON r.user_id = s.user_id AND p.history_from IS NOT NULL
            WHERE s.user_id = p.user_id AND u.id = s.user_id
              AND s.diary_reminder_enabled = 1 AND s.timezone = p.zone AND s.due_minute BETWEEN p.low AND p.high
            """
    }

    package func reminderZones() async throws(JobError) -> [String] {
        // A loose index scan: one index seek per zone instead of reading every user.
        try await read("listing reminder zones") { db in
            try String.fetchAll(db, sql: Self.enabledZonesCTE + "SELECT tz FROM zones WHERE tz IS NOT NULL")
        }
    }

    package func enabledUserCount(zone: String) async throws(JobError) -> Int {
        try await read("counting users in a zone") { db in
            try Int.fetchOne(
                db,
                sql: """
                    SELECT count(*) FROM notification_settings
                    WHERE diary_reminder_enabled = 1 AND timezone = ? AND due_minute IS NOT NULL
                    """, arguments: [zone]) ?? 0
        }
    }

    /// Per zone, an index range (NULL minutes sort together); a plain count would read every enabled
    /// user's index entry, a cost that grows with the user base rather than with who is due.
    /// The zones that have enabled users, as `zones(tz)` (plus one NULL row): a loose index scan, one seek per
    /// zone instead of reading every user.
    static let enabledZonesCTE = """
        WITH RECURSIVE zones(tz) AS (
            SELECT (SELECT min(timezone) FROM notification_settings WHERE diary_reminder_enabled = 1)
            UNION ALL
            SELECT (SELECT min(timezone) FROM notification_settings
                    WHERE diary_reminder_enabled = 1 AND timezone > zones.tz)
            FROM zones WHERE zones.tz IS NOT NULL
        )

        """

    static let malformedCountSQL =
        enabledZonesCTE + """
            SELECT coalesce(sum((SELECT count(*) FROM notification_settings s
                                 WHERE s.diary_reminder_enabled = 1 AND s.timezone = zones.tz
                                   AND s.due_minute IS NULL)), 0)
            FROM zones WHERE tz IS NOT NULL
            """

    package func malformedReminderTimeCount() async throws(JobError) -> Int {
        try await read("counting malformed reminder times") { db in
            try Int.fetchOne(db, sql: Self.malformedCountSQL) ?? 0
        }
    }

    package func dueKeys(_ queries: [DueQuery]) async throws(JobError) -> [DueKey] {
        guard !queries.isEmpty else { return [] }
        return try await read("selecting due users") { db in
            let statement = try db.cachedStatement(sql: Self.dueKeysSQL)
            var keys: [DueKey] = []
            for (index, query) in queries.enumerated() {
                let users = try String.fetchCursor(
                    statement,
                    arguments: [
                        query.zone, query.minutes.lowerBound, query.minutes.upperBound,
                    ])
                while let user = try users.next() { keys.append(DueKey(userID: user, query: index)) }
            }
            keys.sort()
            return keys
        }
    }

    package func dueCandidates(_ keys: [DueKey], of queries: [DueQuery]) async throws(JobError) -> [ReminderCandidate] {
        guard !keys.isEmpty else { return [] }
        // Once per query, not per user: the bound is a date computed from the period's text.
        let previousPeriods = queries.map(\.previousPeriods)
        let previousFrom = previousPeriods.map { $0.lowerBound.databaseValue }
        return try await read("selecting due users") { db in
            var candidates: [ReminderCandidate] = []
            candidates.reserveCapacity(keys.count)
            try Self.dueCandidatesStatements.forEachChunk(of: keys.count) { range, sql in
                let statement = try RawStatement(db.cachedStatement(sql: sql))
                var values: [DatabaseValue] = []
                values.reserveCapacity(range.count * 11)
                for key in keys[range] {
                    let query = queries[key.query]
                    values.append(key.query.databaseValue)
                    values.append(key.userID.databaseValue)
                    values.append(query.zone.databaseValue)
                    values.append(query.minutes.lowerBound.databaseValue)
                    values.append(query.minutes.upperBound.databaseValue)
                    values.append(query.day.lowerBound.databaseValue)
                    values.append(query.day.upperBound.databaseValue)
                    values.append(query.period.databaseValue)
                    values.append(query.type.rawValue.databaseValue)
                    values.append(previousFrom[key.query])
                    values.append(query.historyFrom.databaseValue)
                }
                try statement.bind(values)
                try statement.step { row in
                    let log: LogState? =
                        row.isNull(5)
                        ? nil
                        : LogState(
                            id: row.int64(5), status: ClaimStatus(rawValue: row.string(6)), claimedAt: row.int64(7),
                            messageIndex: row.optionalInt(8), locale: row.optionalString(9), runID: row.string(10))
                    let index = row.int(0)
                    guard queries[index].historyFrom != nil else {
                        candidates.append(
                            ReminderCandidate(
                                query: row.int(0), userID: row.string(1), locale: row.string(2),
                                hasActiveDevice: row.bool(3), wroteToday: row.bool(4), log: log,
                                previousMessageIndex: row.optionalInt(11)))
                        return
                    }
                    let history = Self.history(row)
                    var candidate = ReminderCandidate(
                        query: index, userID: row.string(1), locale: row.string(2),
                        hasActiveDevice: row.bool(3),
                        wroteToday: (history.lastEntryAt ?? .min) >= queries[index].day.lowerBound, log: log,
                        previousMessageIndex: history.reminders.isEmpty
                            ? nil : history.previousMessageIndex(in: previousPeriods[index]))
                    candidate.history = history
                    candidates.append(candidate)
                }
            }
            return candidates
        }
    }

    /// ``reminderHistory(_:)``'s statement, one user at a time (a page of users is a few milliseconds in process).
    static let reminderHistorySQL = """
        SELECT (SELECT max(created_at) FROM diary_entries WHERE user_id = ?1),
               (SELECT updated_at FROM notification_settings WHERE user_id = ?1),
               p.period_key, p.paused_at, p.ignored
        FROM users u LEFT JOIN reminder_pauses p ON p.user_id = u.id
        WHERE u.id = ?1
        """

    static let pastRemindersSQL = """
        SELECT period_key, claimed_at, message_index, status IN ('sent', 'partial') FROM notification_logs
        WHERE user_id = ? AND \(NotificationType.diaryReminder.sql()) AND period_key >= ? AND period_key < ?
        """

    /// The history columns (12–17) of a candidate's row.
    static func history(_ row: RawRow) -> ReminderHistory {
        var history = ReminderHistory(
            lastEntryAt: row.isNull(12) ? nil : row.int64(12), settingsChangedAt: row.isNull(13) ? nil : row.int64(13))
        if !row.isNull(14) {
            history.pause = PauseRecord(period: row.string(14), pausedAt: row.int64(15), ignored: row.int(16))
        }
        if let past = row.optionalString(17) {
            history.reminders = past.split(separator: ",").compactMap { item in
                let parts = item.split(separator: " ")
                guard parts.count == 4, let at = Int64(parts[1]), let index = Int(parts[2]) else { return nil }
                return PastReminder(
                    period: String(parts[0]), claimedAt: at, messageIndex: index < 0 ? nil : index,
                    reached: parts[3] == "1")
            }
        }
        return history
    }

    package func reminderHistory(_ keys: [HistoryKey]) async throws(JobError) -> [HistoryKey: ReminderHistory] {
        guard !keys.isEmpty else { return [:] }
        return try await read("reading reminder history") { db in
            let statement = try db.cachedStatement(sql: Self.reminderHistorySQL)
            let past = try db.cachedStatement(sql: Self.pastRemindersSQL)
            var histories: [HistoryKey: ReminderHistory] = [:]
            for key in keys {
                guard let row = try Row.fetchOne(statement, arguments: [key.userID]) else { continue }
                var history = ReminderHistory(lastEntryAt: row[0], settingsChangedAt: row[1])
                if let period: String = row[2], let pausedAt: Int64 = row[3], let ignored: Int = row[4] {
                    history.pause = PauseRecord(period: period, pausedAt: pausedAt, ignored: ignored)
                }
                history.reminders = try Row.fetchAll(
                    past, arguments: [key.userID, key.periods.lowerBound, key.periods.upperBound]
                ).map { PastReminder(period: $0[0], claimedAt: $0[1], messageIndex: $0[2], reached: $0[3]) }
                histories[key] = history
            }
            return histories
        }
    }

    package func copyOutcomes(days: [String], record: Bool, now: Int64) async throws(JobError) -> [CopyOutcomeRow] {
        let counting = CopyOutcomeCounting(.sqlite, days: days, record: record, now: now)
        guard let countedSQL = counting.countedSQL, let totalsSQL = counting.totalsSQL else { return [] }
        @Sendable func outcomes(_ db: Database, _ sql: String) throws -> [CopyOutcomeRow] {
            try Row.fetchAll(db, sql: sql).map {
                CopyOutcomeRow(locale: $0[0], messageIndex: $0[1], outcome: MessageOutcome(sent: $0[2], wrote: $0[3]))
            }
        }
        let count: @Sendable (Database) throws -> [CopyOutcomeRow] = { db in
            var rows: [CopyOutcomeRow] = []
            for step in counting.steps(counted: try String.fetchSet(db, sql: countedSQL)) {
                switch step {
                case .read(let sql): rows += try outcomes(db, sql)
                case .record(let mark, let store):
                    if try String.fetchOne(db, sql: mark) != nil { try db.execute(sql: store) }
                }
            }
            return rows + (try outcomes(db, totalsSQL))
        }
        // One writer at a time: a day is counted once.
        return record
            ? try await write("counting the words' outcomes", count)
            : try await read("counting the words' outcomes", count)
    }

    /// Rows per multi-row statement in the write path (claims, delivery rows, claim resolutions): one statement
    /// per chunk rather than one per row. The writer is the end-to-end run's critical path (BENCHMARKS.md#sqlites-bulk-statements); at
    /// most 10 parameters a row, far under SQLite's 32,766.
    static let writeChunk = 100

    /// The columns a claim chunk writes, in the order of its rows' values (``claimInsertSQL(rows:)``,
    /// ``checkedClaimInsertSQL(rows:)``).
    static let claimColumns = """
        (user_id, notification_type, period_key, status, message_index, locale, run_id, attempts, claimed_at, updated_at)
        """

    /// Claims `rows` requests at once; rows already in the log are left alone (and then looked at one by one).
    static func claimInsertSQL(rows: Int) -> String {
        """
        INSERT INTO notification_logs \(claimColumns)
        VALUES \(Array(repeating: "(?, ?, ?, 'claimed', ?, ?, ?, 1, ?, ?)", count: rows).joined(separator: ", "))
        ON CONFLICT (user_id, notification_type, period_key) DO NOTHING
        RETURNING id, user_id, notification_type, period_key
        """
    }
    static let claimInsertStatements = ChunkedSQL(largest: writeChunk, claimInsertSQL(rows:))

    /// ``claimInsertSQL(rows:)`` for a chunk that named a user deleted since it was read (its foreign key
    /// failed): the same parameters, and no claim for a user who is no longer there.
    static func checkedClaimInsertSQL(rows: Int) -> String {
        """
        INSERT INTO notification_logs \(claimColumns)
        SELECT r.column1, r.column2, r.column3, 'claimed', r.column4, r.column5, r.column6, 1, r.column7, r.column8
        FROM (VALUES \(Array(repeating: "(?, ?, ?, ?, ?, ?, ?, ?)", count: rows).joined(separator: ", "))) AS r
        WHERE EXISTS (SELECT 1 FROM users u WHERE u.id = r.column1)
        ON CONFLICT (user_id, notification_type, period_key) DO NOTHING
        RETURNING id, user_id, notification_type, period_key
        """
    }
    static let checkedClaimInsertStatements = ChunkedSQL(largest: writeChunk, checkedClaimInsertSQL(rows:))

    /// The columns a delivery chunk writes, in the order of its rows' values (``deliveryInsertSQL(rows:)``,
    /// ``checkedDeliveryInsertSQL(rows:)``).
    static let deliveryColumns = """
        (log_id, device_id, provider, outcome, reason, provider_message_id, attempts, latency_ms, run_id, created_at)
        """

    static func deliveryInsertSQL(rows: Int) -> String {
        """
        INSERT INTO notification_deliveries \(deliveryColumns)
        VALUES \(Array(repeating: "(?, ?, ?, ?, ?, ?, ?, ?, ?, ?)", count: rows).joined(separator: ", "))
        """
    }
    static let deliveryInsertStatements = ChunkedSQL(largest: writeChunk, deliveryInsertSQL(rows:))

    /// ``deliveryInsertSQL(rows:)`` for a chunk that named a claim or a device deleted since the run read it (its
    /// foreign key failed), with the same parameters: the answers to a deleted claim go with it, and those to a
    /// deleted device are kept without it, as the delete's `ON DELETE` would have left them had it come after.
    static func checkedDeliveryInsertSQL(rows: Int) -> String {
        """
        INSERT INTO notification_deliveries \(deliveryColumns)
        SELECT r.column1, (SELECT d.id FROM user_devices d WHERE d.id = r.column2), r.column3, r.column4, r.column5,
               r.column6, r.column7, r.column8, r.column9, r.column10
        FROM (VALUES \(Array(repeating: "(?, ?, ?, ?, ?, ?, ?, ?, ?, ?)", count: rows).joined(separator: ", "))) AS r
        WHERE EXISTS (SELECT 1 FROM notification_logs l WHERE l.id = r.column1)
        """
    }
    static let checkedDeliveryInsertStatements = ChunkedSQL(largest: writeChunk, checkedDeliveryInsertSQL(rows:))

    /// Resolves `ids` claims of this run that are still `claimed` to one status and detail.
    static func resolveSQL(ids: Int) -> String {
        """
        UPDATE notification_logs SET status = ?, finished_at = ?, updated_at = ?, detail = ?
        WHERE run_id = ? AND status = 'claimed' AND id IN (\(Array(repeating: "?", count: ids).joined(separator: ", ")))
        """
    }
    static let resolveStatements = ChunkedSQL(largest: writeChunk, resolveSQL(ids:))

    /// Runs one statement per chunk of `items` (see ``ChunkedSQL``), its arguments `leading` and then what
    /// `row` appends for each item; `body` is handed the bound statement to step.
    ///
    /// A chunk whose statement fails a foreign key (a row it names was deleted since it was read: an account
    /// closed while a run sends) runs again as `checked`'s statement of its size, with the same arguments: one
    /// that leaves out or adjusts such rows. SQLite has undone the failed statement, and the transaction goes on.
    /// The check costs nothing until a key fails.
    private static func inChunks<Item>(
        _ items: [Item], _ db: Database, _ statements: ChunkedSQL,
        checked: ChunkedSQL? = nil,
        leading: [DatabaseValue] = [],
        row: (Item, inout [DatabaseValue]) -> Void,
        _ body: (RawStatement) throws -> Void = { try $0.step() }
    ) throws {
        try statements.forEachChunk(of: items.count) { range, sql in
            var values = leading
            values.reserveCapacity(leading.count + range.count * 10)
            for item in items[range] { row(item, &values) }
            let statement = try RawStatement(db.cachedStatement(sql: sql))
            try statement.bind(values)
            do {
                try body(statement)
            } catch let error as DatabaseError where error.extendedResultCode == .SQLITE_CONSTRAINT_FOREIGNKEY {
                guard let checked else { throw error }
                let statement = try RawStatement(db.cachedStatement(sql: checked.sql(rows: range.count)))
                try statement.bind(values)
                try body(statement)
            }
        }
    }

    /// ``ReminderClaim``'s two primitives: the inserts a chunk at a time, then a prepared take-over per row left.
    package func claim(_ requests: [ClaimRequest], runID: String, now: Int64, staleBefore: Int64) async throws(JobError)
        -> [Claim]
    {
        guard !requests.isEmpty else { return [] }
        return try await write("claiming notifications") { db in
            // First every new claim, a chunk at a time; what was already in the log comes back without an id.
            var inserted: [ReminderClaim.Key: Int64] = [:]
            inserted.reserveCapacity(requests.count)
            try Self.inChunks(requests, db, Self.claimInsertStatements, checked: Self.checkedClaimInsertStatements) {
                request, values in
                values.append(request.userID.databaseValue)
                values.append(request.type.rawValue.databaseValue)
                values.append(request.period.databaseValue)
                values.append(request.messageIndex.databaseValue)
                values.append(request.locale.databaseValue)
                values.append(runID.databaseValue)
                values.append(now.databaseValue)
                values.append(now.databaseValue)
            } _: { statement in
                // Kept once the statement succeeded: one that failed a foreign key is run again (`inChunks`).
                var rows: [(ReminderClaim.Key, Int64)] = []
                try statement.step { row in
                    rows.append(
                        (
                            ReminderClaim.Key(userID: row.string(1), type: row.string(2), period: row.string(3)),
                            row.int64(0)
                        ))
                }
                for (key, id) in rows { inserted[key] = id }
            }
            // The pauses the inserted last reminders start, with them.
            let pausing = ReminderClaim.pausesStarted(requests, inserted: inserted)
            if !pausing.isEmpty {
                let pause = try db.cachedStatement(
                    sql: """
                        INSERT INTO reminder_pauses (user_id, period_key, paused_at, ignored) VALUES (?, ?, ?, ?)
                        \(ReminderClaim.pauseReplacesSQL)
                        """)
                for (userID, record) in pausing {
                    try pause.execute(arguments: [userID, record.period, record.pausedAt, record.ignored])
                }
            }
            let remaining = ReminderClaim.remaining(requests, inserted: inserted)
            var takenOver: [ReminderClaim.Key: ReminderClaim.TakenOver] = [:]
            if !remaining.isEmpty {
                // The lifecycle's take-over rule, with this run's lease written in: prepared once per call.
                let takeOver = try db.makeStatement(
                    sql: """
                        UPDATE notification_logs
                        SET \(DeliveryLifecycle.reclaimSetSQL(.sqlite, now: now)), run_id = ?
                        WHERE user_id = ? AND notification_type = ? AND period_key = ?
                          AND \(DeliveryLifecycle.takeOverSQL(.sqlite, staleBefore: staleBefore))
                        RETURNING id, message_index, locale
                        """)
                let delivered = try db.cachedStatement(
                    sql: """
                        SELECT device_id FROM notification_deliveries
                        WHERE log_id = ? AND outcome = 'delivered' AND device_id IS NOT NULL
                        """)
                for request in remaining {
                    guard
                        let row = try Row.fetchOne(
                            takeOver,
                            arguments: [runID, request.userID, request.type.rawValue, request.period])
                    else { continue }
                    let id: Int64 = row[0]
                    takenOver[ReminderClaim.Key(request)] = ReminderClaim.TakenOver(
                        id: id, messageIndex: row[1], locale: row[2],
                        delivered: try Int64.fetchSet(delivered, arguments: [id]))
                }
            }
            return ReminderClaim.claims(requests, inserted: inserted, takenOver: takenOver)
        }
    }

    /// The active devices of up to 500 users in one statement (a page of 1,000 takes two).
    static let activeDevicesStatements = ChunkedSQL(largest: 500) { count in
        """
        SELECT id, user_id, token, provider, platform, apns_environment, token_kind FROM user_devices
        WHERE is_active = 1 AND user_id IN (\(Array(repeating: "?", count: count).joined(separator: ","))) ORDER BY user_id, id
        """
    }

    package func activeDevices(userIDs: [String]) async throws(JobError) -> [String: [Device]] {
        guard !userIDs.isEmpty else { return [:] }
        return try await read("loading devices") { db in
            var result: [String: [Device]] = [:]
            try Self.activeDevicesStatements.forEachChunk(of: userIDs.count) { range, sql in
                let statement = try RawStatement(db.cachedStatement(sql: sql))
                try statement.bind(userIDs[range].map { $0.databaseValue })
                try statement.step { row in
                    let device = try Device(
                        storedID: row.int64(0), userID: row.string(1), token: row.string(2), provider: row.string(3),
                        platform: row.string(4), apnsEnvironment: row.optionalString(5), kind: row.string(6))
                    result[device.userID, default: []].append(device)
                }
            }
            return result
        }
    }

    private struct ResolutionGroup: Hashable {
        let status: String
        let detail: String?
    }

    package func record(_ deliveries: [DeliveryRecord], resolutions: [ClaimResolution], runID: String, now: Int64)
        async throws(JobError)
    {
        guard !deliveries.isEmpty || !resolutions.isEmpty else { return }
        try await write("recording deliveries") { db in
            try Self.inChunks(
                deliveries, db, Self.deliveryInsertStatements, checked: Self.checkedDeliveryInsertStatements
            ) {
                delivery, values in
                let report = delivery.report
                values.append(delivery.logID.databaseValue)
                values.append(delivery.deviceID.databaseValue)
                values.append(report.channel.rawValue.databaseValue)
                values.append(report.outcome.rawValue.databaseValue)
                values.append(report.reason.databaseValue)
                values.append(report.providerMessageID.databaseValue)
                values.append(report.attempts.databaseValue)
                values.append(report.latencyMs.databaseValue)
                values.append(runID.databaseValue)
                values.append(now.databaseValue)
            }
            let deactivate = try db.cachedStatement(
                sql: """
                    UPDATE user_devices SET is_active = 0, deactivated_at = ?, deactivation_reason = ?, updated_at = ?
                    WHERE id = ? AND is_active = 1 AND (? IS NULL OR last_seen <= ?)
                    """)
            for dead in DeliveryLifecycle.deadDevices(deliveries) {
                try deactivate.execute(arguments: [
                    now, dead.reason, now, dead.deviceID, dead.invalidSince, dead.invalidSince,
                ])
            }
            // Claims resolved alike (nearly all `sent`) are resolved together, in order of first appearance.
            var groups: [ResolutionGroup: [Int64]] = [:]
            var order: [ResolutionGroup] = []
            for resolution in resolutions {
                let group = ResolutionGroup(status: resolution.status.rawValue, detail: resolution.detail)
                if groups[group] == nil { order.append(group) }
                groups[group, default: []].append(resolution.logID)
            }
            for group in order {
                try Self.inChunks(
                    groups[group] ?? [], db, Self.resolveStatements,
                    leading: [
                        group.status.databaseValue, now.databaseValue, now.databaseValue,
                        group.detail.databaseValue, runID.databaseValue,
                    ]
                ) { id, values in
                    values.append(id.databaseValue)
                }
            }
        }
    }

    package func userSnapshot(userID: String) async throws(JobError) -> UserSnapshot? {
        try await read("reading a user") { db in
            guard
                let row = try Row.fetchOne(
                    db,
                    sql: """
                        SELECT u.id, u.timezone, u.locale, u.plan, s.user_id IS NOT NULL,
                               s.diary_reminder_enabled, s.reminder_time, s.content_limit_warnings_enabled
                        FROM users u LEFT JOIN notification_settings s ON s.user_id = u.id
                        WHERE u.id = ?
                        """, arguments: [userID])
            else { return nil }
            let hasSettings: Bool = row[4]
            let devices = try Row.fetchAll(
                db,
                sql: """
                    SELECT id, user_id, token, provider, platform, apns_environment, token_kind FROM user_devices
                    WHERE user_id = ? AND is_active = 1 ORDER BY id
                    """, arguments: [userID]
            ).map { device throws(JobError) in
                try Device(
                    storedID: device[0], userID: device[1], token: device[2], provider: device[3],
                    platform: device[4], apnsEnvironment: device[5], kind: device[6])
            }
            return UserSnapshot(
                userID: row[0], timezone: row[1], locale: row[2], plan: row[3],
                settings: hasSettings
                    ? UserSnapshot.Settings(
                        diaryReminderEnabled: row[5], reminderTime: row[6],
                        contentLimitWarningsEnabled: row[7]) : nil,
                activeDevices: devices)
        }
    }

    package func entryCount(userID: String, in range: Range<Int64>) async throws(JobError) -> Int {
        try await read("counting diary entries") { db in
            try Int.fetchOne(
                db,
                sql: """
                    SELECT count(*) FROM diary_entries WHERE user_id = ? AND created_at >= ? AND created_at < ?
                    """, arguments: [userID, range.lowerBound, range.upperBound]) ?? 0
        }
    }

    package func logState(userID: String, type: NotificationType, period: String) async throws(JobError) -> LogState? {
        try await read("reading the notification log") { db in
            try Row.fetchOne(
                db,
                sql: """
                    SELECT id, status, claimed_at, message_index, locale, run_id FROM notification_logs
                    WHERE user_id = ? AND notification_type = ? AND period_key = ?
                    """, arguments: [userID, type.rawValue, period]
            ).map { row in
                LogState(
                    id: row[0], status: ClaimStatus(rawValue: row[1]), claimedAt: row[2],
                    messageIndex: row[3], locale: row[4], runID: row[5])
            }
        }
    }

    package func deliveryAttempts(logID: Int64) async throws(JobError) -> [DeliveryAttempt] {
        try await read("reading the deliveries of a claim") { db in
            try Row.fetchAll(
                db,
                sql: """
                    SELECT device_id, outcome, reason, run_id, created_at FROM notification_deliveries
                    WHERE log_id = ? ORDER BY created_at, id
                    """, arguments: [logID]
            ).compactMap { row in
                DeliveryOutcome(rawValue: row[1]).map {
                    DeliveryAttempt(deviceID: row[0], outcome: $0, reason: row[2], runID: row[3], at: row[4])
                }
            }
        }
    }

    package func previousMessageIndex(userID: String, type: NotificationType, in periods: Range<String>)
        async throws(JobError) -> Int?
    {
        try await read("reading the notification log") { db in
            try Int.fetchOne(
                db,
                sql: """
                    SELECT message_index FROM notification_logs
                    WHERE user_id = ? AND notification_type = ? AND period_key >= ? AND period_key < ?
                      AND message_index IS NOT NULL
                    ORDER BY period_key DESC LIMIT 1
                    """, arguments: [userID, type.rawValue, periods.lowerBound, periods.upperBound])
        }
    }

    package func orphanedRows(userID: String?) async throws(JobError) -> OrphanedRows {
        try await read("counting rows whose user does not exist") { db in
            let row = try Row.fetchOne(
                db,
                sql: """
                    SELECT (SELECT count(*) FROM notification_settings s
                            WHERE (?1 IS NULL OR s.user_id = ?1) AND NOT EXISTS (SELECT 1 FROM users u WHERE u.id = s.user_id)),
                           (SELECT count(*) FROM user_devices d
                            WHERE d.is_active = 1 AND (?1 IS NULL OR d.user_id = ?1)
                              AND NOT EXISTS (SELECT 1 FROM users u WHERE u.id = d.user_id))
                    """, arguments: [userID])
            return OrphanedRows(settings: row?[0] ?? 0, activeDevices: row?[1] ?? 0)
        }
    }

    /// SQLite's history is not partitioned.
    package func prepareHistory(now: Int64) async throws(JobError) {}

    package func closeUnfinishedReminders(
        claimedIn: Range<Int64>, staleBefore: Int64, limit: Int, runID: String, now: Int64,
        _ decide: @escaping @Sendable ([UnfinishedClaim]) -> [ClaimResolution]
    ) async throws(JobError) -> [UnfinishedClaim] {
        try await write("closing reminders whose window closed") { db in
            // Through `notification_logs_by_claimed_at`: the range holds the claims of a couple of hours.
            let logs = try Row.fetchAll(
                db,
                sql: """
                    SELECT id, period_key FROM notification_logs
                    WHERE claimed_at >= ? AND claimed_at < ? AND \(NotificationType.diaryReminder.sql())
                      AND \(DeliveryLifecycle.takeOverSQL(.sqlite, staleBefore: staleBefore))
                    ORDER BY id LIMIT ?
                    """, arguments: [claimedIn.lowerBound, claimedIn.upperBound, limit]
            ).map { (id: $0[0] as Int64, period: $0[1] as String) }
            guard !logs.isEmpty else { return [] }
            var attempts: [Int64: [RecordedAttempt]] = [:]
            try Self.forEachChunk(logs.map(\.id)) { ids in
                for row in try Row.fetchAll(
                    db,
                    sql: """
                        SELECT log_id, device_id, provider, outcome, reason FROM notification_deliveries
                        WHERE log_id IN (\(ids.map { _ in "?" }.joined(separator: ","))) ORDER BY id
                        """, arguments: StatementArguments(ids))
                {
                    attempts[row[0], default: []].append(
                        RecordedAttempt(
                            deviceID: row[1], provider: row[2],
                            outcome: DeliveryOutcome(rawValue: row[3]) ?? .retryLater,
                            reason: row[4]))
                }
            }
            let claims = logs.map { UnfinishedClaim(logID: $0.id, period: $0.period, attempts: attempts[$0.id] ?? []) }
            let close = try db.cachedStatement(
                sql: """
                    UPDATE notification_logs SET status = ?, detail = ?, finished_at = ?, updated_at = ?, run_id = ?
                    WHERE id = ? AND \(DeliveryLifecycle.takeOverSQL(.sqlite, staleBefore: staleBefore))
                    """)
            for resolution in decide(claims) {
                try close.execute(arguments: [
                    resolution.status.rawValue, resolution.detail, now, now, runID, resolution.logID,
                ])
            }
            return claims
        }
    }

    /// `ids` in chunks that fit SQLite's bound parameters.
    private static func forEachChunk(_ ids: [Int64], _ body: ([Int64]) throws -> Void) throws {
        var start = 0
        while start < ids.count {
            let end = min(start + 500, ids.count)
            try body(Array(ids[start..<end]))
            start = end
        }
    }

    package func recordRun(
        id: String, job: String, runAt: Int64, durationMs: Int?, outcome: RunOutcome, summaryJSON: String
    ) async throws(JobError) {
        try await write("recording the run") { db in
            try db.execute(
                sql: """
                    INSERT INTO job_runs (id, job, run_at, duration_ms, outcome, summary) VALUES (?, ?, ?, ?, ?, ?)
                    ON CONFLICT (id) DO UPDATE SET duration_ms = excluded.duration_ms, outcome = excluded.outcome,
                                                   summary = excluded.summary
                    """, arguments: [id, job, runAt, durationMs, outcome.rawValue, summaryJSON])
        }
    }

    package func failRunsWithoutEnd(job: String, before: Int64, error: String) async throws(JobError)
        -> [(id: String, runAt: Int64)]
    {
        try await write("recording runs without an end") { db in
            try Row.fetchAll(
                db,
                sql: """
                    UPDATE job_runs SET outcome = 'failed', summary = json_set(coalesce(summary, '{}'), '$.error', ?)
                    WHERE job = ? AND outcome = 'running' AND run_at < ?
                    RETURNING id, run_at
                    """, arguments: [error, job, before]
            ).map { (id: $0[0], runAt: $0[1]) }.sorted { ($0.runAt, $0.id) < ($1.runAt, $1.id) }
        }
    }
}

extension SQLiteStore: JobStore {
    package var backend: String { "sqlite" }
    package var displayLocation: String { path }
    package func close() async {
        // Readers first, so that the writer is the last connection to close: SQLite then checkpoints and
        // deletes the WAL (when no other process has the database open). GRDB's close() alone closes the
        // writer first, and the read-only reader closing last leaves every frame in the WAL, which the next
        // process to open the database re-reads in full (24 MB after a large seed: +12 ms per hook run).
        pool.releaseMemory()
        try? pool.close()
    }
}

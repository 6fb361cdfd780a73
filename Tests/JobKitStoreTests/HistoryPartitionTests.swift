import Foundation
import JobKitTestSupport
import PostgresNIO
import Testing

@testable import JobKit
@testable import JobKitPostgres
@testable import JobKitSchema

/// The partition rule as values: every period key and instant has exactly one partition, names round-trip,
/// and what a moment needs and what may go are stated for each edge (year ends, the zone slack).
@Suite struct HistoryPartitionRuleTests {
    static func instant(_ text: String) -> Int64 { Timestamps.parse(text)! }

    @Test func everyPeriodKeyOfAYearFallsInTheOnePartitionItBelongsIn() {
        // Every daily, monthly and yearly key from 2025 to 2027, against every partition of those years.
        var keys: [String] = []
        var day = LocalDate(year: 2025, month: 1, day: 1)!
        while day.year < 2028 {
            keys.append(day.description)
            if day.day == 1 { keys.append(day.monthKey) }
            if day.month == 1 && day.day == 1 { keys.append(LocalDate.pad(day.year, 4)) }
            day = day.adding(days: 1)
        }
        var partitions: [HistoryPartition] = []
        for year in 2024...2028 {
            partitions.append(HistoryPartition.logs(holding: LocalDate.pad(year, 4))!)
            for month in 1...12 {
                partitions.append(HistoryPartition.logs(holding: "\(year)-\(LocalDate.pad(month, 2))")!)
            }
        }
        for key in keys {
            // Byte order, as PostgreSQL's "C" collation compares.
            func less(_ a: String, _ b: String) -> Bool { Array(a.utf8).lexicographicallyPrecedes(Array(b.utf8)) }
            let holding = partitions.filter { !less(key, $0.keyBounds.lower) && less(key, $0.keyBounds.upper) }
            #expect(holding.count == 1, "\(key): \(holding)")
            #expect(holding.first == HistoryPartition.logs(holding: key), "\(key)")
        }
        #expect(HistoryPartition.logs(holding: "2026-11-23")?.name == "notification_logs_m2026_11")
        #expect(HistoryPartition.logs(holding: "2026-12")!.keyBounds == ("2026-12", "2027"))
        #expect(HistoryPartition.logs(holding: "2026")?.name == "notification_logs_y2026")
        #expect(HistoryPartition.logs(holding: "2026")!.keyBounds == ("2026", "2026-01"))
        for bad in ["26-11-23", "2026-13", "2026-1", "abcd", "", "2026-11-23-1", "２０２６"] {
            #expect(HistoryPartition.logs(holding: bad) == nil, "\(bad)")
        }
    }

    @Test func deliveryPartitionsAreUTCMonths() {
        let november = HistoryPartition.deliveries(holding: Self.instant("2026-11-30T23:59:59Z"))
        #expect(november.name == "notification_deliveries_m2026_11")
        #expect(november.timeBounds == (Self.instant("2026-11-01T00:00:00Z"), Self.instant("2026-12-01T00:00:00Z")))
        #expect(HistoryPartition.deliveries(holding: Self.instant("2026-12-01T00:00:00Z")).name.hasSuffix("m2026_12"))
        let february = HistoryPartition.deliveries(holding: Self.instant("2028-02-10T00:00:00Z")).timeBounds
        #expect(february.upper - february.lower == 29 * 86_400)
    }

    @Test func namesRoundTripAndOtherTablesAreNotOurs() {
        let now = Self.instant("2026-12-31T20:00:00Z")
        for partition in HistoryPartition.needed(now: now) {
            #expect(HistoryPartition(name: partition.name) == partition)
        }
        for other in [
            "notification_logs_default", "notification_deliveries_default", "notification_logs_m2026_13",
            "notification_deliveries_y2026", "notification_logs_m2026_1", "notification_logs_archive", "users",
            "notification_logs_m2026_11x",
        ] {
            #expect(HistoryPartition(name: other) == nil, "\(other)")
        }
    }

    @Test func aMomentNeedsItsMonthsFromTwoDaysBackToTwoAhead() {
        let names = { (now: String) in HistoryPartition.needed(now: Self.instant(now)).map(\.name) }
        #expect(
            names("2026-12-31T20:00:00Z") == [
                "notification_logs_y2026", "notification_logs_y2027",
                "notification_logs_m2026_12", "notification_logs_m2027_01", "notification_logs_m2027_02",
                "notification_deliveries_m2026_12", "notification_deliveries_m2027_01",
                "notification_deliveries_m2027_02",
            ])
        // Two days into March, a zone may still be on the last day of February.
        #expect(names("2026-03-01T05:00:00Z").contains("notification_logs_m2026_02"))
        #expect(names("2026-03-03T05:00:00Z").contains("notification_logs_m2026_02") == false)
        // Two days into the year, a zone may still be in the old year.
        #expect(names("2027-01-01T05:00:00Z").contains("notification_logs_y2026"))
    }

    @Test func whatMayGo() {
        let guards = PeriodGuards(now: Self.instant("2026-12-01T10:00:00Z"))  // day 2026-11-29
        let logs = { (key: String) in HistoryPartition.logs(holding: key)! }
        #expect(logs("2026-10").periodsEnded(guards))
        #expect(!logs("2026-11").periodsEnded(guards))  // its last days may still guard
        #expect(logs("2025").periodsEnded(guards))
        #expect(!logs("2026").periodsEnded(guards))  // this year's warnings still deduplicate
        let october = HistoryPartition.deliveries(holding: Self.instant("2026-10-15T00:00:00Z"))
        #expect(october.deliveriesAllBefore(Self.instant("2026-11-01T00:00:00Z")))
        #expect(!october.deliveriesAllBefore(Self.instant("2026-10-31T23:59:59Z")))
        #expect(!october.periodsEnded(guards))
        #expect(!logs("2026-10").deliveriesAllBefore(.max))
    }
}

/// The partitioned history on a real PostgreSQL server: the migration keeps every row and the dedup key,
/// rows that came before their partition are moved into it, a run touches the partitions of its periods only,
/// and the janitor drops a partition only when every row in it is one it would delete.
@Suite struct PostgresHistoryPartitionTests {
    static let now = HistoryPartitionRuleTests.instant("2026-11-23T12:00:00Z")

    func partitions(_ db: TemporaryDatabase) async throws -> [String] {
        try await db.strings(
            """
            SELECT c.relname::text FROM pg_inherits i JOIN pg_class c ON c.oid = i.inhrelid
            WHERE i.inhparent IN ('notification_logs'::regclass, 'notification_deliveries'::regclass) ORDER BY 1
            """)
    }

    /// A database of the previous version (migrations up to 008) with history in it.
    func databaseAt008(rows: Int) async throws -> String {
        let url = try await TemporaryDatabase.createPostgresDatabase()
        let location = try PostgresLocation.parse(url)
        let connection = try await PostgresConnection.connect(
            configuration: try location.connectionConfiguration(applicationName: "tests"), id: 1, logger: quietLogger)
        func run(_ sql: String) async throws {
            _ = try await connection.query(PostgresQuery(unsafeSQL: sql), logger: quietLogger).collect()
        }
        try await run(
            "CREATE TABLE schema_migrations (id text PRIMARY KEY, applied_at timestamptz NOT NULL DEFAULT now())")
        for migration in SchemaMigrations.all where migration.id < "009" {
            for statement in PostgresSchema.statements(migration.postgres) { try await run(statement) }
            try await run("INSERT INTO schema_migrations (id) VALUES ('\(migration.id)')")
        }
        try await run(
            """
            INSERT INTO users (id, timezone) SELECT 'u' || i, 'UTC' FROM generate_series(1, \(rows)) i
            """)
        // Two months of reminders, a monthly and a yearly warning per user, and a delivery row for each.
        try await run(
            """
            INSERT INTO notification_logs (user_id, notification_type, period_key, status, run_id, claimed_at, updated_at)
            SELECT 'u' || i, t.type, t.period, 'sent', 'old', t.at, t.at
            FROM generate_series(1, \(rows)) i,
                 (VALUES ('diary_reminder', '2026-09-30', timestamptz '2026-09-30 20:00Z'),
                         ('diary_reminder', '2026-10-01', timestamptz '2026-10-01 20:00Z'),
                         ('content_limit_90', '2026-10', timestamptz '2026-10-15 20:00Z'),
                         ('content_limit_100', '2026', timestamptz '2026-06-15 20:00Z')) AS t(type, period, at)
            """)
        try await run(
            """
            INSERT INTO notification_deliveries (log_id, provider, outcome, run_id, created_at)
            SELECT id, 'fcm', 'delivered', 'old', claimed_at FROM notification_logs
            """)
        try await connection.close()
        return url
    }

    @Test func theMigrationKeepsEveryRowAndTheDedupKey() async throws {
        let url = try await databaseAt008(rows: 50)
        let store = try await PostgresStore.open(try PostgresLocation.parse(url), mode: .readWrite, logger: quietLogger)
        let db = TemporaryDatabase(postgres: store, url: url)
        #expect(try await store.appliedMigrations().contains("009_partitioned_history"))
        #expect(try await db.count("SELECT count(*) FROM notification_logs") == 200)
        #expect(try await db.count("SELECT count(*) FROM notification_deliveries") == 200)
        #expect(try await db.count("SELECT count(*) FROM notification_logs_default") == 200)
        let maxID = try await db.count("SELECT max(id) FROM notification_logs")

        // The first job to open it moves the rows into partitions of their own, deliveries staying put.
        try await store.prepareHistory(now: Self.now)
        #expect(
            try await partitions(db) == [
                "notification_deliveries_default", "notification_deliveries_m2026_06",
                "notification_deliveries_m2026_09", "notification_deliveries_m2026_10",
                "notification_deliveries_m2026_11", "notification_deliveries_m2026_12",
                "notification_deliveries_m2027_01", "notification_logs_default", "notification_logs_m2026_09",
                "notification_logs_m2026_10", "notification_logs_m2026_11", "notification_logs_m2026_12",
                "notification_logs_m2027_01", "notification_logs_y2026", "notification_logs_y2027",
            ])
        #expect(try await db.count("SELECT count(*) FROM notification_logs_default") == 0)
        #expect(try await db.count("SELECT count(*) FROM notification_deliveries_default") == 0)
        #expect(try await db.count("SELECT count(*) FROM notification_logs_m2026_10") == 100)
        #expect(try await db.count("SELECT count(*) FROM notification_logs_y2026") == 50)
        #expect(try await db.count("SELECT count(*) FROM notification_deliveries") == 200)
        #expect(
            try await db.count(
                "SELECT count(*) FROM notification_deliveries d JOIN notification_logs l ON l.id = d.log_id") == 200)

        // The dedup key holds across the conversion: the same keys are lost, new ones get new ids.
        let again = try await store.claim(
            (1...50).map {
                ClaimRequest(
                    userID: "u\($0)", type: .diaryReminder, period: "2026-10-01", messageIndex: 0, locale: "en")
            } + [ClaimRequest(userID: "u1", type: .diaryReminder, period: "2026-11-23", messageIndex: 0, locale: "en")],
            runID: "new", now: Self.now, staleBefore: 0)
        #expect(again.map(\.period) == ["2026-11-23"])
        #expect(again.first.map { Int($0.logID) > maxID } == true)
        #expect(try await db.count("SELECT count(*) FROM notification_logs_m2026_11") == 1)
        // Opening again changes nothing.
        try await store.prepareHistory(now: Self.now)
        #expect(try await partitions(db).count == 15)
        await store.close()
    }

    @Test func rowsThatCameBeforeTheirPartitionAreMovedIntoIt() async throws {
        let db = try await TemporaryDatabase(.postgres)
        try await db.store.prepareHistory(now: Self.now)
        try await db.store.addUser("a")
        // A run far ahead of the partitions made so far: its rows go to the default partitions.
        let later = HistoryPartitionRuleTests.instant("2027-06-10T12:00:00Z")
        let claims = try await db.store.claim(
            [ClaimRequest(userID: "a", type: .diaryReminder, period: "2027-06-10", messageIndex: 0, locale: "en")],
            runID: "r", now: later, staleBefore: 0)
        let device = try await db.count("SELECT id FROM user_devices")
        try await db.store.record(
            [
                DeliveryRecord(
                    logID: claims[0].logID, deviceID: Int64(device),
                    report: DeliveryReport(channel: .fcm, outcome: .delivered))
            ],
            resolutions: [ClaimResolution(logID: claims[0].logID, period: "2027-06-10", status: .sent, detail: nil)],
            runID: "r", now: later)
        #expect(try await db.count("SELECT count(*) FROM notification_logs_default WHERE status = 'sent'") == 1)
        #expect(try await db.count("SELECT count(*) FROM notification_deliveries_default") == 1)
        // Two runners preparing at once: both succeed, each partition is made once.
        let other = try await db.reopen()
        async let first: Void = db.store.prepareHistory(now: later)
        async let second: Void = other.prepareHistory(now: later)
        _ = try await (first, second)
        await other.close()
        #expect(try await db.count("SELECT count(*) FROM notification_logs_default") == 0)
        #expect(try await db.count("SELECT count(*) FROM notification_logs_m2027_06 WHERE status = 'sent'") == 1)
        #expect(try await db.count("SELECT count(*) FROM notification_deliveries_m2027_06") == 1)
        // Still one claim per key.
        #expect(
            try await db.store.claim(
                [ClaimRequest(userID: "a", type: .diaryReminder, period: "2027-06-10", messageIndex: 0, locale: "en")],
                runID: "r2", now: later, staleBefore: 0
            ).isEmpty)
    }

    /// A page's statements look in the partitions of the page's periods only, however many months are kept.
    @Test func aPageTouchesThePartitionsOfItsPeriodsOnly() async throws {
        let db = try await TemporaryDatabase(.postgres)
        for month in 0..<14 {  // fourteen months of partitions, as with 400 days of retention
            try await db.store.prepareHistory(now: Self.now - Int64(month) * 30 * 86_400)
        }
        #expect(try await partitions(db).count > 30)
        let store = db.store as! PostgresStore
        let resolutions = (1...20).map {
            ClaimResolution(logID: Int64($0), period: "2026-11-23", status: .sent, detail: nil)
        }
        for query in PostgresStore.resolutionQueries(resolutions, runID: "r", now: Self.now) {
            let plan = try await store.rows(
                "explain", PostgresQuery(unsafeSQL: "EXPLAIN " + query.sql, binds: query.binds)
            ).map { try $0.decode(String.self) }.joined(separator: "\n")
            #expect(plan.contains("notification_logs_m2026_11"), "\(plan)")
            #expect(
                !plan.contains("notification_logs_m2026_10") && !plan.contains("notification_logs_default"), "\(plan)")
        }
    }

    /// Recording a page's outcome changes no indexed column and mostly finds room on the claim's own page, so
    /// resolutions are heap-only (HOT) updates: the new row versions carry the `HEAP_ONLY_TUPLE` flag (read with
    /// `pageinspect`), and only the few that moved to another page add index entries.
    @Test func resolvingAPageIsAHeapOnlyUpdate() async throws {
        let db = try await TemporaryDatabase(.postgres)
        try await db.store.prepareHistory(now: Self.now)
        let users = (1...600).map { String(format: "u%04d", $0) }
        try await db.execute(
            """
            INSERT INTO users (id, locale, timezone, plan, created_at)
            SELECT 'u' || lpad(n::text, 4, '0'), 'en', 'UTC', 'free', now() FROM generate_series(1, 600) n
            """)
        let claims = try await db.store.claim(
            users.map {
                ClaimRequest(userID: $0, type: .diaryReminder, period: "2026-11-23", messageIndex: 0, locale: "en")
            }, runID: "r", now: Self.now, staleBefore: Self.now - 900)
        #expect(claims.count == users.count)
        func indexEntries() async throws -> Int {
            try await db.count(
                """
                SELECT sum(s.live_items + s.dead_items)
                FROM pg_index x JOIN pg_class c ON c.oid = x.indexrelid,
                    generate_series(1, pg_relation_size(c.oid) / 8192 - 1) b, bt_page_stats(c.oid::regclass::text, b::int) s
                WHERE x.indrelid = 'notification_logs_m2026_11'::regclass AND s.type = 'l'
                """)
        }
        try await db.execute("CREATE EXTENSION IF NOT EXISTS pageinspect")
        let entriesBefore = try await indexEntries()
        try await db.store.record(
            [],
            resolutions: claims.enumerated().map {
                ClaimResolution(
                    logID: $1.logID, period: $1.period, status: $0 % 3 == 0 ? .failed : .sent,
                    detail: $0 % 3 == 0 ? "no active device at send time" : nil)
            }, runID: "r", now: Self.now + 5)
        let heapOnly = try await db.count(
            """
            SELECT count(*) FROM generate_series(0, pg_relation_size('notification_logs_m2026_11') / 8192 - 1) b,
                heap_page_items(get_raw_page('notification_logs_m2026_11', b::int)) t
            WHERE t.t_infomask2 & 32768 <> 0
            """)
        // Half a page holds a page's claims and most of their resolved versions (which are longer: they gain
        // `finished_at`, and a third of them a detail); the rest move to another page, with index entries.
        #expect(heapOnly >= users.count * 3 / 4)
        let moved = users.count - heapOnly
        #expect(try await indexEntries() - entriesBefore <= moved * 3 + 8, "three indexes hold diary rows")
        #expect(try await db.count("SELECT count(*) FROM notification_logs WHERE status = 'claimed'") == 0)
    }

    @Test(arguments: [false, true]) func theJanitorDropsAPartitionOnlyWhenEveryRowInItWouldBeDeleted(
        keepPartitions: Bool
    ) async throws {
        let db = try await TemporaryDatabase(.postgres)
        try await db.store.addUser("u")
        func log(_ type: String, _ period: String, _ at: String, status: String = "sent") async throws {
            try await db.execute(
                """
                INSERT INTO notification_logs (user_id, notification_type, period_key, status, run_id, claimed_at, updated_at)
                VALUES ('u', '\(type)', '\(period)', '\(status)', 'r', timestamptz '\(at)', timestamptz '\(at)')
                """)
        }
        let now = HistoryPartitionRuleTests.instant("2027-03-10T12:00:00Z")
        try await log("diary_reminder", "2026-10-01", "2026-10-01T20:00:00Z")  // October: all over → dropped
        try await log("content_limit_90", "2026-10", "2026-10-20T20:00:00Z")
        // November: a warning held for quiet hours and never sent, a claim of a run that died. November is over
        // and they are months old: nothing sends them any more, and they guard nothing → dropped.
        try await log("diary_reminder", "2026-11-01", "2026-11-01T20:00:00Z", status: "claimed")
        try await log("content_limit_100", "2026-11", "2026-11-20T20:00:00Z", status: "deferred")
        try await log("diary_reminder", "2026-12-01", "2026-12-01T20:00:00Z")  // December: one row claimed
        try await log("content_limit_90", "2026-12", "2027-02-20T20:00:00Z")  // within the retention
        try await log("content_limit_100", "2026", "2026-05-01T20:00:00Z")  // last year's: over → dropped
        try await log("content_limit_100", "2027", "2027-01-05T20:00:00Z")  // this year's: guards
        try await db.execute(
            """
            INSERT INTO notification_deliveries (log_id, provider, outcome, run_id, created_at)
            SELECT id, 'fcm', 'delivered', 'r', claimed_at FROM notification_logs
            """)
        try await db.store.prepareHistory(now: now)
        var options = JanitorOptions(now: now)
        options.logRetentionDays = 35
        options.deliveryRetentionDays = 60
        options.keepPartitions = keepPartitions
        let janitor = TokenJanitor(store: db.store, logger: quietLogger) { () async throws(JobError) -> any Sender in
            RecordingSender()
        }
        var dry = options
        dry.dryRun = true
        let wouldDo = try await janitor.run(dry)
        let done = try await janitor.run(options)
        let dropped =
            keepPartitions
            ? []
            : [
                "notification_deliveries_m2026_05", "notification_deliveries_m2026_10",
                "notification_deliveries_m2026_11", "notification_deliveries_m2026_12", "notification_logs_m2026_10",
                "notification_logs_m2026_11", "notification_logs_y2026",
            ]
        #expect(done.partitionsDropped == dropped)
        #expect(wouldDo.partitionsDropped == dropped)
        // The same rows go either way: October's two, November's two and 2026's (whole partitions, or row by
        // row), and December's finished reminder by the row rule.
        #expect(done.logsDeleted == 6)
        #expect(wouldDo.logsDeleted == done.logsDeleted)
        #expect(done.deliveriesDeleted == 7)
        #expect(wouldDo.deliveriesDeleted == done.deliveriesDeleted)
        #expect(
            try await db.strings("SELECT period_key || ' ' || status FROM notification_logs ORDER BY 1") == [
                "2026-12 sent", "2027 sent",
            ])
        #expect(
            try await db.strings("SELECT created_at::text FROM notification_deliveries")
                == ["2027-02-20 20:00:00+00"])
        let kept = try await partitions(db)
        #expect(kept.contains("notification_logs_m2026_10") == keepPartitions)
        #expect(
            kept.contains("notification_logs_m2026_11") == keepPartitions && kept.contains("notification_logs_y2027"))
    }
}

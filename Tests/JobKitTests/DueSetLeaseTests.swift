import Foundation
import Testing

@testable import JobKit

/// Runners started together without `--shard` split the due set by leased buckets: each user is read by one
/// runner only, every user is reminded once, and a runner that dies holding a bucket leaves its users to the
/// next run.
@Suite struct DueSetLeaseTests {
    static let slot = Timestamps.parse("2026-11-21T20:00:00Z")!

    @Test func bucketsAreStableEvenAndIndependentOfTheShard() throws {
        let ids = (0..<20_000).map { "user-\($0)" }
        let plan = try #require(DueSetBuckets(keys: 100_000, pageSize: 1_000, now: Self.slot, shard: .all))
        #expect(plan.count == 12)  // 8 pages a bucket at least
        #expect(ids.map(plan.bucket(of:)) == ids.map(plan.bucket(of:)))
        for shard in [Shard(index: 1, count: 2), Shard(index: 2, count: 2), Shard(index: 3, count: 4)] {
            var sizes = [Int](repeating: 0, count: plan.count)
            for id in ids where shard.contains(userID: id) { sizes[plan.bucket(of: id)] += 1 }
            let mean = Double(sizes.reduce(0, +)) / Double(sizes.count)
            // Every bucket of every shard holds about its share: the bucket does not follow from the shard.
            #expect(sizes.allSatisfy { Double($0) > mean * 0.8 && Double($0) < mean * 1.2 }, "\(shard): \(sizes)")
        }
        let count = { (keys: Int) in DueSetBuckets(keys: keys, pageSize: 1_000, now: Self.slot, shard: .all)?.count }
        #expect(count(1_000) == nil)  // one page: nothing to split
        #expect(count(1_001) == 2)
        #expect(count(24_000) == 3)
        #expect(count(10_000_000) == DueSetBuckets.maximum)
        // Runners share leases when they evaluate the same minute of the same shard, and only then.
        let key = { (now: Int64, shard: Shard) in
            DueSetBuckets(keys: 5_000, pageSize: 100, now: now, shard: shard)!.runKey
        }
        #expect(key(Self.slot + 5, .all) == key(Self.slot + 59, .all))
        #expect(key(Self.slot + 59, .all) != key(Self.slot + 60, .all))
        #expect(key(Self.slot, .all) != key(Self.slot, Shard(index: 1, count: 2)))
        #expect(key(Self.slot, .all) == "diary-reminder 2026-11-21T20:00:00Z shard 1/1 buckets 6")
    }

    func seeded(_ backend: Backend, due: Int) async throws -> TemporaryDatabase {
        let db = try await TemporaryDatabase(backend)
        var options = SeedOptions(users: due, now: Self.slot)
        options.dueAt = Self.slot
        options.dueCount = due
        options.wroteTodayShare = 0
        options.randomSeed = 3
        _ = try await Seeder().seed(options, into: db.store)
        return db
    }

    func run(_ db: TemporaryDatabase, at now: Int64, runID: String) async throws -> RunSummary {
        var options = ReminderRunOptions(now: now, runID: runID)
        options.pageSize = 20
        return try await DiaryReminderRunner(store: db.store, sender: RecordingSender(), logger: quietLogger).run(
            options)
    }

    @Test(arguments: Backend.allCases) func threeRunnersAtOnceReadEachUserOnceAndRemindEachOnce(_ backend: Backend)
        async throws
    {
        let db = try await seeded(backend, due: 1_500)
        let stores = [db.store, try await db.reopen(), try await db.reopen()]
        let summaries = try await withThrowingTaskGroup(of: RunSummary.self) { group in
            for (index, store) in stores.enumerated() {
                group.addTask {
                    var options = ReminderRunOptions(now: Self.slot + Int64(index), runID: "runner-\(index)")
                    options.pageSize = 20
                    return try await DiaryReminderRunner(store: store, sender: RecordingSender(), logger: quietLogger)
                        .run(options)
                }
            }
            return try await group.reduce(into: []) { $0.append($1) }
        }
        for store in stores.dropFirst() { await store.close() }
        #expect(summaries.map(\.claimed).reduce(0, +) == 1_500)
        // Each due user was read by one runner: no candidate read was for a user another runner had.
        #expect(summaries.map(\.candidates).reduce(0, +) == 1_500, "\(summaries.map(\.text))")
        #expect(summaries.allSatisfy { ($0.skipped["claim_lost"] ?? 0) + ($0.skipped["already_reminded"] ?? 0) == 0 })
        #expect(summaries.allSatisfy { $0.buckets == 9 })  // 1,500 keys, pages of 20, 8 pages a bucket
        #expect(summaries.map { $0.bucketsLeased ?? 0 }.reduce(0, +) == 9)
        for summary in summaries { #expect(summary.otherRunners == 1_500 - summary.candidates) }
        #expect(try await db.count("SELECT count(*) FROM notification_logs WHERE status = 'sent'") == 1_500)
        #expect(try await db.count("SELECT count(DISTINCT user_id) FROM notification_logs") == 1_500)
        #expect(
            try await db.count("SELECT count(*) FROM due_set_leases WHERE finished_at IS NULL") == 0)
    }

    /// One lease takes one bucket, whatever the table's statistics say. Planned with the statistics of an empty
    /// table (a database analysed before any run, as `scripts/bench-runners` does), PostgreSQL ran a lease
    /// written as a join to a `LIMIT 1` subquery once per row: the first runner leased all twelve buckets,
    /// sent one and left the rest held.
    @Test(arguments: Backend.allCases) func oneLeaseTakesOneBucketWhateverTheStatistics(_ backend: Backend)
        async throws
    {
        let db = try await TemporaryDatabase(backend)
        try await db.execute("ANALYZE")
        try await db.store.openLeases(runKey: "r", buckets: 12, now: Self.slot)
        #expect(try await db.store.leaseBucket(runKey: "r", holder: "a", now: Self.slot, until: Self.slot + 600) == 0)
        #expect(try await db.count("SELECT count(*) FROM due_set_leases WHERE holder IS NOT NULL") == 1)
        #expect(try await db.store.leaseBucket(runKey: "r", holder: "b", now: Self.slot, until: Self.slot + 600) == 1)
        try await db.store.finishBucket(runKey: "r", bucket: 0, holder: "b", now: Self.slot)  // not b's: no effect
        try await db.store.finishBucket(runKey: "r", bucket: 1, holder: "b", now: Self.slot)
        #expect(try await db.strings("SELECT holder FROM due_set_leases WHERE finished_at IS NOT NULL") == ["b"])
        #expect(try await db.count("SELECT count(*) FROM due_set_leases WHERE holder IS NOT NULL") == 2)
    }

    @Test(arguments: Backend.allCases) func aBucketHeldByARunnerThatDiedGoesToTheNextRun(_ backend: Backend)
        async throws
    {
        let db = try await seeded(backend, due: 1_500)
        // A runner of this minute took bucket 0 and died.
        let plan = try #require(DueSetBuckets(keys: 1_500, pageSize: 20, now: Self.slot, shard: .all))
        let runKey = plan.runKey
        try await db.store.openLeases(runKey: runKey, buckets: plan.count, now: Self.slot)
        #expect(
            try await db.store.leaseBucket(runKey: runKey, holder: "dead", now: Self.slot, until: Self.slot + 600) == 0)
        let first = try await run(db, at: Self.slot + 30, runID: "alive")
        #expect(first.bucketsLeased == plan.count - 1)
        #expect(first.otherRunners > 0)
        #expect(first.claimed == 1_500 - first.otherRunners)
        // The next scheduled run is another run: it reminds the dead runner's users, and nobody twice.
        let next = try await run(db, at: Self.slot + 15 * 60, runID: "next")
        #expect(next.claimed == first.otherRunners)
        #expect(try await db.count("SELECT count(*) FROM notification_logs WHERE status = 'sent'") == 1_500)
        // A dry run leases nothing.
        var dry = ReminderRunOptions(now: Self.slot + 30 * 60, dryRun: true, runID: "dry")
        dry.pageSize = 20
        _ = try await DiaryReminderRunner(store: db.store, sender: RecordingSender(), logger: quietLogger).run(dry)
        #expect(
            try await db.count(
                "SELECT count(DISTINCT run_key) FROM due_set_leases") == 2)
    }
}

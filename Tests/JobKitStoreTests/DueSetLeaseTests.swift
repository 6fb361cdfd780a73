import Foundation
import JobKitTestSupport
import JobKitWiring
import Synchronization
import Testing

@testable import JobKit

/// Runners started together without `--shard` split the due set by leased buckets: each user is read by one
/// runner only, every user is reminded once, and a runner that dies holding a bucket leaves its users to the
/// next run.
@Suite struct DueSetLeaseTests {
    static let slot = Timestamps.parse("2026-11-21T20:00:00Z")!

    static func keys(_ ids: [String]) -> [DueKey] { ids.sorted().map { DueKey(userID: $0, query: 0) } }

    @Test func bucketsAreContiguousEvenAndNeverSplitAUser() throws {
        var keys = Self.keys((0..<100_000).map { "user-\($0)" })
        let plan = try #require(DueSetBuckets(keys: keys, pageSize: 1_000, now: Self.slot, shard: .all))
        #expect(plan.count == 12)  // 8 pages a bucket at least
        let ranges = (0..<plan.count).map(plan.range(of:))
        #expect(ranges.first?.lowerBound == 0 && ranges.last?.upperBound == keys.count)
        #expect(zip(ranges, ranges.dropFirst()).allSatisfy { $0.upperBound == $1.lowerBound })
        #expect(ranges.allSatisfy { abs($0.count - keys.count / 12) <= 1 })
        // A user due for two periods (two keys) is never split between buckets.
        keys = Self.keys((0..<3_000).map { "user-\($0 / 2)" })
        let paired = try #require(DueSetBuckets(keys: keys, pageSize: 100, now: Self.slot, shard: .all))
        for bucket in 1..<paired.count {
            let start = paired.range(of: bucket).lowerBound
            #expect(keys[start].userID != keys[start - 1].userID)
        }
        let count = { (n: Int) in
            DueSetBuckets(keys: Self.keys((0..<n).map { "u\($0)" }), pageSize: 1_000, now: Self.slot, shard: .all)?
                .count
        }
        #expect(count(1_000) == nil)  // one page: nothing to split
        #expect(count(1_001) == 2)
        #expect(count(24_000) == 3)
        #expect(count(400_000) == DueSetBuckets.maximum)
    }

    @Test func runnersShareLeasesOnlyForTheSameMinuteShardAndDueSet() {
        let keys = Self.keys((0..<5_000).map { "user-\($0)" })
        let key = { (now: Int64, shard: Shard, keys: [DueKey]) in
            DueSetBuckets(keys: keys, pageSize: 100, now: now, shard: shard)!.runKey
        }
        #expect(key(Self.slot + 5, .all, keys) == key(Self.slot + 59, .all, keys))
        #expect(key(Self.slot + 59, .all, keys) != key(Self.slot + 60, .all, keys))
        #expect(key(Self.slot, .all, keys) != key(Self.slot, Shard(index: 1, count: 2), keys))
        // One user more or less, or the same user due by another query: another due set, other buckets.
        #expect(key(Self.slot, .all, keys) != key(Self.slot, .all, Array(keys.dropLast())))
        var other = keys
        other[7] = DueKey(userID: other[7].userID, query: 1)
        #expect(key(Self.slot, .all, keys) != key(Self.slot, .all, other))
        #expect(key(Self.slot, .all, keys).hasPrefix("diary-reminder 2026-11-21T20:00:00Z shard 1/1 keys 5000 digest "))
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
        #expect(summaries.allSatisfy { ($0.skipped[.claimLost] ?? 0) + ($0.skipped[.alreadyReminded] ?? 0) == 0 })
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
        // A runner of this minute took bucket 0 and died before claiming anyone.
        let dying = DiaryReminderRunner(
            store: db.store, ledger: db.store, warnings: db.store,
            leases: FailingLeases(inner: db.store, failOn: 1, afterTaking: true),
            sender: RecordingSender(), catalog: .builtIn, logger: quietLogger)
        var options = ReminderRunOptions(now: Self.slot, runID: "dead")
        options.pageSize = 20
        await #expect(throws: JobError.self) { try await dying.run(options) }
        #expect(try await db.count("SELECT count(*) FROM notification_logs") == 0)
        #expect(try await db.strings("SELECT holder FROM due_set_leases WHERE bucket = 0") == ["dead"])
        let first = try await run(db, at: Self.slot + 30, runID: "alive")
        #expect(first.bucketsLeased == 8)  // of 9
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

    /// A runner stopped mid-bucket (SIGTERM) gives the bucket back: another runner of the same run takes it at once
    /// and reminds its users the stopped runner had not claimed, nobody twice. The bucket stayed leased to the
    /// stopped runner, and its other users waited for the next scheduled run, 15 minutes later.
    @Test(arguments: Backend.allCases) func aBucketOfAStoppedRunnerGoesToAnotherRunnerOfTheSameRun(
        _ backend: Backend
    ) async throws {
        let db = try await seeded(backend, due: 1_500)
        let stop = StopRequest()
        let stopped = DiaryReminderRunner(
            store: db.store, sender: StoppingSender(stop: stop), logger: quietLogger)
        var options = ReminderRunOptions(now: Self.slot, runID: "stopped")
        options.pageSize = 20
        options.stop = stop
        let first = try await stopped.run(options)
        #expect(first.stoppedBy == "SIGTERM")
        #expect(first.claimed > 0 && first.claimed < 1_500 / 9, "\(first.text)")
        #expect(try await db.count("SELECT count(*) FROM due_set_leases WHERE holder IS NOT NULL") == 0)

        let other = try await run(db, at: Self.slot + 20, runID: "other")
        #expect(other.bucketsLeased == 9, "\(other.text)")
        #expect(other.otherRunners == 0)
        #expect(other.claimed == 1_500 - first.claimed)
        #expect(try await db.count("SELECT count(*) FROM notification_logs WHERE status = 'sent'") == 1_500)
        #expect(try await db.count("SELECT count(DISTINCT user_id) FROM notification_logs") == 1_500)
    }

    /// Records what it is given, and asks the run to stop at its first batch.
    final class StoppingSender: Sender {
        let stop: StopRequest
        let inner = RecordingSender()
        init(stop: StopRequest) { self.stop = stop }
        func canDeliver(to provider: Provider) -> Bool { true }
        func send(_ batch: [OutgoingNotification]) async -> [DeliveryReport] {
            stop.request("SIGTERM")
            return await inner.send(batch)
        }
        func shutdown() async {}
    }

    /// Leases whose `failOn`-th lease fails as a database that went away: before taking a bucket, or after
    /// (a runner that dies holding it).
    final class FailingLeases: DueSetLeases {
        let inner: any DueSetLeases
        let failOn: Int
        let afterTaking: Bool
        let calls = Mutex(0)

        init(inner: any DueSetLeases, failOn: Int, afterTaking: Bool) {
            self.inner = inner
            self.failOn = failOn
            self.afterTaking = afterTaking
        }

        func openLeases(runKey: String, buckets: Int, now: Int64) async throws(JobError) {
            try await inner.openLeases(runKey: runKey, buckets: buckets, now: now)
        }
        func leaseBucket(runKey: String, holder: String, now: Int64, until: Int64) async throws(JobError) -> Int? {
            guard
                calls.withLock({
                    $0 += 1
                    return $0
                }) == failOn
            else {
                return try await inner.leaseBucket(runKey: runKey, holder: holder, now: now, until: until)
            }
            if afterTaking { _ = try await inner.leaseBucket(runKey: runKey, holder: holder, now: now, until: until) }
            throw .unavailable("the database went away")
        }
        func finishBucket(runKey: String, bucket: Int, holder: String, now: Int64) async throws(JobError) {
            try await inner.finishBucket(runKey: runKey, bucket: bucket, holder: holder, now: now)
        }
        func releaseBucket(runKey: String, bucket: Int, holder: String, freeFrom: Int64) async throws(JobError) {
            try await inner.releaseBucket(runKey: runKey, bucket: bucket, holder: holder, freeFrom: freeFrom)
        }
    }

    /// A lease that fails fails the run (exit 69), after what the run already sent is recorded.
    @Test func aFailingLeaseFailsTheRunAfterRecordingWhatWasSent() async throws {
        let db = try await seeded(.sqlite, due: 1_500)
        let runner = DiaryReminderRunner(
            store: db.store, ledger: db.store, warnings: db.store,
            leases: FailingLeases(inner: db.store, failOn: 2, afterTaking: false),
            sender: RecordingSender(),
            catalog: .builtIn, logger: quietLogger)
        var options = ReminderRunOptions(now: Self.slot, runID: "r")
        options.pageSize = 20
        await #expect(throws: JobError.unavailable("the database went away")) { try await runner.run(options) }
        let claimedUsers = try await db.strings("SELECT user_id FROM notification_logs ORDER BY user_id")
        let dueUsers = try await db.strings("SELECT id FROM users ORDER BY id")
        // The first bucket: the first ninth of the due set in user-id order.
        let firstBucket = Array(dueUsers.prefix(claimedUsers.count))
        #expect(claimedUsers == firstBucket)
        #expect(abs(firstBucket.count - 1_500 / 9) <= 1)
        // The first bucket's users were all claimed, sent and recorded; nobody else was claimed.
        #expect(firstBucket.count > 0)
        #expect(try await db.count("SELECT count(*) FROM notification_logs") == firstBucket.count)
        #expect(try await db.count("SELECT count(*) FROM notification_logs WHERE status = 'sent'") == firstBucket.count)
    }
}

/// FNV-1a as published (the reference vectors), and its running form: folding values one after another
/// hashes the same as hashing them joined, which is what a due set's digest relies on.
@Suite struct StableHashTests {
    @Test func theReferenceVectors() {
        #expect(StableHash.fnv1a("") == 0xcbf2_9ce4_8422_2325)
        #expect(StableHash.fnv1a("a") == 0xaf63_dc4c_8601_ec8c)
        #expect(StableHash.fnv1a("foobar") == 0x8594_4171_f739_67e8)
    }

    @Test func foldingPartsHashesTheirJoin() {
        var hash = StableHash.fnv1aBasis
        StableHash.fnv1a("foo".utf8, into: &hash)
        StableHash.fnv1a("bar".utf8, into: &hash)
        #expect(hash == StableHash.fnv1a("foobar"))
        var word = StableHash.fnv1aBasis
        StableHash.fnv1a(word: 0x0807_0605_0403_0201, into: &word)
        var bytes = StableHash.fnv1aBasis
        StableHash.fnv1a([1, 2, 3, 4, 5, 6, 7, 8] as [UInt8], into: &bytes)
        #expect(word == bytes)
    }
}

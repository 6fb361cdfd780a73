/// How runners started together without `--shard` split one run's due set: into ``count`` buckets, each a
/// contiguous run of the due set in user-id order (so that a page still reads neighbouring rows of every table),
/// each leased by one runner at a time (``DueSetLeases``). A runner takes the next bucket that nobody holds or
/// has finished, sends its users, marks it finished, and takes another, so fast runners take more and none
/// reads a user another runner has. Runners share leases only when they evaluate the same minute of the same
/// shard and have the same due set (the run key holds a digest of it), so that bucket i is the same users for
/// each; any others work as before, and the claims keep every user to one reminder whatever the leases say.
/// A runner that dies leaves its bucket leased until the claim lease runs out: its users go to the next run,
/// as its claims would.
package struct DueSetBuckets: Sendable, Hashable {
    /// At most this many buckets: fine enough that four runners end within a bucket of each other, coarse
    /// enough that the round trips (two per bucket) cost little.
    package static let maximum = 32
    /// Pages per bucket, at least: a bucket's last page is a partial one, so fewer pages per bucket would mean
    /// noticeably more pages (per-page costs) than the due set needs.
    package static let pagesPerBucket = 8

    package var count: Int { starts.count }
    /// Identifies the run that runners share: the job, the minute it evaluates, its shard and due set.
    package let runKey: String
    /// Where each bucket starts in the due set; never between two keys of one user.
    private let starts: [Int]
    private let total: Int

    /// `keys`: the run's due set in user-id order. Nil when leasing is not worth its round trips: one page.
    package init?(keys: [DueKey], pageSize: Int, now: Int64, shard: Shard) {
        let page = max(1, pageSize)
        guard keys.count > page else { return nil }
        let wanted = min(Self.maximum, max(2, keys.count / (Self.pagesPerBucket * page)))
        var starts = [0]
        for bucket in 1..<wanted {
            var start = max(keys.count * bucket / wanted, starts.last! + 1)
            while start < keys.count && keys[start].userID == keys[start - 1].userID { start += 1 }
            if start < keys.count { starts.append(start) }
        }
        self.starts = starts
        total = keys.count
        var digest = StableHash.fnv1aBasis
        for key in keys {
            StableHash.fnv1a(key.userID.utf8, into: &digest)
            StableHash.fnv1a(word: UInt64(truncatingIfNeeded: key.query), into: &digest)
        }
        runKey =
            "\(DiaryReminderRunner.jobName) \(Timestamps.format(Self.minute(of: now))) shard \(shard) keys \(keys.count)"
            + " digest \(String(digest, radix: 16)) buckets \(starts.count)"
    }

    /// The start of the minute `now` is in: runners of one run evaluate the same minute.
    static func minute(of now: Int64) -> Int64 { now - ((now % 60) + 60) % 60 }

    /// The range of the due set that `bucket` holds.
    package func range(of bucket: Int) -> Range<Int> {
        starts[bucket]..<(bucket + 1 < starts.count ? starts[bucket + 1] : total)
    }
}

/// What leasing buckets of a due set needs from a store: one statement each, atomic.
package protocol DueSetLeases: Sendable {
    /// Makes the run's `buckets` lease rows, free, unless they exist (every runner of the run calls it once),
    /// and forgets rows whose lease ran out more than a day before `now`.
    func openLeases(runKey: String, buckets: Int, now: Int64) async throws(JobError)
    /// Takes the lowest bucket of `runKey` that is neither finished nor held by a lease running past `now`,
    /// for `holder` until `until`; nil when there is none.
    func leaseBucket(runKey: String, holder: String, now: Int64, until: Int64) async throws(JobError) -> Int?
    /// Marks a bucket `holder` holds as finished: no runner takes it again.
    func finishBucket(runKey: String, bucket: Int, holder: String, now: Int64) async throws(JobError)
    /// Gives back a bucket `holder` holds, unfinished: free from `freeFrom` on (the minute the run key names, so
    /// that every runner of the run may take it).
    func releaseBucket(runKey: String, bucket: Int, holder: String, freeFrom: Int64) async throws(JobError)
}

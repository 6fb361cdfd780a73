import Logging

/// The due set as one run works through it: bucket by bucket, leased one at a time, when the run shares it
/// with other runners; otherwise all of it at once.
struct DueSetWork {
    private let keys: [DueKey]
    private struct Leasing {
        let leases: any DueSetLeases
        let plan: DueSetBuckets
    }
    private let leasing: Leasing?
    private let buckets: [[DueKey]]
    private let holder: String
    private let now: Int64
    private let until: Int64
    private var current: Int?
    private var handedOut = false
    private var keysTaken = 0

    init(_ keys: [DueKey], leases: (any DueSetLeases)?, options: ReminderRunOptions, summary: inout RunSummary)
        async throws(JobError)
    {
        self.keys = keys
        holder = options.runID
        now = options.now
        // A lease lasts as long as a claim: a runner that dies leaves both to the next run at the same time.
        until = options.now + options.claimLeaseSeconds
        if let leases,
            let plan = DueSetBuckets(keys: keys, pageSize: options.pageSize, now: now, shard: options.shard)
        {
            try await leases.openLeases(runKey: plan.runKey, buckets: plan.count, now: now)
            leasing = Leasing(leases: leases, plan: plan)
            buckets = (0..<plan.count).map { Array(keys[plan.range(of: $0)]) }
            summary.bucketsLeased = 0
            summary.buckets = plan.count
        } else {
            leasing = nil
            buckets = []
        }
    }

    /// Gives back the bucket this run holds, unfinished (none after ``next(summary:)`` returned nil), for another
    /// runner of the run to take now: the run was stopped or is out of time. The users of it this run claimed stay
    /// claimed (the next holder skips them); the rest are the next holder's. A bucket that cannot be given back is
    /// taken again once its lease runs out, as a dead runner's is.
    mutating func giveBack(logger: Logger) async {
        guard let leasing, let current else { return }
        self.current = nil
        do throws(JobError) {
            try await leasing.leases.releaseBucket(
                runKey: leasing.plan.runKey, bucket: current, holder: holder, freeFrom: DueSetBuckets.minute(of: now))
        } catch {
            logger.warning(
                "the run's bucket of the due set was not given back: its users go to the next run",
                metadata: ["error": "\(error.message)"])
        }
    }

    /// The keys to work on next: the next leased bucket (the one before it marked finished), or the whole
    /// due set once; nil when nothing is left to this run.
    mutating func next(summary: inout RunSummary) async throws(JobError) -> [DueKey]? {
        guard let leasing else {
            defer { handedOut = true }
            return handedOut ? nil : keys
        }
        let (leases, plan) = (leasing.leases, leasing.plan)
        if let current {
            try await leases.finishBucket(runKey: plan.runKey, bucket: current, holder: holder, now: now)
            self.current = nil
        }
        guard
            let bucket = try await leases.leaseBucket(runKey: plan.runKey, holder: holder, now: now, until: until),
            buckets.indices.contains(bucket)
        else {
            summary.otherRunners = keys.count - keysTaken
            return nil
        }
        current = bucket
        keysTaken += buckets[bucket].count
        summary.bucketsLeased = (summary.bucketsLeased ?? 0) + 1
        return buckets[bucket]
    }
}

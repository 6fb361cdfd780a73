import Foundation
import Logging

/// Options of one diary reminder run.
package struct ReminderRunOptions: Sendable {
    /// The instant the run evaluates (the clock, or `--now`).
    package var now: Int64
    package var rule: DueRule = .default
    /// Decide and print, claim nothing, write nothing.
    package var dryRun = false
    /// A `claimed` log row older than this belongs to a run that died: the next run takes it over.
    /// Runs stop selecting after half of it, so a live run's claims are never taken over.
    package var claimLeaseSeconds = Int64(ConfigKey.claimLeaseMinutes.number!.default) * 60
    /// Users per page of the due set (one claim transaction per page). 1,000 rather than 500: 7–20 % faster end
    /// to end at 1M users (fewer transactions and per-page costs), ~10 MB more peak RSS (BENCHMARKS.md#the-runs-pages).
    package var pageSize = 1000
    /// The slice of users this run handles (`--shard K/N`); the others are left to the other shards.
    package var shard: Shard = .all
    /// When reminders pause for a user who ignores them.
    package var pause: ReminderPause = .default
    /// No page is claimed from this instant on (a Lambda invocation's deadline, less time to finish).
    package var stopClaimingAt: ContinuousClock.Instant?
    /// Waits to record (a locked, full or unreachable database) end by this instant (a Lambda invocation's
    /// deadline, less time to report) when it comes before the claims' lease would end them.
    package var finishBy: ContinuousClock.Instant?
    /// Once requested (SIGTERM, SIGINT), no page is claimed any more: the run ends as when its time runs out.
    package var stop: StopRequest?
    package var runID: String

    package init(
        now: Int64, rule: DueRule = .default, dryRun: Bool = false, runID: String = RunID.make()
    ) {
        self.now = now
        self.rule = rule
        self.dryRun = dryRun
        self.runID = runID
    }
}

/// The diary reminder job: select who is due, claim, choose the words, send, record.
package struct DiaryReminderRunner: Sendable {
    package static let jobName = "diary-reminder"
    /// The due set, what `--explain` reads, and the history's upkeep.
    package let store: any DueSetSource & ExplainSource & HistoryUpkeep
    /// Where claims are made, answers recorded and the run journaled: the same store, unless a caller
    /// interposes (a test whose recording fails).
    package let ledger: any ClaimLedger & RunJournal
    /// Where the quota warnings that are due come from (deferred past quiet hours, left for retry, or claimed
    /// by a hook invocation that died): every run delivers them. `nil` only when built with
    /// ``init(remindersOnly:ledger:sender:catalog:logger:)``.
    package let warnings: (any ContentLimitStore & ClaimLedger)?
    /// Where runners of the same run split its due set (``DueSetBuckets``); `nil` only when built with
    /// ``init(remindersOnly:ledger:sender:catalog:logger:)``.
    package let leases: (any DueSetLeases)?
    package let sender: any Sender
    package let catalog: CopyCatalog
    package let logger: Logger
    /// What the run's time budget, its record deadline and its waits for a locked database are kept on; a
    /// manual clock in tests. (How long each phase took is measured on the process's clock.)
    package var clock: any RetryClock = SystemRetryClock()

    /// The job: reminders, and the quota warnings a diary-reminder run delivers.
    package init(
        store: any ReminderStore & ContentLimitStore & DueSetLeases, sender: any Sender,
        catalog: CopyCatalog = .builtIn, logger: Logger
    ) {
        self.init(
            store: store, ledger: store, warnings: store, leases: store, sender: sender, catalog: catalog,
            logger: logger)
    }

    /// Reminders only, on a store without quota warnings or leases: pending warnings are not delivered by this
    /// runner, and it works through the whole due set. `ledger`, when given, takes the claims, the answers and
    /// the run's journal instead of `store`.
    package init(
        remindersOnly store: any ReminderStore, ledger: (any ClaimLedger & RunJournal)? = nil, sender: any Sender,
        catalog: CopyCatalog = .builtIn, logger: Logger
    ) {
        self.init(
            store: store, ledger: ledger ?? store, warnings: nil, leases: nil, sender: sender, catalog: catalog,
            logger: logger)
    }

    init(
        store: any DueSetSource & ExplainSource & HistoryUpkeep, ledger: any ClaimLedger & RunJournal,
        warnings: (any ContentLimitStore & ClaimLedger)?, leases: (any DueSetLeases)?, sender: any Sender,
        catalog: CopyCatalog, logger: Logger
    ) {
        self.store = store
        self.ledger = ledger
        self.warnings = warnings
        self.leases = leases
        // A stored token of the wrong shape is answered as dead (`invalid_token`), never put on the wire.
        self.sender = TokenCheckingSender.wrapping(sender)
        self.catalog = catalog
        self.logger = logger
    }

    package func run(_ options: ReminderRunOptions) async throws(JobError) -> RunSummary {
        let started = ContinuousClock.now
        // Claims stop when the run's budget (half the lease) or the caller's deadline (a Lambda's) comes first.
        let budget = clock.now + .seconds(options.claimLeaseSeconds / 2)
        let claimUntil = Deadline(budget, on: clock).notAfter(options.stopClaimingAt)
        let recordDeadline = Deadline.toRecord(
            claimLeaseSeconds: options.claimLeaseSeconds, finishBy: options.finishBy, on: clock)
        var summary = RunSummary(job: Self.jobName, runID: options.runID, now: options.now, dryRun: options.dryRun)
        if options.shard.count > 1 { summary.shard = options.shard.description }
        var logger = self.logger
        logger[metadataKey: "run"] = "\(options.runID)"
        do {
            try await work(
                options, claimUntil: claimUntil, recordDeadline: recordDeadline, summary: &summary, logger: logger)
        } catch {
            summary.durationMs = Phases.milliseconds(ContinuousClock.now - started)
            if !options.dryRun {
                summary.error = error.message
                await ledger.recordFailedRun(
                    id: options.runID, job: Self.jobName, runAt: options.now, summary: summary,
                    recordDeadline: recordDeadline, logger: logger)
            }
            throw error
        }
        summary.durationMs = Phases.milliseconds(ContinuousClock.now - started)
        let failure = await sender.channelFailure()
        summary.error = (failure ?? summary.failure)?.message
        if !options.dryRun {
            try await ledger.recordRun(
                id: options.runID, job: Self.jobName, runAt: options.now,
                durationMs: summary.durationMs, outcome: summary.recordedOutcome(channelFailure: failure),
                summaryJSON: summary.json)
        }
        if let failure {
            logger.error("run failed: \(failure.message)", metadata: ["summary": "\(summary.text)"])
            throw failure
        }
        return summary
    }

    /// Ends the reminders whose catch-up window has closed with devices not reached (``MissedReminders``), and
    /// says so: the summary's `devices_missed`, one error line, the counter. Best effort, like the run's other
    /// upkeep: a store error is a warning and the run goes on. The run's exit code stays its own work's: the
    /// devices were left by earlier runs, whose exit codes said what a provider did then.
    private func closeMissedReminders(_ options: ReminderRunOptions, summary: inout RunSummary, logger: Logger) async {
        do throws(JobError) {
            let closed = try await store.closeUnfinishedReminders(
                claimedIn: MissedReminders.claimedRange(now: options.now, rule: options.rule),
                staleBefore: options.now - options.claimLeaseSeconds, limit: MissedReminders.limit,
                runID: options.runID, now: options.now, MissedReminders.resolutions)
            guard !closed.isEmpty else { return }
            summary.remindersMissed = closed.count
            summary.devicesMissed = MissedReminders.missedDevices(closed)
            let devices = summary.devicesMissed.reduce(0) { $0 + $1.devices }
            logger.error(
                "reminders missed: \(closed.count) reminder\(closed.count == 1 ? "" : "s")' catch-up window closed with \(devices) device\(devices == 1 ? "" : "s") not reached",
                metadata: [
                    "reminders_missed": "\(closed.count)", "devices_missed": "\(devices)",
                    "by_reason": .array(summary.devicesMissed.map { "\($0.provider) \($0.reason)=\($0.devices)" }),
                ])
        } catch {
            logger.warning(
                "reminders whose window closed were not looked for", metadata: ["error": "\(error.message)"])
        }
    }

    /// The run itself: select, claim, send and record the due reminders, then the pending quota warnings. What
    /// it did is counted in `summary`, also when it throws.
    private func work(
        _ options: ReminderRunOptions, claimUntil: Deadline, recordDeadline: Deadline, summary: inout RunSummary,
        logger: Logger
    ) async throws(JobError) {
        var phases = Phases()
        if !options.dryRun { try await startJournal(options, summary: &summary, logger: logger) }
        let queries = try await dueQueries(options, summary: &summary, phases: &phases, logger: logger)
        let keys = try await shardKeys(queries, options: options, summary: &summary, phases: &phases)
        // Runners of the same run split the due set bucket by bucket; a lone runner takes every bucket.
        var buckets = try await DueSetWork(
            keys, leases: options.dryRun ? nil : leases, options: options, summary: &summary)
        let learned = try await learnedOutcomes(queries, options, &phases)
        try await claimAndDeliver(
            &buckets, queries: queries, learned: learned, options: options, claimUntil: claimUntil,
            recordDeadline: recordDeadline, summary: &summary, phases: &phases, logger: logger)
        // Then the quota warnings held for quiet hours or left for retry: the reminders, due at the minute their
        // users chose, go first.
        try await phases.measure(.send) { () async throws(JobError) in
            try await deliverPendingWarnings(
                options, summary: &summary, claimUntil: claimUntil, recordDeadline: recordDeadline, logger: logger)
        }
        await conclude(options, summary: &summary, logger: logger)
        summary.phasesMs = phases.milliseconds
    }

    /// Journals the run as `running`, ends earlier runs that never recorded an end, prepares the history's
    /// partitions and closes the reminders whose window closed unreached.
    private func startJournal(_ options: ReminderRunOptions, summary: inout RunSummary, logger: Logger)
        async throws(JobError)
    {
        try await ledger.recordRunStart(id: options.runID, job: Self.jobName, runAt: options.now, summary: summary)
        summary.earlierRunsWithoutEnd = await ledger.failRunsWithoutEnd(
            job: Self.jobName, now: options.now, leaseSeconds: options.claimLeaseSeconds, logger: logger)
        await store.prepareHistory(now: options.now, logger: logger)
        await closeMissedReminders(options, summary: &summary, logger: logger)
    }

    /// The run's due set as queries, one per (zone, local day, minute range) that is due at `options.now`; users
    /// in a zone this system does not know, or with a reminder time that is not `HH:MM`, are counted skipped.
    private func dueQueries(
        _ options: ReminderRunOptions, summary: inout RunSummary, phases: inout Phases, logger: Logger
    ) async throws(JobError) -> [DueQuery] {
        let malformed = try await phases.measure(.select) { () async throws(JobError) in
            try await store.malformedReminderTimeCount()
        }
        if malformed > 0 {
            logger.warning("users skipped: reminder time is not HH:MM", metadata: ["count": "\(malformed)"])
        }
        summary.candidates += malformed
        summary.skip(.invalidReminderTime, malformed)

        // The run's due set, in user-id order whatever the zone: each page then reads neighbouring rows of
        // every table instead of one row per page per zone.
        var queries: [DueQuery] = []
        for zoneName in try await store.reminderZones() {
            guard let clock = ZoneClock(identifier: zoneName) else {
                let count = try await store.enabledUserCount(zone: zoneName)
                logger.warning(
                    "users skipped: unknown time zone", metadata: ["zone": "\(zoneName)", "count": "\(count)"])
                summary.candidates += count
                summary.skip(.invalidTimezone, count)
                continue
            }
            for slot in options.rule.dueSlots(now: options.now, in: clock) {
                let day = clock.dayBounds(slot.period)
                for minutes in slot.minuteRanges {
                    var query = DueQuery(
                        zone: zoneName, period: slot.period.description, minutes: minutes, day: day,
                        type: .diaryReminder)
                    if readsHistory(options) {
                        query.historyFrom =
                            historyKey(userID: "", period: query.period, options).periods.lowerBound
                    }
                    queries.append(query)
                }
            }
        }
        return queries
    }

    /// The keys of the due set this runner's shard holds, in user-id order, a user once per period.
    private func shardKeys(
        _ queries: [DueQuery], options: ReminderRunOptions, summary: inout RunSummary, phases: inout Phases
    ) async throws(JobError) -> [DueKey] {
        let allKeys = try await phases.measure(.select) { () async throws(JobError) in try await store.dueKeys(queries)
        }
        var keys: [DueKey] = []
        keys.reserveCapacity(allKeys.count)
        var periodsOfUser: [String] = []  // of the user of the last key kept (a user's keys are adjacent)
        for key in allKeys {
            guard options.shard.contains(userID: key.userID) else {
                summary.otherShards += 1
                continue
            }
            if key.userID != keys.last?.userID { periodsOfUser = [] }
            // Two queries of one period (minute ranges that meet around a clock change) name a user once.
            let period = queries[key.query].period
            guard !periodsOfUser.contains(period) else { continue }
            periodsOfUser.append(period)
            keys.append(key)
        }
        return keys
    }

    /// Claims the due set a page at a time, bucket by bucket, and delivers each claimed page while the next is
    /// selected and claimed.
    private func claimAndDeliver(
        _ buckets: inout DueSetWork, queries: [DueQuery], learned: [String: [String: [Int: MessageOutcome]]],
        options: ReminderRunOptions, claimUntil: Deadline,
        recordDeadline: Deadline, summary: inout RunSummary, phases: inout Phases, logger: Logger
    ) async throws(JobError) {
        // Pages are delivered as child tasks of the run: cancelling the run cancels them, and none outlives it.
        let paging: Result<Void, JobError> = await withTaskGroup(of: DeliveryPipeline.Finished.self) { group in
            var pipeline = DeliveryPipeline()
            do throws(JobError) {
                var pages: [[DueKey]] = []
                var index = 0
                // The candidates of the page to claim next, selected while the page before it was being claimed.
                var selected: Result<[ReminderCandidate], JobError>?
                while true {
                    if index == pages.count {
                        // The bucket's pages are all claimed: finish it and lease the next (none left: done).
                        let next: [DueKey]?
                        do throws(JobError) {
                            next = try await buckets.next(summary: &summary)
                        } catch {
                            try await pipeline.drain(&group, into: &summary, phases: &phases)
                            throw error
                        }
                        guard let next else { break }
                        pages = Self.pages(of: next, size: options.pageSize)
                        index = 0
                        continue
                    }
                    let pageKeys = pages[index]
                    index += 1
                    if Self.stopsClaiming(
                        options, claimUntil: claimUntil, leaving: "the rest", summary: &summary, logger: logger)
                    {
                        break
                    }
                    // A channel that cannot take anything more (the outbox's disk is full): claim no more.
                    if await sender.channelFailure() != nil { break }
                    let claimed: ClaimedPage?
                    do throws(JobError) {
                        let selection: Result<[ReminderCandidate], JobError>
                        if let selected {
                            selection = selected
                        } else {
                            selection = await Self.select(pageKeys, of: queries, from: store, into: &phases)
                        }
                        let page = try selection.get()
                        // On a store with connections to spare (PostgreSQL), the next page is selected while this one is
                        // claimed.
                        let ahead = store.selectsWhileClaiming && index < pages.count
                        let (nextKeys, dueQueries, store) = (ahead ? pages[index] : [], queries, store)
                        async let following = Self.timedSelect(nextKeys, of: dueQueries, from: store)
                        claimed = try await claim(
                            page, queries: queries, learned: learned, options: options, summary: &summary,
                            phases: &phases)
                        let next = await following
                        phases.add(.select, next.duration)
                        selected = ahead ? next.result : nil
                    } catch {
                        // What is already on its way is still sent and recorded before the run fails.
                        try await pipeline.drain(&group, into: &summary, phases: &phases)
                        throw error
                    }
                    // This page was selected and claimed while the pages before it were being sent; now it goes out
                    // while the next one is selected.
                    if let claimed {
                        try await pipeline.submit(claimed, in: &group, summary: &summary, phases: &phases) {
                            page async throws(JobError) in
                            try await deliver(page, options: options, recordDeadline: recordDeadline)
                        }
                    }
                }
                // Stopped early (a signal, the time budget, a failed channel): the bucket in hand goes back to the
                // other runners. A run that went through every bucket holds none.
                await buckets.giveBack(logger: logger)
                try await pipeline.drain(&group, into: &summary, phases: &phases)
                return .success(())
            } catch {
                return .failure(error)
            }
        }
        try paging.get()
    }

    /// What the run concludes from its answers: the providers' trouble (the exit code), the logs that say so, the
    /// credentials minted, the tokens of the wrong shape.
    private func conclude(_ options: ReminderRunOptions, summary: inout RunSummary, logger: Logger) async {
        summary.troubles = ProviderTrouble.conclude(
            summary.troubles, pending: summary.pendingRetry, outcomesByProvider: summary.outcomesByProvider,
            threshold: sender.outageThreshold)
        if !options.dryRun {
            ProviderTrouble.log(summary.troubles, logger: logger)
            PendingDevices.log(summary.pendingRetry, troubles: summary.troubles, logger: logger)
            await HeldDevices.record(
                [], releasing: HeldDevices.healthy(summary.outcomesByProvider, troubles: summary.troubles),
                store: ledger, runID: options.runID, now: options.now, logger: logger)
        }
        summary.credentialMints = await sender.credentialMints()
        if summary.invalidTokens > 0 {
            logger.warning(
                "devices deactivated: stored token has the wrong shape for its provider (written around the registration API?)",
                metadata: ["count": "\(summary.invalidTokens)", "reason": "\(DeviceToken.invalidReason)"])
        }
    }

    /// Whether the run is to claim nothing more: it was asked to stop (a signal) or its claim budget is spent.
    /// Either way the log and the summary say so, and what is left (`leaving`) waits for the next run.
    static func stopsClaiming(
        _ options: ReminderRunOptions, claimUntil: Deadline, leaving what: String, summary: inout RunSummary,
        logger: Logger
    ) -> Bool {
        if let reason = options.stop?.reason {
            logger.warning("stopped by \(reason): leaving \(what) to the next run")
            summary.stoppedEarly = true
            summary.stoppedBy = reason
            return true
        }
        if claimUntil.hasPassed {
            logger.warning("time budget spent: leaving \(what) to the next run")
            summary.stoppedEarly = true
            return true
        }
        return false
    }

    /// `keys` cut into pages of about `size`, never between two keys of one user: a user due for two periods
    /// (slots on both sides of local midnight) has both decided from the same reads, whether or not the next
    /// page is selected before this one is claimed.
    static func pages(of keys: [DueKey], size: Int) -> [[DueKey]] {
        var pages: [[DueKey]] = []
        var start = 0
        while start < keys.count {
            var end = min(start + max(1, size), keys.count)
            while end < keys.count && keys[end].userID == keys[end - 1].userID { end += 1 }
            pages.append(Array(keys[start..<end]))
            start = end
        }
        return pages
    }

    /// The candidates of one page (none for no keys), and how long selecting them took. A struct, not a tuple:
    /// Swift 6.3's release build garbled a labeled tuple returned from a typed-throws `do`/`catch` in a child task.
    private struct Selection: Sendable {
        let result: Result<[ReminderCandidate], JobError>
        let duration: Duration
    }

    private static func timedSelect(
        _ keys: [DueKey], of queries: [DueQuery], from store: any DueSetSource
    ) async -> Selection {
        guard !keys.isEmpty else { return Selection(result: .success([]), duration: .zero) }
        let start = ContinuousClock.now
        let result: Result<[ReminderCandidate], JobError>
        do throws(JobError) {
            result = .success(try await store.dueCandidates(keys, of: queries))
        } catch {
            result = .failure(error)
        }
        return Selection(result: result, duration: ContinuousClock.now - start)
    }

    private static func select(
        _ keys: [DueKey], of queries: [DueQuery], from store: any DueSetSource, into phases: inout Phases
    ) async -> Result<[ReminderCandidate], JobError> {
        let selection = await timedSelect(keys, of: queries, from: store)
        phases.add(.select, selection.duration)
        return selection.result
    }

    /// Decides, checks devices and claims one page; `nil` when nobody on it is to be sent to.
    private func claim(
        _ page: [ReminderCandidate], queries: [DueQuery], learned: [String: [String: [Int: MessageOutcome]]],
        options: ReminderRunOptions,
        summary: inout RunSummary, phases: inout Phases
    ) async throws(JobError) -> ClaimedPage? {
        let staleBefore = options.now - options.claimLeaseSeconds
        var requests: [ClaimRequest] = []
        // The query of each request, by (user, period): a user can be due under two queries of one run (slots
        // on both sides of local midnight), never twice for one period.
        var queryOf: [ClaimKey: DueQuery] = [:]
        // Devices the store read with the candidates, by user; used when it read them for every requested user.
        var devicesRead: [String: [Device]] = [:]
        var passed: [(candidate: ReminderCandidate, query: DueQuery, plan: ReminderPlan)] = []
        for candidate in page {
            summary.candidates += 1
            // The plan's step 1 (``ReminderPlan``).
            let plan = ReminderPlan(
                ReminderDecision.decide(
                    hasActiveDevice: candidate.hasActiveDevice, wroteToday: candidate.wroteToday,
                    log: candidate.log, staleBefore: staleBefore))
            if let reason = plan.skip {
                summary.skip(reason)
            } else {
                passed.append((candidate, queries[candidate.query], plan))
            }
        }
        // Read with the candidates (SQLite), or here, a statement for the page (PostgreSQL).
        let read =
            passed.allSatisfy { $0.candidate.history != nil }
            ? [:]
            : try await history(of: passed.map { ($0.candidate, $0.query) }, options, &phases)
        // The pause rule's first period, once per query of the page: date arithmetic is not free at 100,000 users.
        var pauseFrom: [Int: String] = [:]
        for (candidate, query, passedPlan) in passed {
            let history = candidate.history ?? read[HistoryKey(candidate.userID, query)]
            let from = pauseFrom[candidate.query] ?? options.pause.lookBack(before: query.period).lowerBound
            pauseFrom[candidate.query] = from
            // The plan's step 2: the pause, then the words.
            let plan = choose(
                passedPlan, userID: candidate.userID, locale: candidate.locale, type: query.type,
                period: query.period, previousIndex: candidate.previousMessageIndex, history: history,
                learned: learned[query.period], pauseFrom: from, options)
            guard let request = plan.request(userID: candidate.userID, type: query.type, period: query.period) else {
                summary.skip(plan.skip ?? .paused)
                continue
            }
            summary.due += 1
            requests.append(request)
            queryOf[ClaimKey(userID: candidate.userID, period: query.period)] = query
            if let devices = candidate.devices { devicesRead[candidate.userID] = devices }
        }
        guard !requests.isEmpty else { return nil }

        // Devices first: a user whose devices all belong to an unconfigured provider is not claimed.
        let allDevices =
            requests.allSatisfy { devicesRead[$0.userID] != nil }
            ? devicesRead
            : try await phases.measure(.claim) { () async throws(JobError) in
                try await ledger.activeDevices(userIDs: requests.map(\.userID))
            }
        let devices = allDevices.mapValues { $0.filter { sender.canDeliver(to: $0.provider) } }
        var deliverable: [ClaimRequest] = []
        for request in requests {
            // The plan's step 3: no device left since selection, or only devices of an unconfigured provider.
            if let reason = ReminderPlan.deviceSkip(
                active: allDevices[request.userID] ?? [], deliverable: devices[request.userID] ?? [])
            {
                summary.skip(reason)
            } else {
                deliverable.append(request)
            }
        }
        requests = deliverable
        guard !requests.isEmpty else { return nil }

        let claims: [Claim]
        if options.dryRun {
            claims = requests.map {
                var claim = Claim(
                    logID: -1, userID: $0.userID, period: $0.period, messageIndex: $0.messageIndex, locale: $0.locale,
                    takenOver: false, deliveredDeviceIDs: [])
                claim.lastReminder = $0.pause != nil
                return claim
            }
        } else {
            claims = try await phases.measure(.claim) { () async throws(JobError) in
                try await ledger.claim(requests, runID: options.runID, now: options.now, staleBefore: staleBefore)
            }
        }
        summary.claimed += claims.count
        summary.takenOver += claims.filter(\.takenOver).count
        summary.pausing += claims.filter(\.lastReminder).count
        summary.skip(.claimLost, requests.count - claims.count)
        guard !claims.isEmpty else { return nil }

        var notifications: [OutgoingNotification] = []
        var owners: [Int] = []  // index into claims, per notification
        for (index, claim) in claims.enumerated() {
            guard let query = queryOf[ClaimKey(userID: claim.userID, period: claim.period)] else {
                throw .software("the store returned a claim that was not requested (\(claim.userID), \(claim.period))")
            }
            let kind = claim.lastReminder ? CopyKind.diaryReminderLast : CopyKind(query.type)
            let message = catalog.recordedMessage(
                kind, locale: claim.locale, index: claim.messageIndex, userID: claim.userID, period: query.period)
            for device in DeliveryLifecycle.devicesToSend(
                devices[claim.userID] ?? [], alreadyDelivered: claim.deliveredDeviceIDs)
            {
                notifications.append(
                    OutgoingNotification(
                        logID: options.dryRun ? nil : claim.logID, device: device, type: query.type,
                        period: query.period,
                        locale: claim.locale, messageIndex: claim.messageIndex, title: message.title,
                        body: message.body,
                        expiresAt: query.day.upperBound))
                owners.append(index)
            }
        }
        return ClaimedPage(claims: claims, notifications: notifications, owners: owners)
    }

    /// The histories the pause rule needs for these users and periods (none when reminders never pause).
    private func history(
        of keys: [(candidate: ReminderCandidate, query: DueQuery)], _ options: ReminderRunOptions,
        _ phases: inout Phases
    ) async throws(JobError) -> [HistoryKey: ReminderHistory] {
        guard readsHistory(options), !keys.isEmpty else { return [:] }
        let historyKeys = keys.map { HistoryKey($0.candidate.userID, $0.query) }
        return try await phases.measure(.select) { () async throws(JobError) in
            try await store.reminderHistory(historyKeys)
        }
    }

    /// Whether the run needs the candidates' history: to pause, or to learn.
    func readsHistory(_ options: ReminderRunOptions) -> Bool { options.pause.isOn || catalog.learning != nil }

    /// The history read for a user and period: the pause rule's look-back, or the learned words' recency if
    /// longer.
    func historyKey(userID: String, period: String, _ options: ReminderRunOptions) -> HistoryKey {
        // At least the previous words' periods: a store that reads the history with the candidates takes those
        // words from it.
        let days = max(options.pause.afterIgnored, CopyLearning.recentDays, DueQuery.previousReminderDays)
        let from = LocalDate(period).map { $0.adding(days: -days).description } ?? period
        return HistoryKey(userID: userID, period: period, periods: from..<period)
    }

    /// Per period of the run, the counts by locale and message that learned words are chosen by (none unless the
    /// catalog learns). A run records the days it counts; a dry run counts them without writing.
    func learnedOutcomes(_ queries: [DueQuery], _ options: ReminderRunOptions, _ phases: inout Phases)
        async throws(JobError) -> [String: [String: [Int: MessageOutcome]]]
    {
        var learned: [String: [String: [Int: MessageOutcome]]] = [:]
        for period in Set(queries.filter { $0.type == .diaryReminder }.map(\.period)) {
            learned[period] = try await phases.measure(.select) { () async throws(JobError) in
                try await learnedOutcomes(period: period, options)
            }
        }
        return learned
    }

    /// The counts of one period (``learnedOutcomes(_:_:_:)``); `nil` when the catalog does not learn.
    func learnedOutcomes(period: String, _ options: ReminderRunOptions) async throws(JobError)
        -> [String: [Int: MessageOutcome]]?
    {
        guard catalog.learning != nil else { return nil }
        return CopyLearning.byLocale(
            try await store.copyOutcomes(
                days: CopyLearning.countedDays(for: period), record: !options.dryRun, now: options.now))
    }

    /// The words of a user's reminder of `period`: the last reminder's when a pause starts with it, else the type's
    /// (learned from `learned` and the user's `history` when the catalog learns), unlike `previousIndex`. The run
    /// and explain both choose here, so that explain names the words the run sends.
    func words(
        _ type: NotificationType, last: Bool, locale: String, userID: String, period: String, previousIndex: Int?,
        learned: [String: [Int: MessageOutcome]]?, history: ReminderHistory?
    ) -> CopyChoice {
        if last {
            return catalog.choose(
                .diaryReminderLast, locale: locale, userID: userID, period: period, previousIndex: nil)
        }
        return catalog.choose(
            type, locale: locale, userID: userID, period: period, previousIndex: previousIndex,
            learned: learned.map { LearnedWords(outcomes: $0, history: history) })
    }

    enum PauseStep: Equatable {
        case remind
        /// The last reminder, and the pause its claim starts (or started, for a claim taken over).
        case last(PauseRecord)
        case paused
    }

    /// What the pause rule makes of a candidate who passed the other rules. A claim taken over keeps what it was:
    /// the last reminder only when its pause was recorded with it.
    static func pauseStep(
        _ history: ReminderHistory?, of period: String, from: String? = nil, takeOver: Bool,
        _ options: ReminderRunOptions
    ) -> PauseStep {
        guard let history else { return .remind }
        if takeOver {
            guard let pause = history.pause, pause.period == period else { return .remind }
            return .last(pause)
        }
        switch options.pause.verdict(history, period: period, from: from) {
        case .paused: return .paused
        case .remind: return .remind
        case .lastReminder(let ignored):
            return .last(PauseRecord(period: period, pausedAt: options.now, ignored: ignored))
        }
    }

    /// Sends one claimed page and records every answer and each claim's resolution; a locked database is
    /// waited for until `recordDeadline` (the claims' lease less a margin).
    private func deliver(
        _ page: ClaimedPage, options: ReminderRunOptions,
        recordDeadline: Deadline
    ) async throws(JobError) -> DeliveredPage {
        var delivered = DeliveredPage()
        let (claims, notifications, owners) = (page.claims, page.notifications, page.owners)
        let sendStart = ContinuousClock.now
        // Answers are recorded as they come: the page goes out as chunks on the same connections, and each chunk's
        // answers (and, within a chunk, those final while others wait for a retry) go to the journal at once.
        let journal =
            options.dryRun
            ? nil
            : AnswerJournal(
                store: ledger, runID: options.runID, now: options.now,
                deadline: recordDeadline, logger: logger)
        // A dry run records nothing: one send keeps its printed lines in order.
        let reports: [DeliveryReport]
        if let journal {
            let journalize: FinishedReports = { indices, reports in
                journal.add(
                    zip(indices, reports).map { i, report in
                        (
                            i,
                            DeliveryRecord(
                                logID: claims[owners[i]].logID, deviceID: notifications[i].device.id, report: report)
                        )
                    })
            }
            async let writing: Void = journal.run()
            reports = await Self.sendInChunks(notifications, sender: sender, finished: journalize)
            journal.close()
            await writing
        } else {
            reports = await sender.send(notifications)
        }
        delivered.send = ContinuousClock.now - sendStart
        guard reports.count == notifications.count else {
            throw .software("the sender answered \(reports.count) reports for \(notifications.count) notifications")
        }
        delivered.notifications = notifications.count

        let answers = PageAnswers(
            claims: claims.map {
                PageAnswers.Claim(logID: $0.logID, period: $0.period, reachedBefore: $0.deliveredDeviceIDs.count)
            },
            notifications: notifications, owners: owners, reports: reports, noDevice: "no active device at send time")
        delivered.outcomes = answers.outcomes
        delivered.outcomesByProvider = answers.byChannel
        delivered.troubles = answers.troubles
        delivered.pending = answers.pending
        for report in reports {
            if !DeliveryLifecycle.isFinal(report.outcome) { delivered.devicesPendingRetry += 1 }
            delivered.ambiguous += report.ambiguousAttempts
            if report.outcome == .tokenDead && report.reason == DeviceToken.invalidReason {
                delivered.invalidTokens += 1
            }
        }
        for status in answers.statuses {
            switch status {
            case .sent: delivered.sent += 1
            case .partial: delivered.partial += 1
            case .retry: delivered.retry += 1
            default: delivered.failed += 1
            }
        }
        let holds = HeldDevices.holds(notifications.map(\.device), reports)
        delivered.held = holds.count
        if !options.dryRun {
            let recordStart = ContinuousClock.now
            try await journal?.finish(answers.records, resolutions: answers.resolutions)
            if !holds.isEmpty {
                await HeldDevices.record(holds, store: ledger, runID: options.runID, now: options.now, logger: logger)
            }
            delivered.record = ContinuousClock.now - recordStart
        }
        return delivered
    }
}

extension DiaryReminderRunner {
    /// Notifications per chunk of a page: small enough that a chunk is answered within milliseconds of its
    /// first answer (a run killed mid-page leaves little unrecorded), large enough that a page is still a
    /// handful of sends (BENCHMARKS.md#the-runs-pages).
    static let chunkSize = 256

    /// Sends `notifications` as concurrent chunks of ``chunkSize``; each chunk's reports go to `finished` as
    /// soon as it is answered (and reports final within a chunk that waits for retries, sooner: `finished`
    /// must then take a report it was already given as a no-op). Returns every report, in order.
    static func sendInChunks(
        _ notifications: [OutgoingNotification], sender: any Sender,
        finished: @escaping FinishedReports
    ) async -> [DeliveryReport] {
        guard notifications.count > chunkSize else {
            return await sender.send(notifications, finished: finished)
        }
        var reports = [DeliveryReport?](repeating: nil, count: notifications.count)
        await withTaskGroup(of: (Int, [DeliveryReport]).self) { group in
            for start in stride(from: 0, to: notifications.count, by: chunkSize) {
                let chunk = Array(notifications[start..<min(start + chunkSize, notifications.count)])
                group.addTask {
                    let chunkReports = await sender.send(chunk) { indices, reports in
                        finished(indices.map { start + $0 }, reports)
                    }
                    // Every report of the chunk, those handed over already included (`finished` takes each once).
                    finished(Array(start..<(start + chunkReports.count)), chunkReports)
                    return (start, chunkReports)
                }
            }
            for await (start, chunkReports) in group {
                for (offset, report) in chunkReports.enumerated() { reports[start + offset] = report }
            }
        }
        return reports.map { $0! }
    }
}

/// A claim's identity within one run of one notification type.
struct ClaimKey: Hashable {
    let userID: String
    let period: String
}

/// A claimed page: its claims and the notifications to send (`owners[i]` is the claim of notification `i`).
struct ClaimedPage: Sendable {
    let claims: [Claim]
    let notifications: [OutgoingNotification]
    let owners: [Int]
}

/// What sending and recording one page did, merged into the run's summary when it is collected.
struct DeliveredPage: Sendable {
    var notifications = 0
    var outcomes: [DeliveryOutcome: Int] = [:]
    var sent = 0, partial = 0, retry = 0, failed = 0, devicesPendingRetry = 0, ambiguous = 0, invalidTokens = 0
    var held = 0
    var troubles: [ProviderTrouble] = []
    var pending: [PendingDevices] = []
    var outcomesByProvider: [DeliveryChannel: [DeliveryOutcome: Int]] = [:]
    var send = Duration.zero, record = Duration.zero

    func merge(into summary: inout RunSummary, phases: inout Phases) {
        summary.notifications += notifications
        summary.outcomes.merge(outcomes, uniquingKeysWith: +)
        summary.sent += sent
        summary.partial += partial
        summary.retry += retry
        summary.failed += failed
        summary.devicesPendingRetry += devicesPendingRetry
        summary.ambiguous += ambiguous
        summary.invalidTokens += invalidTokens
        summary.devicesHeld += held
        summary.troubles = ProviderTrouble.merge(summary.troubles, troubles)
        summary.pendingRetry = PendingDevices.merge(summary.pendingRetry, pending)
        for (provider, counts) in outcomesByProvider {
            summary.outcomesByProvider[provider, default: [:]].merge(counts, uniquingKeysWith: +)
        }
        phases.add(.send, send)
        phases.add(.record, record)
    }
}

/// Delivery of claimed pages beside the selection and claiming of the next ones, as child tasks of the run's
/// task group. A page starts as soon as it is claimed; once more than `depth` pages are in delivery, the oldest
/// is collected before the run goes on. The pages ahead keep the connections and the store busy while one page
/// waits for its answers or for the store's writer. A failure stops the run with every claimed page still
/// delivered and recorded.
struct DeliveryPipeline {
    /// A page's delivery: its number in the run and how it ended. (A struct made outside the child task's
    /// closure: a labeled tuple returned from a typed-throws `do`/`catch` in that closure came back from the
    /// release build of Swift 6.3 with a garbage page number.)
    struct Finished: Sendable {
        let page: Int
        let result: Result<DeliveredPage, JobError>
    }

    /// Pages in delivery at most, besides the one being selected and claimed.
    let depth: Int
    private var submitted = 0
    private var collected = 0
    /// Pages that finished before the older ones they wait behind were collected.
    private var finished: [Int: Result<DeliveredPage, JobError>] = [:]

    init(depth: Int = 2) {
        precondition(depth >= 1)
        self.depth = depth
    }

    /// Starts `page` in `group`, then collects and merges the oldest pages while more than `depth` are in
    /// delivery.
    mutating func submit(
        _ page: ClaimedPage, in group: inout TaskGroup<Finished>, summary: inout RunSummary,
        phases: inout Phases,
        deliver: @escaping @Sendable (ClaimedPage) async throws(JobError) -> DeliveredPage
    ) async throws(JobError) {
        let number = submitted
        submitted += 1
        group.addTask { await Self.deliver(page, number: number, deliver) }
        while submitted - collected > depth {
            // Started before waiting: the newest page is on the wire while the oldest one's answers are merged.
            do throws(JobError) {
                try await collectOldest(&group).merge(into: &summary, phases: &phases)
            } catch {
                // The pages still in delivery are sent and recorded before the run fails: a run must not end
                // with sends in flight that nobody records.
                try? await drain(&group, into: &summary, phases: &phases)
                throw error
            }
        }
    }

    private static func deliver(
        _ page: ClaimedPage, number: Int,
        _ deliver: @Sendable (ClaimedPage) async throws(JobError) -> DeliveredPage
    ) async -> Finished {
        let result: Result<DeliveredPage, JobError>
        do throws(JobError) {
            result = .success(try await deliver(page))
        } catch {
            result = .failure(error)
        }
        return Finished(page: number, result: result)
    }

    /// Waits for every page in delivery, oldest first; the first failure is thrown once all are collected.
    mutating func drain(
        _ group: inout TaskGroup<Finished>, into summary: inout RunSummary,
        phases: inout Phases
    ) async throws(JobError) {
        var failure: JobError?
        while collected < submitted {
            do throws(JobError) {
                try await collectOldest(&group).merge(into: &summary, phases: &phases)
            } catch {
                failure = failure ?? error
            }
        }
        if let failure { throw failure }
    }

    /// The oldest page not collected yet, once it has finished (pages that finish before it are kept).
    private mutating func collectOldest(_ group: inout TaskGroup<Finished>) async throws(JobError) -> DeliveredPage {
        let oldest = collected
        while finished[oldest] == nil, let next = await group.next() {
            finished[next.page] = next.result
        }
        collected += 1
        guard let result = finished.removeValue(forKey: oldest) else {
            throw .software("page \(oldest) of the run was never delivered")
        }
        return try result.get()
    }
}

/// Time spent per phase of a run.
struct Phases {
    typealias Phase = RunPhase
    private var spent: [Phase: Duration] = [:]

    mutating func measure<T>(_ phase: Phase, _ body: () async throws(JobError) -> T) async throws(JobError) -> T {
        let start = ContinuousClock.now
        defer { spent[phase, default: .zero] += ContinuousClock.now - start }
        return try await body()
    }

    mutating func measure<T>(_ phase: Phase, _ body: () async -> T) async -> T {
        let start = ContinuousClock.now
        defer { spent[phase, default: .zero] += ContinuousClock.now - start }
        return await body()
    }

    mutating func add(_ phase: Phase, _ duration: Duration) {
        spent[phase, default: .zero] += duration
    }

    var milliseconds: [RunPhase: Int] {
        spent.mapValues(Self.milliseconds)
    }

    static func milliseconds(_ duration: Duration) -> Int {
        Int(duration.components.seconds * 1000 + duration.components.attoseconds / 1_000_000_000_000_000)
    }
}

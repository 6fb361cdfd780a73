import Foundation
import Logging

/// Warns a user at 90 % and 100 % of their quota, once per period, at write time. The common case — a
/// write far from the limit — costs one indexed read and no write, and never loads credentials or opens
/// a provider connection: the sender is made only when a warning fires.
package struct ContentLimitHook: Sendable {
    package static let jobName = HookSummary.jobName
    package let store: any ContentLimitStore & ClaimLedger
    /// Gives the sender when a warning is sent now (a ``LazySender``: made once, shut down by its owner).
    package let makeSender: @Sendable () async throws(JobError) -> any Sender
    /// Loads the copy catalog; called only when a warning is worded (parsing and validating a catalog
    /// costs more than the whole nothing-fires path).
    package let loadCatalog: @Sendable () throws(JobError) -> CopyCatalog
    package let logger: Logger
    /// What the wait for another invocation's 90 % warning and the record deadline are kept on; a manual
    /// clock in tests.
    package var clock: any RetryClock = SystemRetryClock()

    package init(
        store: any ContentLimitStore & ClaimLedger, logger: Logger,
        loadCatalog: @escaping @Sendable () throws(JobError) -> CopyCatalog = { .builtIn },
        makeSender: @escaping @Sendable () async throws(JobError) -> any Sender
    ) {
        self.store = store
        self.loadCatalog = loadCatalog
        self.logger = logger
        self.makeSender = makeSender
    }

    package struct Options: Sendable {
        package var now: Int64
        package var dryRun = false
        package var explain = false
        package var claimLeaseSeconds = Int64(ConfigKey.claimLeaseMinutes.number!.default) * 60
        /// How long a 100 % warning waits for the period's 90 % warning that another invocation is sending;
        /// after it, the 100 % warning is left `retry` for the next reminder run.
        package var lowerWarningWait: Duration = .seconds(10)
        /// The waits (for the 90 % warning, and to record) end by this instant (a Lambda invocation's deadline,
        /// less time to answer) when it comes first.
        package var finishBy: ContinuousClock.Instant?
        /// A request to stop (SIGTERM): the wait for the 90 % warning ends at once, and what is on its way is
        /// finished and recorded, as a reminder run does with the pages it has claimed.
        package var stop: StopRequest?
        package var runID = RunID.make()
        package init(now: Int64, dryRun: Bool = false, explain: Bool = false) {
            self.now = now
            self.dryRun = dryRun
            self.explain = explain
        }
    }

    /// The answer when no store is needed: an unlimited plan (no limit, or one ≤ 0) has nothing to decide.
    /// `nil` otherwise. ``handle(_:options:)`` starts with it, and a caller that would open a store for the
    /// event asks it first.
    package static func summaryWithoutStore(_ event: ContentLimitEvent, options: Options) -> HookSummary? {
        guard event.limit ?? 0 <= 0 else { return nil }
        var summary = HookSummary(
            runID: options.runID, now: Timestamps.format(options.now), dryRun: options.dryRun,
            userID: event.userID, used: event.used, limit: event.limit, reason: "unlimited plan")
        if options.explain { summary.steps = ["limit: \(event.limit.map(String.init) ?? "none") → unlimited plan"] }
        return summary
    }

    package func handle(_ event: ContentLimitEvent, options: Options) async throws(JobError) -> HookSummary {
        let started = ContinuousClock.now
        var logger = self.logger
        logger[metadataKey: "run"] = "\(options.runID)"
        if var summary = Self.summaryWithoutStore(event, options: options) {
            summary.durationMs = Phases.milliseconds(ContinuousClock.now - started)
            return summary
        }
        var summary = HookSummary(
            runID: options.runID, now: Timestamps.format(options.now), dryRun: options.dryRun,
            userID: event.userID, used: event.used, limit: event.limit)
        func step(_ text: @autoclosure () -> String) { if options.explain { summary.steps.append(text()) } }
        func finish(_ reason: String) -> HookSummary {
            summary.reason = reason
            summary.durationMs = Phases.milliseconds(ContinuousClock.now - started)
            return summary
        }
        guard let limit = event.limit else { return finish("unlimited plan") }
        let threshold = ContentLimitRule.threshold(used: event.used, limit: limit)
        summary.threshold = threshold?.rawValue
        step(
            "usage: \(event.used) of \(limit) = \(QuotaLevel.percent(used: event.used, limit: limit)) % → \(threshold?.rawValue ?? "below 90 %")"
        )
        // The lowest period key this user can be in now, whatever their zone (zones are within ±14 h).
        let utcYesterday = ZoneClock.split(wallSeconds: options.now - 86_400).date
        let floor = event.period == .monthly ? utcYesterday.monthKey : LocalDate.pad(utcYesterday.year, 4)
        guard let type = threshold else {
            guard try await store.userExists(id: event.userID) else { throw .unknownUser(event.userID) }
            return finish("below 90 %")
        }
        guard let user = try await store.limitSnapshot(userID: event.userID, periodsFrom: floor) else {
            throw .unknownUser(event.userID)
        }

        let staleBefore = options.now - options.claimLeaseSeconds
        let verdict = ContentLimitRule.verdict(
            type, user: user, period: event.period, now: options.now, staleBefore: staleBefore,
            explain: options.explain)
        if verdict.unknownZone {
            logger.warning("unknown time zone: using UTC for the period", metadata: ["zone": "\(user.timezone)"])
        }
        if verdict.malformedQuietHours {
            logger.warning("malformed quiet hours ignored", metadata: ["user": "\(user.userID)"])
        }
        summary.steps += verdict.steps
        summary.period = verdict.period
        let (period, deliverAfter): (String, Int64?)
        switch verdict.outcome {
        case .nothing(let reason): return finish(reason)
        case .warn(let due, let after): (period, deliverAfter) = (due, after)
        }
        summary.deliverAfter = deliverAfter.map(Timestamps.format)

        var params = ContentLimitRule.parameters(used: event.used, limit: limit)
        params[LimitParams.planKey] = user.plan
        let catalog = try loadCatalog()
        let choice = catalog.choose(type, locale: user.locale, userID: user.userID, period: period, previousIndex: nil)
        if options.dryRun {
            summary.action = deliverAfter == nil ? .sent : .deferred
            let message = choice.message.rendered(params)
            step(
                "would \(deliverAfter == nil ? "send" : "defer"): \(choice.locale) \"\(message.title)\" / \"\(message.body)\""
            )
            return finish(deliverAfter == nil ? "would send" : "would defer past quiet hours")
        }

        // Only now: the sender (credentials, connections) — and before anything is written, so a
        // configuration error leaves no claim behind.
        let sender = deliverAfter == nil ? TokenCheckingSender.wrapping(try await makeSender()) : nil
        guard
            let claim = try await store.claimLimitWarning(
                QuotaWarning(
                    userID: user.userID, type: type, period: period, messageIndex: choice.index,
                    locale: choice.locale, params: params),
                deliverAfter: deliverAfter, runID: options.runID, now: options.now, staleBefore: staleBefore)
        else {
            return finish("another invocation has this warning")
        }
        if claim.deferred {
            summary.action = .deferred
            return finish("inside quiet hours")
        }
        guard let sender else { return finish("no sender") }
        if type == .contentLimit100,
            try await !lowerWarningRecorded(
                userID: user.userID, period: period, floor: floor, options: options, logger: logger)
        {
            step("90 % warning of this period still on its way after \(options.lowerWarningWait): held back")
            try await store.record(
                [],
                resolutions: [
                    ClaimResolution(
                        logID: claim.warning.logID, period: period, status: .retry,
                        detail: "held back: the 90 % warning of this period was on its way")
                ],
                runID: options.runID, now: options.now)
            summary.action = .deferred
            return finish("held back until the 90 % warning is recorded (the next reminder run sends it)")
        }
        let delivered = try await ContentLimitHook.deliver(
            [claim.warning],
            store: store, sender: sender, catalog: catalog, runID: options.runID, now: options.now,
            recordDeadline: .toRecord(
                claimLeaseSeconds: options.claimLeaseSeconds, finishBy: options.finishBy, on: clock),
            logger: logger)
        let account = Self.account(
            of: delivered.statuses.first, reached: delivered.outcomes[.delivered] ?? 0,
            attempts: delivered.notifications)
        summary.action = account.action
        summary.notifications = delivered.notifications
        summary.outcomes = delivered.outcomes
        summary.pendingRetry = delivered.pending
        summary.troubles = ProviderTrouble.conclude(
            ProviderTrouble.merge(summary.troubles, delivered.troubles), pending: delivered.pending,
            outcomesByProvider: delivered.byChannel, threshold: sender.outageThreshold)
        ProviderTrouble.log(summary.troubles, logger: logger)
        PendingDevices.log(summary.pendingRetry, troubles: summary.troubles, logger: logger)
        return finish(account.reason)
    }

    /// What the summary says of a warning sent now, from its log row's status after the send, the devices it
    /// reached and the devices it was sent to: `sent` only when it reached one.
    static func account(of status: ClaimStatus?, reached: Int, attempts: Int) -> (
        action: ContentLimitAction, reason: String
    ) {
        switch status {
        case .failed where attempts == 0: (.failed, "no device it can be sent to: none of a provider configured here")
        case .sent: (.sent, "sent to every device")
        case .partial: (.sent, "sent; the other devices' tokens are dead or were refused")
        case .retry where reached > 0: (.sent, "sent to some devices; the others are left for the next reminder run")
        case .retry: (.retry, "no device reached yet: left for the next reminder run")
        case .failed: (.failed, "no device took it: every token is dead or was refused")
        default: (reached > 0 ? .sent : .none, "recorded \(status?.rawValue ?? "nothing")")
        }
    }

    /// Waits, up to `options.lowerWarningWait`, while the period's 90 % warning is on its way (another
    /// invocation claimed it and has not recorded it yet), so that it cannot arrive after the 100 % one.
    private func lowerWarningRecorded(
        userID: String, period: String, floor: String, options: Options, logger: Logger
    ) async throws(JobError) -> Bool {
        let staleBefore = options.now - options.claimLeaseSeconds
        let deadline = Deadline.after(options.lowerWarningWait, on: clock).notAfter(options.finishBy)
        while true {
            let logs = try await store.limitSnapshot(userID: userID, periodsFrom: floor)?.logs ?? [:]
            if DeliveryLifecycle.warningOrder(.contentLimit100, period: period, logs: logs, staleBefore: staleBefore)
                == .send
            {
                return true
            }
            guard !deadline.hasPassed else { return false }
            if let reason = options.stop?.reason {
                logger.warning("stopped by \(reason): the 100 % warning is left for the next reminder run")
                return false
            }
            await clock.sleep(for: .milliseconds(50))
        }
    }

    /// Sends claimed quota warnings to every active device and records the outcome: the same path as
    /// the reminder's claim → send → record. A dry run (`record: false`, a dry-run sender) records nothing.
    static func deliver(
        _ warnings: [PendingWarning], store: any ContentLimitStore & ClaimLedger, sender: any Sender,
        catalog: CopyCatalog, runID: String, now: Int64, recordDeadline: Deadline,
        logger: Logger, record: Bool = true
    ) async throws(JobError) -> (
        notifications: Int, outcomes: [DeliveryOutcome: Int], byChannel: [DeliveryChannel: [DeliveryOutcome: Int]],
        statuses: [ClaimStatus], troubles: [ProviderTrouble], pending: [PendingDevices]
    ) {
        guard !warnings.isEmpty else { return (0, [:], [:], [], [], []) }
        let devices = try await store.activeDevices(userIDs: warnings.map(\.warning.userID))
        let reached = try await store.deliveredDevices(logIDs: warnings.map(\.logID))
        var notifications: [OutgoingNotification] = []
        var owners: [Int] = []
        for (index, pending) in warnings.enumerated() {
            let warning = pending.warning
            let message =
                (catalog.message(warning.type, locale: warning.locale, index: warning.messageIndex)
                ?? catalog.choose(
                    warning.type, locale: warning.locale, userID: warning.userID, period: warning.period,
                    previousIndex: nil
                ).message).rendered(warning.params)
            let deliverable = (devices[warning.userID] ?? []).filter { sender.canDeliver(to: $0.provider) }
            for device in DeliveryLifecycle.devicesToSend(deliverable, alreadyDelivered: reached[pending.logID] ?? []) {
                notifications.append(
                    OutgoingNotification(
                        logID: pending.logID, device: device, type: warning.type, period: warning.period,
                        locale: warning.locale,
                        messageIndex: warning.messageIndex, title: message.title, body: message.body,
                        expiresAt: now + 86_400))
                owners.append(index)
            }
        }
        let reports = await sender.send(notifications)
        guard reports.count == notifications.count else {
            throw .software("the sender answered \(reports.count) reports for \(notifications.count) notifications")
        }
        let answers = PageAnswers(
            claims: warnings.map {
                PageAnswers.Claim(
                    logID: $0.logID, period: $0.warning.period, reachedBefore: reached[$0.logID]?.count ?? 0)
            },
            notifications: notifications, owners: owners, reports: reports,
            noDevice: "no deliverable device at send time")
        if record {
            try await store.recordPersistently(
                answers.records, resolutions: answers.resolutions, runID: runID, now: now,
                deadline: recordDeadline, logger: logger)
            await HeldDevices.record(
                HeldDevices.holds(notifications.map(\.device), reports),
                releasing: HeldDevices.healthy(answers.byChannel, troubles: answers.troubles), store: store,
                runID: runID, now: now, logger: logger)
        }
        if let failure = await sender.channelFailure() { throw failure }
        return (
            notifications.count, answers.outcomes, answers.byChannel, answers.statuses, answers.troubles,
            answers.pending
        )
    }
}

extension DiaryReminderRunner {
    /// Delivers quota warnings that are due now: deferred past quiet hours, left for retry, or claimed by a
    /// hook invocation that died. Part of every diary-reminder run, after its reminders (a dry run prints what
    /// it would send and writes nothing): a page of
    /// `options.pageSize` at a time, until none is left or the run is asked to stop, its claim budget is spent
    /// or its channel failed (what is left then waits for the next run, and the run says it stopped early).
    func deliverPendingWarnings(
        _ options: ReminderRunOptions, summary: inout RunSummary, claimUntil: Deadline,
        recordDeadline: Deadline, logger: Logger
    ) async throws(JobError) {
        guard let warningsStore = warnings, !summary.stoppedEarly else { return }
        let staleBefore = options.now - options.claimLeaseSeconds
        let pageSize = max(1, options.pageSize)
        var afterID: Int64 = 0
        while await sender.channelFailure() == nil,
            !Self.stopsClaiming(
                options, claimUntil: claimUntil, leaving: "the pending quota warnings", summary: &summary,
                logger: logger)
        {
            let page = try await warningsStore.pendingWarnings(
                now: options.now, staleBefore: staleBefore, afterID: afterID, limit: pageSize)
            guard let last = page.last else { return }
            afterID = last.logID
            try await deliverPendingWarnings(
                page.filter { options.shard.contains(userID: $0.warning.userID) }, store: warningsStore,
                options: options, summary: &summary, recordDeadline: recordDeadline, logger: logger)
            if page.count < pageSize { return }
        }
    }

    /// One page of pending warnings of this run's shard.
    private func deliverPendingWarnings(
        _ page: [PendingWarning], store warningsStore: any ContentLimitStore & ClaimLedger, options: ReminderRunOptions,
        summary: inout RunSummary, recordDeadline: Deadline, logger: Logger
    ) async throws(JobError) {
        let staleBefore = options.now - options.claimLeaseSeconds
        var pending: [PendingWarning] = []
        var withdrawn: [(warning: PendingWarning, detail: String)] = []
        var held: [Int64: Int64] = [:]
        // One read for the page: each warning is decided from its user as they are now (settings, zone, quiet
        // hours) and their rows of its period on; the earliest period of the page covers every one of them.
        guard let floor = page.map(\.warning.period).min() else { return }
        let snapshots = try await warningsStore.limitSnapshots(userIDs: page.map(\.warning.userID), periodsFrom: floor)
        for stored in page {
            let key = LimitLogKey(type: stored.warning.type, period: stored.warning.period)
            switch ContentLimitRule.fate(
                of: key, user: snapshots[stored.warning.userID], now: options.now, staleBefore: staleBefore)
            {
            case .send: pending.append(stored)
            case .withdraw(let detail): withdrawn.append((stored, detail))
            case .hold(let until): held[stored.logID] = until
            case .waitForLowerWarning: continue  // the next run, once the 90 % warning is recorded
            }
        }
        if !held.isEmpty {
            summary.warningsHeld +=
                options.dryRun
                ? held.count
                : try await warningsStore.holdPendingWarnings(
                    held, runID: options.runID, now: options.now, staleBefore: staleBefore
                ).count
        }
        guard !pending.isEmpty || !withdrawn.isEmpty else { return }
        let candidates = pending.map(\.logID) + withdrawn.map(\.warning.logID)
        let won =
            options.dryRun
            ? Set(candidates)
            : try await warningsStore.claimPendingWarnings(
                candidates, runID: options.runID, now: options.now, staleBefore: staleBefore)
        // Never sent: a 90 % warning left pending when its period's 100 % warning was claimed, a warning whose
        // period ended while it was held for quiet hours or left for retry, and one whose user turned warnings off
        // or changed plan.
        let superseded = withdrawn.filter { won.contains($0.warning.logID) }.map {
            ClaimResolution(
                logID: $0.warning.logID, period: $0.warning.warning.period, status: .superseded, detail: $0.detail)
        }
        if !superseded.isEmpty && !options.dryRun {
            try await warningsStore.record([], resolutions: superseded, runID: options.runID, now: options.now)
        }
        summary.warningsWithdrawn += superseded.count
        let mine = pending.filter { won.contains($0.logID) }
        let result = try await ContentLimitHook.deliver(
            mine, store: warningsStore, sender: sender, catalog: catalog,
            runID: options.runID, now: options.now,
            recordDeadline: recordDeadline, logger: logger, record: !options.dryRun)
        summary.warningsDelivered += result.statuses.filter { $0 == .sent || $0 == .partial }.count
        summary.troubles = ProviderTrouble.merge(summary.troubles, result.troubles)
        summary.pendingRetry = PendingDevices.merge(summary.pendingRetry, result.pending)
        summary.notifications += result.notifications
        for (outcome, count) in result.outcomes { summary.outcomes[outcome, default: 0] += count }
        for (channel, counts) in result.byChannel {
            summary.outcomesByProvider[channel, default: [:]].merge(counts, uniquingKeysWith: +)
        }
    }
}

import Foundation
import Logging

/// The janitor's settings; the defaults are the documented ones.
package struct JanitorOptions: Sendable {
    package var now: Int64
    package var dryRun = false
    /// Deactivate devices not seen (no registration or launch) for this many days (reason `stale`).
    package var staleDays = 90
    /// FCM treats tokens idle this long as expired: such devices are deactivated whatever `staleDays` is.
    package var fcmExpiryDays = 270
    /// Ask FCM (validate_only) about FCM devices not seen for `probeAfterDays`.
    package var probe = false
    package var probeAfterDays = 30
    /// At most this many probes per run, at most `probeRate` per second.
    package var probeMax = 1_000
    package var probeRate = 50
    package var deliveryRetentionDays = 30
    package var logRetentionDays = 400
    /// Delete `job_runs` rows older than this, except the runs at each job's latest instant (the report's "last
    /// run of each job").
    package var runRetentionDays = 90
    /// Apply retention row by row only, never by dropping a whole history partition (PostgreSQL).
    package var keepPartitions = false
    /// Delete device rows inactive for `purgeAfterDays`; off unless asked for.
    package var purge = false
    package var purgeAfterDays = 365
    /// Rows per batch (each batch is one short transaction).
    package var batchSize = 1_000
    /// `--shard K/N`: probe only this slice's devices (the bulk steps are safe on every shard at once).
    package var shard: Shard = .all
    package var runID = RunID.make()

    package init(now: Int64) { self.now = now }

    package static let daysRange = 1...3650
    /// A month's warnings deduplicate for a month: keeping log rows at least that long (plus zone slack) is the floor.
    package static let logRetentionRange = 35...3650
    package static let probeMaxRange = 1...100_000
    package static let probeRateRange = 1...10_000
    package static let batchSizeRange = 1...100_000

    /// Sets `setting` to `value`, or says why it cannot be: a number outside the setting's range, or a value
    /// of the wrong kind. `name` is how the caller's user knows the setting (`--stale-days`, `detail.stale_days`).
    package mutating func set(_ setting: JanitorSetting, to value: JanitorSetting.Value, name: String) throws(JobError)
    {
        switch (setting.kind, value) {
        case (.number(let path, let range), .number(let number)) where range.contains(number):
            self[keyPath: path] = number
        case (.number(_, let range), _):
            throw .usage("\(name) must be a whole number within \(range.lowerBound)…\(range.upperBound)")
        case (.flag(let path), .flag(let flag)):
            self[keyPath: path] = flag
        case (.flag, _):
            throw .usage("\(name) must be true or false")
        }
    }
}

/// A janitor setting that a run may change, declared once: the command line's flag (`--stale-days`), a
/// scheduled event's `detail` key (`stale_days`), its range and where it goes in `JanitorOptions` all come
/// from `all`. Defaults are `JanitorOptions`'.
public struct JanitorSetting {
    package enum Kind {
        case number(WritableKeyPath<JanitorOptions, Int>, ClosedRange<Int>)
        case flag(WritableKeyPath<JanitorOptions, Bool>)
    }

    public enum Value: Sendable, Hashable {
        case number(Int)
        case flag(Bool)
        /// Neither (text, a fraction, null): refused with the setting's own message.
        case other
    }

    /// The `detail` key; the flag is the same words joined by dashes.
    package let key: String
    package let kind: Kind

    package var flag: String { "--" + key.split(separator: "_").joined(separator: "-") }

    package static var all: [JanitorSetting] {
        [
            JanitorSetting(key: "dry_run", kind: .flag(\.dryRun)),
            JanitorSetting(key: "stale_days", kind: .number(\.staleDays, JanitorOptions.daysRange)),
            JanitorSetting(key: "probe", kind: .flag(\.probe)),
            JanitorSetting(key: "probe_after_days", kind: .number(\.probeAfterDays, JanitorOptions.daysRange)),
            JanitorSetting(key: "probe_max", kind: .number(\.probeMax, JanitorOptions.probeMaxRange)),
            JanitorSetting(key: "probe_rate", kind: .number(\.probeRate, JanitorOptions.probeRateRange)),
            JanitorSetting(
                key: "delivery_retention_days", kind: .number(\.deliveryRetentionDays, JanitorOptions.daysRange)),
            JanitorSetting(
                key: "log_retention_days", kind: .number(\.logRetentionDays, JanitorOptions.logRetentionRange)),
            JanitorSetting(key: "run_retention_days", kind: .number(\.runRetentionDays, JanitorOptions.daysRange)),
            JanitorSetting(key: "keep_partitions", kind: .flag(\.keepPartitions)),
            JanitorSetting(key: "purge", kind: .flag(\.purge)),
            JanitorSetting(key: "purge_after_days", kind: .number(\.purgeAfterDays, JanitorOptions.daysRange)),
            JanitorSetting(key: "batch_size", kind: .number(\.batchSize, JanitorOptions.batchSizeRange)),
        ]
    }

    /// Applies `values` (by key) to `options`, naming a bad one as `name` says. An unknown key is a
    /// programming error of the caller's: every front end reads keys from `all`.
    package static func apply(
        _ values: [String: Value], to options: inout JanitorOptions, name: (JanitorSetting) -> String
    ) throws(JobError) {
        for setting in all {
            guard let value = values[setting.key] else { continue }
            try options.set(setting, to: value, name: name(setting))
        }
    }
}

/// What a janitor run did (or, dry, would do).
public struct JanitorSummary: Sendable, Codable, Hashable {
    public var job = TokenJanitor.jobName
    public var runID: String
    public var now: String
    public var dryRun: Bool

    package init(runID: String, now: String, dryRun: Bool) {
        self.runID = runID
        self.now = now
        self.dryRun = dryRun
    }
    public var staleDeactivated = 0
    public var fcmExpiredDeactivated = 0
    public var probed = 0
    public var probeUnregistered = 0
    public var deliveriesDeleted = 0
    public var logsDeleted = 0
    /// Run records (`job_runs`) past the run retention.
    public var runsDeleted = 0
    /// History partitions dropped whole (PostgreSQL), each holding only rows the row rules would delete; their
    /// rows are counted in `deliveriesDeleted` and `logsDeleted`.
    public var partitionsDropped: [String] = []
    public var devicesPurged = 0
    /// What a database webhook brought for users who never became push users, waiting longer than the stale window:
    /// devices, and profiles or entries (`waiting_devices`, `waiting_users`).
    public var waitingExpired = 0
    /// Active devices after the run, by provider and kind (`"fcm/fid"` → count): an app's move from FCM
    /// registration tokens to installation ids, as it goes.
    public var activeDevices: [String: Int] = [:]
    /// Probes that could not be answered: FCM refused our credentials or was unavailable.
    public var troubles: [ProviderTrouble] = []
    /// Probes left unanswered by a transient answer, by reason (a throttle, a few 5xx: no trouble of FCM's
    /// unless over its `OutageThreshold`).
    public var pendingRetry: [PendingDevices] = []
    public var durationMs = 0
    /// The error the run ends with, as its exit code says: one that ended it (the counts are what it had done by
    /// then), or due work it left (``failure``). Nil for a run that went well.
    public var error: String?

    public var json: String { JSONLine.encode(self) }
    public var text: String {
        "\(job)\(dryRun ? " (dry run: would)" : ""): now=\(now) stale_deactivated=\(staleDeactivated) fcm_expired_deactivated=\(fcmExpiredDeactivated) probed=\(probed) probe_unregistered=\(probeUnregistered) deliveries_deleted=\(deliveriesDeleted) logs_deleted=\(logsDeleted) runs_deleted=\(runsDeleted) partitions_dropped=\(partitionsDropped.count) devices_purged=\(devicesPurged) waiting_expired=\(waitingExpired)"
            + (activeDevices.isEmpty
                ? ""
                : " active_devices="
                    + activeDevices.sorted { $0.key < $1.key }.map { "\($0.key):\($0.value)" }
                    .joined(separator: ","))
            + troubles.map { " PROBES_LEFT[\($0.provider) \($0.cause.rawValue)=\($0.devices)]" }.joined()
            + " run=\(runID) \(durationMs)ms"
    }
}

/// Keeps the device table truthful and the log tables bounded.
package struct TokenJanitor: Sendable {
    package static let jobName = "token-janitor"
    package let store: any JanitorStore & HistoryUpkeep & RunJournal
    package let logger: Logger
    /// Gives the FCM validate-only sender for `--probe` (only called when probing; its owner shuts it down).
    package let makeProbeSender: @Sendable () async throws(JobError) -> any Sender
    /// What the probes' pacing (`probeRate` a second) reads and waits on; a manual clock in tests.
    package var clock: any RetryClock = SystemRetryClock()

    package init(
        store: any JanitorStore & HistoryUpkeep & RunJournal, logger: Logger,
        makeProbeSender: @escaping @Sendable () async throws(JobError) -> any Sender
    ) {
        self.store = store
        self.logger = logger
        self.makeProbeSender = makeProbeSender
    }

    package func run(_ options: JanitorOptions) async throws(JobError) -> JanitorSummary {
        let started = ContinuousClock.now
        var summary = JanitorSummary(runID: options.runID, now: Timestamps.format(options.now), dryRun: options.dryRun)
        do {
            try await work(options, summary: &summary)
        } catch {
            summary.durationMs = Phases.milliseconds(ContinuousClock.now - started)
            if !options.dryRun {
                summary.error = error.message
                await store.recordFailedRun(
                    id: options.runID, job: Self.jobName, runAt: options.now, summary: summary, logger: logger)
            }
            throw error
        }
        summary.durationMs = Phases.milliseconds(ContinuousClock.now - started)
        summary.error = summary.failure?.message
        if !options.dryRun {
            try await store.recordRun(
                id: options.runID, job: Self.jobName, runAt: options.now, durationMs: summary.durationMs,
                outcome: summary.recordedOutcome(), summaryJSON: summary.json)
        }
        return summary
    }

    /// The run itself: the device rules, the probes, then retention. What it did is counted in `summary`, also
    /// when it throws.
    private func work(_ options: JanitorOptions, summary: inout JanitorSummary) async throws(JobError) {
        if !options.dryRun {
            try await store.recordRunStart(id: options.runID, job: Self.jobName, runAt: options.now, summary: summary)
        }
        let day: Int64 = 86_400
        let batch = max(1, options.batchSize)

        // FCM's own expiry first, so those devices carry the more precise reason.
        let fcmCutoff = options.now - Int64(options.fcmExpiryDays) * day
        summary.fcmExpiredDeactivated = try await drain(
            options.dryRun,
            count: { () async throws(JobError) in
                try await store.staleDeviceCount(seenBefore: fcmCutoff, provider: .fcm)
            },
            step: { () async throws(JobError) in
                try await store.deactivateStaleDevices(
                    seenBefore: fcmCutoff, provider: .fcm, reason: "fcm_expired",
                    now: options.now, limit: batch)
            })
        let staleCutoff = options.now - Int64(options.staleDays) * day
        summary.staleDeactivated = try await drain(
            options.dryRun,
            count: { () async throws(JobError) in
                try await store.staleDeviceCount(seenBefore: staleCutoff, provider: nil)
            },
            step: { () async throws(JobError) in
                try await store.deactivateStaleDevices(
                    seenBefore: staleCutoff, provider: nil, reason: "stale",
                    now: options.now, limit: batch)
            })
        if options.probe { try await probe(options, summary: &summary) }

        let deliveryCutoff = options.now - Int64(options.deliveryRetentionDays) * day
        let logCutoff = options.now - Int64(options.logRetentionDays) * day
        let guards = PeriodGuards(now: options.now)
        if !options.dryRun { await store.prepareHistory(now: options.now, logger: logger) }
        // Whole partitions first (a month of rows in one statement); the row rules then take what is left.
        let drops =
            options.keepPartitions
            ? []
            : try await store.dropExpiredHistoryPartitions(
                deliveriesBefore: deliveryCutoff, logsBefore: logCutoff, guards: guards, dryRun: options.dryRun)
        summary.partitionsDropped = drops.map(\.partition.name)
        // Dry, the row rules' counts below already include the rows of the partitions that would go.
        if !options.dryRun {
            summary.deliveriesDeleted = drops.filter { $0.partition.table == .deliveries }.reduce(0) { $0 + $1.rows }
            summary.logsDeleted = drops.filter { $0.partition.table == .logs }.reduce(0) { $0 + $1.rows }
        }
        summary.deliveriesDeleted += try await drain(.deliveries(before: deliveryCutoff), options)
        summary.logsDeleted += try await drain(.expiredLogs(before: logCutoff, guards: guards), options)
        summary.runsDeleted = try await drain(
            .runs(before: options.now - Int64(options.runRetentionDays) * day), options)
        summary.waitingExpired =
            try await drain(.waitingDevices(before: staleCutoff), options)
            + drain(.waitingUsers(before: staleCutoff), options)
        if options.purge {
            summary.devicesPurged = try await drain(
                .inactiveDevices(deactivatedBefore: options.now - Int64(options.purgeAfterDays) * day), options)
        }
        summary.activeDevices = try await store.activeDeviceCounts()
    }

    /// Deletes what `rule` selects, a batch at a time (or, dry, just counts it).
    private func drain(_ rule: RetentionRule, _ options: JanitorOptions) async throws(JobError) -> Int {
        try await drain(
            options.dryRun, count: { () async throws(JobError) in try await store.count(rule) },
            step: { () async throws(JobError) in try await store.delete(rule, limit: max(1, options.batchSize)) })
    }

    /// Runs `step` until it changes nothing (or, dry, just counts).
    private func drain(
        _ dryRun: Bool, count: () async throws(JobError) -> Int,
        step: () async throws(JobError) -> Int
    ) async throws(JobError) -> Int {
        if dryRun { return try await count() }
        var total = 0
        while true {
            let changed = try await step()
            total += changed
            if changed == 0 { return total }
            await Task.yield()
        }
    }

    /// Asks FCM, with `validate_only`, whether long-unseen tokens are still registered; deactivates the ones it
    /// says are not. Nothing is delivered to anyone.
    private func probe(_ options: JanitorOptions, summary: inout JanitorSummary) async throws(JobError) {
        let day: Int64 = 86_400
        // A shard probes its own users' devices; the bulk steps are idempotent batches any shard may run.
        let candidates = Array(
            try await store.probeCandidates(
                seenBefore: options.now - Int64(options.probeAfterDays) * day,
                notBefore: options.now - Int64(options.staleDays) * day, limit: options.probeMax * options.shard.count
            )
            .filter { options.shard.contains(userID: $0.userID) }.prefix(options.probeMax))
        summary.probed = candidates.count
        guard !candidates.isEmpty, !options.dryRun else { return }
        let sender = TokenCheckingSender.wrapping(try await makeProbeSender())
        let perSecond = max(1, options.probeRate)
        var dead: [Int64] = []
        var holds: [DeviceHold] = []
        var answers: [DeliveryChannel: [DeliveryOutcome: Int]] = [:]
        var index = 0
        while index < candidates.count {
            let started = clock.now
            let slice = candidates[index..<min(index + perSecond, candidates.count)]
            let probes = slice.map { OutgoingNotification.tokenProbe(device: $0, expiresAt: options.now + day) }
            let reports = await sender.send(Array(probes))
            holds += HeldDevices.holds(Array(slice), reports)
            for (device, report) in zip(slice, reports) {
                if report.outcome == .tokenDead { dead.append(device.id) }
                answers[report.channel, default: [:]][report.outcome, default: 0] += 1
                ProviderTrouble.add(report, to: &summary.troubles, pending: &summary.pendingRetry)
            }
            index += slice.count
            if index < candidates.count {
                let rest = Duration.seconds(1) - (clock.now - started)
                if rest > .zero { await clock.sleep(for: rest) }
            }
        }
        summary.probeUnregistered = try await store.deactivate(
            deviceIDs: dead, reason: "UNREGISTERED", now: options.now)
        summary.troubles = ProviderTrouble.conclude(
            summary.troubles, pending: summary.pendingRetry, outcomesByProvider: answers,
            threshold: sender.outageThreshold)
        var logger = self.logger
        logger[metadataKey: "run"] = "\(options.runID)"
        await HeldDevices.record(
            holds, releasing: HeldDevices.healthy(answers, troubles: summary.troubles), store: store,
            runID: options.runID, now: options.now, logger: logger)
        ProviderTrouble.log(summary.troubles, logger: logger)
        PendingDevices.log(summary.pendingRetry, troubles: summary.troubles, logger: logger)
    }
}

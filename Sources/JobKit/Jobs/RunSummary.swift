import Foundation

/// The one-line account of a run: printed at the end of every run, recorded in `job_runs`, returned by
/// handlers.
public struct RunSummary: Sendable, Codable, Hashable {
    public var job: String
    public var runID: String
    public var now: String
    public var dryRun: Bool
    /// The run's shard (`K/N`), when sharded.
    public var shard: String?
    /// Due-set users of other shards, passed over.
    public var otherShards = 0
    /// Buckets of the due set this run leased, of `buckets` (`DueSetBuckets`), when it split the due set
    /// with other runners of the same run; nil when it worked through the whole due set.
    public var bucketsLeased: Int?
    public var buckets: Int?
    /// Due-set keys in buckets that other runners of the same run had, passed over.
    public var otherRunners = 0
    /// Users examined: those whose reminder time has come, plus those skipped for invalid data.
    public var candidates = 0
    /// Candidates that passed every rule.
    public var due = 0
    /// Claims this run won (in a dry run: would claim).
    public var claimed = 0
    /// Of those, claims taken over from a run that died or hit only transient errors.
    public var takenOver = 0
    /// Of the claims, last reminders (`ReminderPause`): their users had ignored a run of reminders, and theirs
    /// pause after this one (in a dry run: would pause). Those already paused are in `skipped` as `paused`.
    public var pausing = 0
    /// Users whose notification reached every device.
    public var sent = 0
    /// Users whose notification reached some devices; the others failed for good (dead token, rejected).
    public var partial = 0
    /// Users whose notification reached no device for permanent reasons.
    public var failed = 0
    /// Users with devices left for a later run because of transient or credential errors (other devices of
    /// theirs may have been reached): those devices are sent to again inside the catch-up window.
    public var retry = 0
    /// Devices left for a later run (transient or credential errors), as opposed to finished ones.
    public var devicesPendingRetry = 0
    /// Device attempts whose fate is unknown: written to a provider, then no answer (a connection that died,
    /// or no answer by the deadline). Each may have been delivered; one later resent may arrive twice (the
    /// collapse id then replaces the first).
    public var ambiguous = 0
    /// Devices whose stored token has the wrong shape for its provider (`DeviceToken`): never sent,
    /// deactivated with reason `invalid_token`. Only rows written around the registration API can be so.
    public var invalidTokens = 0
    /// Devices a provider called dead for a reason that here meant a misconfiguration (`DeadTokenGuard`): kept
    /// active, held (`device_holds`) and left for the next runs; the run exits 78 with the setting to check.
    public var devicesHeld = 0
    /// Earlier runs of the job that recorded no end within their claims' lease (killed or lost), which this run
    /// recorded as `failed`.
    public var earlierRunsWithoutEnd = 0
    /// Reminders whose catch-up window this run found closed with devices not reached (`MissedReminders`): it
    /// ended them `partial` or `failed`. Their devices, by provider and reason, are in `devicesMissed`.
    public var remindersMissed = 0
    public var devicesMissed: [MissedDevices] = []
    /// Devices left for later runs, by provider and cause (credentials refused, provider unavailable): what makes
    /// the run fail (77, 69).
    public var troubles: [ProviderTrouble] = []
    /// Devices left for later runs by a transient answer, by provider, reason and scope (`TransientScope`):
    /// throttles and a few 5xx are retried quietly; only a provider's share over the `OutageThreshold` becomes a
    /// trouble.
    public var pendingRetry: [PendingDevices] = []
    /// Provider credentials minted during the run, by provider (0 when the cached ones were used).
    public var credentialMints: [Provider: Int] = [:]
    /// Quota warnings delivered by this run (deferred past quiet hours, or retried).
    public var warningsDelivered = 0
    /// Quota warnings this run kept `deferred` because their users' quiet hours, as set now, are in force (set
    /// longer, or in a zone the user moved to, since the hook held them): each goes out when they end.
    public var warningsHeld = 0
    /// Quota warnings this run withdrew, never to be sent (`superseded`): their period ended, their user turned
    /// warnings off or changed plan, or the 100 % warning overtook them. The log row's `detail` says which.
    public var warningsWithdrawn = 0
    /// Device attempts.
    public var notifications = 0
    /// Device attempts by outcome.
    public var outcomes: [DeliveryOutcome: Int] = [:]
    /// Device attempts by channel (`apns`, `fcm`, `outbox`, …), then outcome.
    public var outcomesByProvider: [DeliveryChannel: [DeliveryOutcome: Int]] = [:]
    /// Users not reminded, by reason.
    public var skipped: [SkipReason: Int] = [:]
    /// True when the run stopped claiming because its time budget ran out, or it was asked to stop; the rest is
    /// left to the next run.
    public var stoppedEarly = false
    /// What asked the run to stop (`SIGTERM`, `SIGINT`), when that, not its time, ended it early.
    public var stoppedBy: String?
    /// Why the run did nothing at all (a stale scheduled event), if so.
    public var notRun: String?
    /// The error the run ends with, as its exit code says: one that ended it (the counts are what it had done by
    /// then), or due work it left (``failure``). Nil for a run that went well.
    public var error: String?
    public var durationMs = 0
    /// Where the time went, in milliseconds.
    public var phasesMs: [RunPhase: Int] = [:]

    public init(job: String, runID: String, now: Int64, dryRun: Bool) {
        self.job = job
        self.runID = runID
        self.now = Timestamps.format(now)
        self.dryRun = dryRun
    }

    mutating func skip(_ reason: SkipReason, _ count: Int = 1) {
        guard count > 0 else { return }
        skipped[reason, default: 0] += count
    }

    /// One JSON object on one line, keys sorted. A dry run claims and sends nothing: its counts are
    /// `would_claim`, `would_send`, `warnings_would_send`, `warnings_would_hold` and `warnings_would_withdraw`,
    /// and its outcomes are the providers' answers only (FCM's, validating): the dry-run channel delivers nothing,
    /// and what it printed, `notifications` already counts (as the text line leaves them out).
    public var json: String {
        guard dryRun else { return JSONLine.encode(self) }
        var shown = self
        for (outcome, printed) in shown.outcomesByProvider.removeValue(forKey: .dryRun) ?? [:] {
            let left = (shown.outcomes[outcome] ?? 0) - printed
            shown.outcomes[outcome] = left > 0 ? left : nil
        }
        return JSONLine.encode(shown).replacingOccurrences(of: #""claimed":"#, with: #""would_claim":"#)
            .replacingOccurrences(of: #""sent":"#, with: #""would_send":"#)
            .replacingOccurrences(of: #""warnings_delivered":"#, with: #""warnings_would_send":"#)
            .replacingOccurrences(of: #""warnings_held":"#, with: #""warnings_would_hold":"#)
            .replacingOccurrences(of: #""warnings_withdrawn":"#, with: #""warnings_would_withdraw":"#)
    }

    /// One human-readable line.
    public var text: String {
        var parts = ["\(job)\(dryRun ? " (dry run)" : ""): now=\(now)"]
        if let shard { parts.append("shard=\(shard) other_shards=\(otherShards)") }
        if let bucketsLeased {
            parts.append("buckets=\(bucketsLeased)/\(buckets ?? 0) other_runners=\(otherRunners)")
        }
        if dryRun {
            // Nothing was claimed or sent: what a real run would do.
            parts += ["candidates=\(candidates)", "due=\(due)", "would_claim=\(claimed)"]
            if takenOver > 0 { parts.append("would_take_over=\(takenOver)") }
            if pausing > 0 { parts.append("would_pause=\(pausing)") }
            parts += ["would_send=\(sent)"]
        } else {
            parts += ["candidates=\(candidates)", "due=\(due)", "claimed=\(claimed)"]
            if takenOver > 0 { parts.append("taken_over=\(takenOver)") }
            if pausing > 0 { parts.append("pausing=\(pausing)") }
            parts += ["sent=\(sent)", "partial=\(partial)", "failed=\(failed)", "retry=\(retry)"]
        }
        if devicesPendingRetry > 0 { parts.append("devices_pending_retry=\(devicesPendingRetry)") }
        if ambiguous > 0 { parts.append("ambiguous=\(ambiguous)") }
        if invalidTokens > 0 { parts.append("invalid_tokens=\(invalidTokens)") }
        if devicesHeld > 0 { parts.append("devices_held=\(devicesHeld)") }
        if earlierRunsWithoutEnd > 0 { parts.append("earlier_runs_without_end=\(earlierRunsWithoutEnd)") }
        if remindersMissed > 0 {
            parts.append(
                "reminders_missed=\(remindersMissed) devices_missed=\(devicesMissed.reduce(0) { $0 + $1.devices })["
                    + devicesMissed.map { "\($0.provider) \(LineText.field($0.reason))=\($0.devices)" }
                    .joined(separator: ", ") + "]")
        }
        if warningsDelivered > 0 {
            parts.append("warnings_\(dryRun ? "would_send" : "delivered")=\(warningsDelivered)")
        }
        if warningsHeld > 0 { parts.append("warnings_\(dryRun ? "would_hold" : "held")=\(warningsHeld)") }
        if warningsWithdrawn > 0 {
            parts.append("warnings_\(dryRun ? "would_withdraw" : "withdrawn")=\(warningsWithdrawn)")
        }
        parts.append("notifications=\(notifications)")
        // A dry run delivers nothing: its channel counts every line it printed `delivered`, which
        // `notifications` already says.
        if !outcomes.isEmpty && !dryRun {
            parts.append("outcomes[\(outcomes.countsText)]")
        }
        parts.append("skipped[\(skipped.countsText)]")
        if !pendingRetry.isEmpty {
            parts.append(
                "pending["
                    + pendingRetry.map { "\($0.provider) \(LineText.field($0.reason))=\($0.devices)" }.joined(
                        separator: ", ")
                    + "]")
        }
        for trouble in troubles {
            parts.append("LEFT[\(trouble.provider) \(trouble.cause.rawValue)=\(trouble.devices)]")
        }
        if stoppedEarly { parts.append("STOPPED EARLY (\(stoppedBy ?? "time budget"))") }
        if let notRun { parts.append("NOT RUN (\(notRun))") }
        parts.append("run=\(runID) \(durationMs)ms")
        return parts.joined(separator: " ")
    }
}

/// A phase of a reminder run, as ``RunSummary/phasesMs`` times it.
public enum RunPhase: String, Sendable, Hashable, Codable, CodingKeyRepresentable, CaseIterable {
    /// Reading the due set (candidates, their logs and devices).
    case select
    /// Claiming the due users' log rows.
    case claim
    /// Waiting for the senders' answers (for the pending quota warnings a run delivers first, recording them too).
    case send
    /// Recording the reminders' answers and resolving their claims.
    case record
}

extension RunSummary {
    /// A provider's trouble (77, 69) first; else, when the run's time ran out (or it was asked to stop) before
    /// it had claimed every due user, a temporary failure (75): the next run reminds them.
    public var failure: JobError? {
        if let trouble = ProviderTrouble.failure(troubles) { return trouble }
        guard stoppedEarly else { return nil }
        let cause = stoppedBy.map { "the run was stopped by \($0)" } ?? "the run's time ran out"
        return .tempFailure(
            "\(cause) before every due user was claimed (stopped_early): the next run reminds the rest")
    }
}

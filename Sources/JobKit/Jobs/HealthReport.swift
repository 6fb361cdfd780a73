import Foundation
import GRDB

/// The delivery-health report: what the notification log says about the last days.
public struct HealthReport: Sendable, Codable, Hashable {
    public struct DayType: Sendable, Codable, Hashable {
        public let day: String
        public let type: String
        public let claimed, sent, partial, failed, deferred, retry, superseded, inProgress: Int

        public init(
            day: String, type: String, claimed: Int, sent: Int, partial: Int, failed: Int, deferred: Int, retry: Int,
            superseded: Int, inProgress: Int
        ) {
            self.day = day
            self.type = type
            self.claimed = claimed
            self.sent = sent
            self.partial = partial
            self.failed = failed
            self.deferred = deferred
            self.retry = retry
            self.superseded = superseded
            self.inProgress = inProgress
        }
    }
    public struct Count: Sendable, Codable, Hashable {
        public let key: String
        public let count: Int

        public init(key: String, count: Int) {
            self.key = key
            self.count = count
        }
    }
    public struct DayRate: Sendable, Codable, Hashable {
        public let day: String
        public let deliveries: Int
        public let tokenDead: Int
        public var rate: Double { deliveries == 0 ? 0 : Double(tokenDead) / Double(deliveries) }

        public init(day: String, deliveries: Int, tokenDead: Int) {
            self.day = day
            self.deliveries = deliveries
            self.tokenDead = tokenDead
        }
    }
    public struct JobRun: Sendable, Codable, Hashable {
        public let job: String
        public let runAt: String
        public let outcome: String
        public let durationMs: Int?

        public init(job: String, runAt: String, outcome: String, durationMs: Int?) {
            self.job = job
            self.runAt = runAt
            self.outcome = outcome
            self.durationMs = durationMs
        }
    }

    public let from: String
    public let to: String
    public let days: Int
    /// Per UTC day (of the claim) and notification type.
    public let volume: [DayType]
    /// Deliveries in the window, `provider/outcome` → count.
    public let deliveries: [Count]
    public let invalidTokenRate: [DayRate]
    /// Active devices, `platform/provider` → count.
    public let activeDevices: [Count]
    /// Devices deactivated in the window, by reason.
    public let deactivations: [Count]
    public let lastRuns: [JobRun]
    /// Does the reminder work? Per locale and message (``ReminderEffect``); filled by ``ReportStore/fullHealthReport(from:to:catalog:)``.
    public var reminderEffect: [ReminderEffect.Message] = []

    public init(
        from: String, to: String, days: Int, volume: [DayType], deliveries: [Count], invalidTokenRate: [DayRate],
        activeDevices: [Count], deactivations: [Count], lastRuns: [JobRun]
    ) {
        self.from = from
        self.to = to
        self.days = days
        self.volume = volume
        self.deliveries = deliveries
        self.invalidTokenRate = invalidTokenRate
        self.activeDevices = activeDevices
        self.deactivations = deactivations
        self.lastRuns = lastRuns
    }
}

public protocol ReportStore: Sendable {
    func healthReport(from: Int64, to: Int64) async throws(JobError) -> HealthReport
    /// Every diary reminder sent (or partly sent) and claimed in `from..<to`, with the user's first entry after it.
    func reminderOutcomes(from: Int64, to: Int64) async throws(JobError) -> [ReminderOutcomeRow]
}

extension ReportStore {
    /// The report with its "does the reminder work?" section, the messages' titles from `catalog`.
    public func fullHealthReport(from: Int64, to: Int64, catalog: CopyCatalog = .builtIn) async throws(JobError)
        -> HealthReport
    {
        var report = try await healthReport(from: from, to: to)
        report.reminderEffect = ReminderEffect.summarize(try await reminderOutcomes(from: from, to: to)) {
            locale, index in
            catalog.message(.diaryReminder, locale: locale, index: index)?.title
        }
        return report
    }
}

extension SQLiteStore: ReportStore {
    public func reminderOutcomes(from: Int64, to: Int64) async throws(JobError) -> [ReminderOutcomeRow] {
        try await read("reading the reminders' outcomes") { db in
            try Row.fetchAll(
                db,
                sql: """
                    SELECT l.locale, l.message_index, coalesce(l.finished_at, l.claimed_at) AS at, l.period_key, u.timezone,
                           (SELECT min(e.created_at) FROM diary_entries e
                            WHERE e.user_id = l.user_id AND e.created_at >= coalesce(l.finished_at, l.claimed_at)
                              AND e.created_at < coalesce(l.finished_at, l.claimed_at) + 172800)
                    FROM notification_logs l JOIN users u ON u.id = l.user_id
                    WHERE l.notification_type = 'diary_reminder' AND l.status IN ('sent', 'partial')
                      AND l.claimed_at >= ? AND l.claimed_at < ? AND l.locale IS NOT NULL AND l.message_index IS NOT NULL
                    """, arguments: [from, to]
            ).map { row in
                ReminderOutcomeRow(
                    locale: row[0], messageIndex: row[1], remindedAt: row[2], period: row[3], timezone: row[4],
                    firstEntryAfter: row[5])
            }
        }
    }

    public func healthReport(from: Int64, to: Int64) async throws(JobError) -> HealthReport {
        try await read("building the report") { db in
            let volume = try Row.fetchAll(
                db,
                sql: """
                    SELECT date(claimed_at, 'unixepoch'), notification_type, count(*),
                           sum(status = 'sent'), sum(status = 'partial'), sum(status = 'failed'), sum(status = 'deferred'),
                           sum(status = 'retry'), sum(status = 'superseded'), sum(status = 'claimed')
                    FROM notification_logs WHERE claimed_at >= ? AND claimed_at < ?
                    GROUP BY 1, 2 ORDER BY 1, 2
                    """, arguments: [from, to]
            ).map { row in
                HealthReport.DayType(
                    day: row[0], type: row[1], claimed: row[2], sent: row[3], partial: row[4], failed: row[5],
                    deferred: row[6], retry: row[7], superseded: row[8], inProgress: row[9])
            }
            let deliveries = try Row.fetchAll(
                db,
                sql: """
                    SELECT provider || '/' || outcome, count(*) FROM notification_deliveries
                    WHERE created_at >= ? AND created_at < ? GROUP BY 1 ORDER BY 1
                    """, arguments: [from, to]
            ).map { HealthReport.Count(key: $0[0], count: $0[1]) }
            let rates = try Row.fetchAll(
                db,
                sql: """
                    SELECT date(created_at, 'unixepoch'), count(*), sum(outcome = 'token_dead') FROM notification_deliveries
                    WHERE created_at >= ? AND created_at < ? GROUP BY 1 ORDER BY 1
                    """, arguments: [from, to]
            ).map { HealthReport.DayRate(day: $0[0], deliveries: $0[1], tokenDead: $0[2]) }
            let active = try Row.fetchAll(
                db,
                sql: """
                    SELECT platform || '/' || provider, count(*) FROM user_devices WHERE is_active = 1 GROUP BY 1 ORDER BY 1
                    """
            ).map { HealthReport.Count(key: $0[0], count: $0[1]) }
            let deactivations = try Row.fetchAll(
                db,
                sql: """
                    SELECT coalesce(deactivation_reason, 'unknown'), count(*) FROM user_devices
                    WHERE is_active = 0 AND deactivated_at >= ? AND deactivated_at < ? GROUP BY 1 ORDER BY 2 DESC, 1
                    """, arguments: [from, to]
            ).map { HealthReport.Count(key: $0[0], count: $0[1]) }
            let runs = try Row.fetchAll(
                db,
                sql: """
                    SELECT job, run_at, outcome, duration_ms FROM job_runs j
                    WHERE run_at = (SELECT max(run_at) FROM job_runs WHERE job = j.job) GROUP BY job ORDER BY job
                    """
            ).map {
                HealthReport.JobRun(job: $0[0], runAt: Timestamps.format($0[1]), outcome: $0[2], durationMs: $0[3])
            }
            return HealthReport(
                from: Timestamps.format(from), to: Timestamps.format(to), days: Int((to - from) / 86_400),
                volume: volume, deliveries: deliveries, invalidTokenRate: rates, activeDevices: active,
                deactivations: deactivations, lastRuns: runs)
        }
    }
}

extension HealthReport {
    /// The report's forms: text for a terminal, JSON for a program, one self-contained HTML file with charts.
    public enum Format: String, Sendable, CaseIterable {
        case text, json, html
    }

    public func rendered(_ format: Format) -> String {
        switch format {
        case .text: text
        case .json: json
        case .html: html
        }
    }

    public var json: String { JSONLine.encode(self) }

    public var text: String {
        var lines = [
            "delivery health \(from) … \(to) (\(days) days)", "",
            "day         type                claimed  sent partial failed deferred retry superseded",
        ]
        for row in volume {
            lines.append(
                "\(row.day)  \(row.type.padding(toLength: 18, withPad: " ", startingAt: 0)) \(pad(row.claimed, 7)) \(pad(row.sent, 5)) \(pad(row.partial, 7)) \(pad(row.failed, 6)) \(pad(row.deferred, 8)) \(pad(row.retry, 5)) \(pad(row.superseded, 10))"
            )
        }
        lines += ["", "deliveries by provider/outcome:"] + deliveries.map { "  \($0.key): \($0.count)" }
        lines +=
            ["", "invalid-token rate by day:"]
            + invalidTokenRate.map {
                "  \($0.day): \(String(format: "%.2f", $0.rate * 100)) % (\($0.tokenDead) of \($0.deliveries))"
            }
        lines += ["", "active devices by platform/provider:"] + activeDevices.map { "  \($0.key): \($0.count)" }
        lines += ["", "deactivations by reason:"] + deactivations.map { "  \($0.key): \($0.count)" }
        lines +=
            ["", "last run of each job:"]
            + lastRuns.map { "  \($0.job): \($0.runAt) \($0.outcome) \($0.durationMs.map { "\($0) ms" } ?? "")" }
        lines += [
            "",
            "does the reminder work? (wrote within 3 h / that local day, 95 % interval; messages assigned at random)",
        ]
        lines += reminderEffect.map { message in
            func share(_ share: ReminderEffect.Share) -> String {
                String(format: "%5.1f %% [%4.1f–%4.1f]", share.share * 100, share.low * 100, share.high * 100)
            }
            return
                "  \(message.locale) #\(message.messageIndex) reminded=\(message.reminded) 3h=\(share(message.within3h)) day=\(share(message.sameLocalDay))"
                + (message.title.map { " \"\($0)\"" } ?? "")
        }
        return lines.joined(separator: "\n")
    }

    private func pad(_ value: Int, _ width: Int) -> String {
        let text = String(value)
        return String(repeating: " ", count: max(0, width - text.count)) + text
    }
}

import Foundation

/// The delivery-health report: what the notification log says about the last days. Built from a store's
/// `HealthFigures` by `init(from:to:figures:)`, the one place that turns counted rows into the report.
public struct HealthReport: Sendable, Codable, Hashable {
    package struct DayType: Sendable, Codable, Hashable {
        package let day: String
        package let type: String
        /// Every log row claimed that day, whatever its state; then the rows in each state.
        package private(set) var claimed = 0, sent = 0, partial = 0, failed = 0, deferred = 0, retry = 0
        /// Still `retry`, `deferred` or `claimed` past ``DeliveryLifecycle/retryHorizon`` at the report's end:
        /// never sent now.
        package private(set) var missed = 0
        package private(set) var superseded = 0, inProgress = 0

        init(day: String, type: String) {
            self.day = day
            self.type = type
        }

        /// The table's count columns, in order (the text and the HTML table), each state with its colour in the
        /// HTML chart, which stacks them in this order; `claimed`, which counts every row, has none.
        static var columns: [(name: String, value: (DayType) -> Int, chartColor: String?)] {
            [
                ("claimed", \.claimed, nil), ("sent", \.sent, "#2e7d32"), ("partial", \.partial, "#9ccc65"),
                ("failed", \.failed, "#c62828"), ("deferred", \.deferred, "#5c6bc0"), ("retry", \.retry, "#ef6c00"),
                ("missed", \.missed, "#6d4c41"), ("superseded", \.superseded, "#9e9e9e"),
                ("in progress", \.inProgress, "#26c6da"),
            ]
        }

        /// `count` rows in `status`, or in `missed` (a state this version does not know counts in ``claimed``
        /// only).
        mutating func add(_ count: Int, _ status: String) {
            claimed += count
            if status == DeliveryLifecycle.missedState {
                missed += count
                return
            }
            switch ClaimStatus(rawValue: status) {
            case .sent: sent += count
            case .partial: partial += count
            case .failed: failed += count
            case .deferred: deferred += count
            case .retry: retry += count
            case .superseded: superseded += count
            case .claimed: inProgress += count
            default: break
            }
        }
    }
    package struct Count: Sendable, Codable, Hashable {
        package let key: String
        package let count: Int
    }
    package struct DayRate: Sendable, Codable, Hashable {
        package let day: String
        package let deliveries: Int
        package let tokenDead: Int
        package var rate: Double { deliveries == 0 ? 0 : Double(tokenDead) / Double(deliveries) }
    }
    /// A job's latest instant and every run that evaluated it: the shards of a slot, overlapping runners, or a
    /// Lambda invocation retried with its event's `time` all record the same instant.
    package struct JobRun: Sendable, Codable, Hashable {
        package let job: String
        package let runAt: String
        /// The worst outcome among the runs (any outcome but `ok`, by name: `failed`, then `running`, a run that
        /// has not recorded its end: still going, or killed outright), so that a failed shard or first try does not
        /// hide behind a run that went well.
        package let outcome: String
        /// The longest of the runs.
        package let durationMs: Int?
        package let runs: Int
        /// How many runs ended each way, worst first.
        package let outcomes: [Count]
        /// The error that ended the run, from its recorded summary (of several runs: a failed one's).
        package var error: String?

        /// One line per job from the stores' rows (every run at the job's latest instant, any order).
        static func fold(_ rows: [HealthFigures.LastRunRow]) -> [JobRun] {
            let ok = RunOutcome.ok.rawValue
            return Dictionary(grouping: rows, by: \.job).sorted { $0.key < $1.key }.map { job, runs in
                let outcomes = Dictionary(grouping: runs, by: \.outcome).map {
                    Count(key: $0.key, count: $0.value.count)
                }
                .sorted { ($0.key == ok ? 1 : 0, $0.key) < ($1.key == ok ? 1 : 0, $1.key) }
                // The error of a run that ended as the worst did, the first by its text (rows come in any order).
                let error = runs.filter { $0.outcome == outcomes[0].key }.compactMap(\.error).min()
                return JobRun(
                    job: job, runAt: Timestamps.format(runs.map(\.runAt).max() ?? 0), outcome: outcomes[0].key,
                    durationMs: runs.compactMap(\.durationMs).max(), runs: runs.count, outcomes: outcomes,
                    error: error)
            }
        }

        /// `ok` for one run (`running (no end recorded: …)` for one that has not recorded its end); `failed, 3 runs
        /// (failed=1 ok=2)` for several.
        var outcomeText: String {
            guard runs > 1 else {
                return outcome == RunOutcome.running.rawValue
                    ? "running (no end recorded: still going, or killed)" : outcome
            }
            return "\(outcome), \(runs) runs (\(outcomes.map { "\($0.key)=\($0.count)" }.joined(separator: " ")))"
        }

        /// `12 ms` for one run, `longest 40 ms` for several; nil without a recorded duration.
        var durationText: String? { durationMs.map { runs > 1 ? "longest \($0) ms" : "\($0) ms" } }

        /// `: ` and the error that ended the run (on one line), or nothing.
        var errorText: String { error.map { ": " + LineText.escapingControls($0) } ?? "" }

        /// The text report's line: `diary-reminder: 2026-11-21T20:45:00Z ok 12 ms`, or with several runs
        /// `… failed, 3 runs (failed=1 ok=2), longest 40 ms`; an error that ended the run last:
        /// `… failed 12 ms: the database is read-only`.
        var line: String {
            "\(job): \(runAt) \(outcomeText)" + (durationText.map { (runs > 1 ? ", " : " ") + $0 } ?? "")
                + errorText
        }
    }

    package let from: String
    package let to: String
    package let days: Int
    /// Per UTC day (of the claim) and notification type.
    package let volume: [DayType]
    /// Deliveries in the window, `provider/outcome` → count.
    package let deliveries: [Count]
    package let invalidTokenRate: [DayRate]
    /// Active devices, `platform/provider/kind` (``TokenKind``) → count.
    package let activeDevices: [Count]
    /// Devices deactivated in the window, by reason.
    package let deactivations: [Count]
    /// Settings rows and active devices whose user does not exist (``OrphanedRows``): none unless a backend wrote
    /// around the schema's guards.
    package var orphans = OrphanedRows()
    package let lastRuns: [JobRun]
    /// Each job's runs in the window, how many failed, and the last that did.
    package let runsInWindow: [JobWindow]
    /// Does the reminder work? Per locale and message (``ReminderEffect``); filled by ``ReportStore/fullHealthReport(from:to:catalog:)``.
    package var reminderEffect: [ReminderEffect.Message] = []
    /// The users reminded in the window whose language the catalog has no reminder words for (they were sent the
    /// fallback locale's), by that language, most first; filled by ``ReportStore/fullHealthReport(from:to:catalog:)``.
    package var readersWithoutWords: [Count] = []
    /// True when the catalog learns: ``reminderEffect`` counts only the held-out choices (``CopyLearning``).
    package var heldOutOnly = false
    /// Reminders paused for users who ignored them (``ReminderPause``).
    package var pauses = Pauses()

    package struct Pauses: Sendable, Codable, Hashable {
        /// Users paused at the window's end.
        package var paused = 0
        /// Pauses that started in the window.
        package var started = 0
        /// Of those, users who wrote again before the window's end (their reminders resumed).
        package var cameBack = 0

        package init(paused: Int = 0, started: Int = 0, cameBack: Int = 0) {
            self.paused = paused
            self.started = started
            self.cameBack = cameBack
        }
    }
    /// How long each provider took to answer the window's deliveries, by provider.
    package let answerTimes: [AnswerTimes]

    /// One provider's answer times: from a request written to its answer, over the window's deliveries that had
    /// one. Each percentile is the upper bound (ms) of the bucket it falls in (``buckets``), or ``beyondBuckets``.
    package struct AnswerTimes: Sendable, Codable, Hashable {
        package let provider: String
        package let answers: Int
        package let p50Ms: Int
        package let p95Ms: Int
        package let p99Ms: Int

        /// The upper bounds (ms) of the buckets answer times are counted in; an answer takes at most the senders'
        /// answer deadline (30 s), and a slower one is counted past the last.
        package static let buckets = [5, 10, 20, 50, 100, 200, 500, 1_000, 2_000, 5_000, 10_000, 30_000]
        /// The bucket of an answer time past the last bound.
        package static let beyondBuckets = Int(Int32.max)

        /// The bucket of the integer expression `column` (its upper bound; NULL for NULL), for a store's `GROUP BY`.
        package static func bucketSQL(_ column: String) -> String {
            "CASE WHEN \(column) IS NULL THEN NULL "
                + buckets.map { "WHEN \(column) <= \($0) THEN \($0) " }.joined() + "ELSE \(beyondBuckets) END"
        }

        /// The providers' answer times from a store's counts per provider and bucket.
        static func fold(_ rows: [(provider: String, bucketMs: Int, count: Int)]) -> [AnswerTimes] {
            Dictionary(grouping: rows, by: \.provider).sorted { $0.key < $1.key }.map { provider, rows in
                let counts = rows.sorted { $0.bucketMs < $1.bucketMs }
                let answers = counts.reduce(0) { $0 + $1.count }
                /// The bucket holding the answer of rank ⌈share × answers⌉.
                func percentile(_ share: Double) -> Int {
                    let rank = max(1, Int((share * Double(answers)).rounded(.up)))
                    var seen = 0
                    for row in counts {
                        seen += row.count
                        if seen >= rank { return row.bucketMs }
                    }
                    return counts.last?.bucketMs ?? 0
                }
                return AnswerTimes(
                    provider: provider, answers: answers, p50Ms: percentile(0.5), p95Ms: percentile(0.95),
                    p99Ms: percentile(0.99))
            }
        }

        /// `≤ 50 ms`, `≤ 2 s`, `> 30 s`.
        static func bound(_ milliseconds: Int) -> String {
            guard milliseconds != beyondBuckets else { return "> \((buckets.last ?? 0) / 1_000) s" }
            return milliseconds >= 1_000 ? "≤ \(milliseconds / 1_000) s" : "≤ \(milliseconds) ms"
        }

        var line: String {
            "\(provider): p50 \(Self.bound(p50Ms)), p95 \(Self.bound(p95Ms)), p99 \(Self.bound(p99Ms)) (\(answers) answers)"
        }
    }

    /// The report of the window `from..<to` (UTC seconds) from what a store counted in it.
    package init(from: Int64, to: Int64, figures: HealthFigures) {
        self.from = Timestamps.format(from)
        self.to = Timestamps.format(to)
        days = Int((to - from) / 86_400)
        var volume: [DayType] = []
        for row in figures.claims {
            if volume.last?.day != row.day || volume.last?.type != row.type {
                volume.append(DayType(day: row.day, type: row.type))
            }
            volume[volume.count - 1].add(row.count, row.status)
        }
        self.volume = volume
        deliveries = figures.deliveries.map { Count(key: $0.key, count: $0.count) }
        answerTimes = AnswerTimes.fold(figures.answerTimes)
        invalidTokenRate = figures.deliveryDays.map {
            DayRate(day: $0.day, deliveries: $0.deliveries, tokenDead: $0.tokenDead)
        }
        activeDevices = figures.activeDevices.map { Count(key: $0.key, count: $0.count) }
        deactivations = figures.deactivations.map { Count(key: $0.key, count: $0.count) }
        lastRuns = JobRun.fold(figures.lastRuns)
        runsInWindow = figures.windowRuns.map { row in
            let failures = figures.lastFailures.filter { $0.job == row.job }
            return JobWindow(
                job: row.job, runs: row.runs, failed: row.failed,
                lastFailedAt: failures.map(\.runAt).max().map(Timestamps.format),
                lastError: failures.compactMap(\.error).min(), unfinished: row.unfinished,
                lastUnfinishedAt: row.lastUnfinishedAt.map(Timestamps.format))
        }
    }

    /// A job's runs in the report's window: the last run alone hides a job that fails now and then.
    package struct JobWindow: Sendable, Codable, Hashable {
        package let job: String
        package let runs: Int
        package let failed: Int
        /// The latest instant a run of the job failed, in the window.
        package let lastFailedAt: String?
        /// The error that ended a run failed at that instant, if it recorded one.
        package let lastError: String?
        /// Runs still `running`: killed outright (SIGKILL, out of memory, the host going down) before they
        /// recorded their end, or still going.
        package var unfinished = 0
        /// The latest instant of such a run, in the window.
        package var lastUnfinishedAt: String? = nil

        /// `diary-reminder: 672 runs, 3 failed, the last at 2026-11-20T03:15:00Z: recording deliveries: …`, with
        /// `1 with no end recorded (killed, or still going), the last at …;` before the failures when there are such.
        var line: String {
            "\(job): \(runs) run\(runs == 1 ? "" : "s"), "
                + (unfinished == 0
                    ? ""
                    : "\(unfinished) with no end recorded (killed, or still going)"
                        + (lastUnfinishedAt.map { ", the last at \($0)" } ?? "") + "; ")
                + "\(failed) failed" + (lastFailedAt.map { ", the last at \($0)" } ?? "")
                + (lastError.map { ": " + $0 } ?? "")
        }
    }
}

/// What a store counts for the report, as plain rows; ``HealthReport/init(from:to:figures:)`` makes the report.
package struct HealthFigures: Sendable {
    /// Log rows claimed in the window, per UTC day of the claim, type and state at the window's end
    /// (``DeliveryLifecycle/reportStatusSQL(_:now:)``), ordered by day and type.
    package var claims: [(day: String, type: String, status: String, count: Int)] = []
    /// Deliveries in the window per `provider/outcome`, ordered by key.
    package var deliveries: [(key: String, count: Int)] = []
    /// Deliveries in the window that had an answer time, per provider and bucket (``HealthReport/AnswerTimes``).
    package var answerTimes: [(provider: String, bucketMs: Int, count: Int)] = []
    /// Deliveries in the window per UTC day, and how many of them found the token dead, ordered by day.
    package var deliveryDays: [(day: String, deliveries: Int, tokenDead: Int)] = []
    /// Active devices per `platform/provider/kind`, ordered by key.
    package var activeDevices: [(key: String, count: Int)] = []
    /// Devices deactivated in the window per reason (`unknown` for none), most first.
    package var deactivations: [(key: String, count: Int)] = []
    /// Every run at each job's latest instant (UTC seconds), in any order.
    package var lastRuns: [LastRunRow] = []
    /// One run: its job, instant, outcome, duration, and the error that ended it (from its recorded summary).
    package typealias LastRunRow = (job: String, runAt: Int64, outcome: String, durationMs: Int?, error: String?)
    /// Per job, ordered by job: its runs in the window, how many of them failed, how many are still `running`
    /// (no end recorded), and the latest instant of those (UTC seconds).
    package var windowRuns: [(job: String, runs: Int, failed: Int, unfinished: Int, lastUnfinishedAt: Int64?)] = []
    /// Every failed run at each job's latest failed instant in the window (UTC seconds), in any order, with the
    /// error that ended it (from its recorded summary).
    package var lastFailures: [(job: String, runAt: Int64, error: String?)] = []

    package init() {}

    /// Fills ``deliveries``, ``deliveryDays`` and ``answerTimes`` from one scan of the window's deliveries, counted
    /// per UTC day, provider, outcome and answer-time bucket (``HealthReport/AnswerTimes/bucketSQL(_:)``; nil for a
    /// delivery without an answer time).
    package mutating func countDeliveries(
        _ rows: [(day: String, provider: String, outcome: String, bucketMs: Int?, count: Int)]
    ) {
        var byKey: [String: Int] = [:]
        var byDay: [String: (deliveries: Int, tokenDead: Int)] = [:]
        var byBucket: [String: [Int: Int]] = [:]
        for row in rows {
            byKey["\(row.provider)/\(row.outcome)", default: 0] += row.count
            byDay[row.day, default: (0, 0)].deliveries += row.count
            if row.outcome == DeliveryOutcome.tokenDead.rawValue {
                byDay[row.day, default: (0, 0)].tokenDead += row.count
            }
            if let bucket = row.bucketMs { byBucket[row.provider, default: [:]][bucket, default: 0] += row.count }
        }
        deliveries = byKey.sorted { $0.key < $1.key }.map { ($0.key, $0.value) }
        deliveryDays = byDay.sorted { $0.key < $1.key }.map { ($0.key, $0.value.deliveries, $0.value.tokenDead) }
        answerTimes = byBucket.sorted { $0.key < $1.key }.flatMap { provider, buckets in
            buckets.sorted { $0.key < $1.key }.map { (provider, $0.key, $0.value) }
        }
    }
}

package protocol ReportStore: ExplainSource, DueSetSource {
    func healthFigures(from: Int64, to: Int64) async throws(JobError) -> HealthFigures
    /// Every diary reminder sent (or partly sent) and claimed in `from..<to`, with the user's first entry after it.
    func reminderOutcomes(from: Int64, to: Int64) async throws(JobError) -> [ReminderOutcomeRow]
    /// The locales of the users sent (or partly sent) a diary reminder claimed in `from..<to`, each with how many
    /// such users have it.
    func remindedLocales(from: Int64, to: Int64) async throws(JobError) -> [(locale: String, users: Int)]
    /// The pauses of the window (``ReportSQL/pauses``).
    func pauseFigures(from: Int64, to: Int64) async throws(JobError) -> HealthReport.Pauses
}

extension ReportStore {
    package func healthReport(from: Int64, to: Int64) async throws(JobError) -> HealthReport {
        var report = HealthReport(from: from, to: to, figures: try await healthFigures(from: from, to: to))
        report.orphans = try await orphanedRows(userID: nil)
        report.pauses = try await pauseFigures(from: from, to: to)
        return report
    }

    /// The report with its "does the reminder work?" section, the messages' titles from `catalog`, and the readers
    /// `catalog` has no reminder words for.
    package func fullHealthReport(from: Int64, to: Int64, catalog: CopyCatalog = .builtIn) async throws(JobError)
        -> HealthReport
    {
        var report = try await healthReport(from: from, to: to)
        var outcomes = try await reminderOutcomes(from: from, to: to)
        // With learned words, only the held-out (uniform) choices compare the messages without bias.
        if let learning = catalog.learning {
            outcomes = outcomes.filter { learning.isHeldOut(userID: $0.userID, period: $0.period) }
            report.heldOutOnly = true
        }
        report.reminderEffect = ReminderEffect.summarize(outcomes) {
            locale, index in
            catalog.message(.diaryReminder, locale: locale, index: index)?.title
        }
        if let learning = catalog.learning {
            // The counts the choices of today's local dates use (`to`'s UTC date).
            let today = ZoneClock.split(wallSeconds: to).date.description
            let outcomes = CopyLearning.byLocale(
                try await copyOutcomes(days: CopyLearning.countedDays(for: today), record: false, now: to))
            var chances: [String: [Double]] = [:]
            for index in report.reminderEffect.indices {
                let locale = report.reminderEffect[index].locale
                if chances[locale] == nil {
                    chances[locale] = learning.chances(
                        count: catalog.messages(for: .diaryReminder, locale: locale).count,
                        outcomes: outcomes[locale.lowercased()] ?? [:])
                }
                let messageIndex = report.reminderEffect[index].messageIndex
                if let list = chances[locale], list.indices.contains(messageIndex) {
                    report.reminderEffect[index].chance = list[messageIndex]
                }
            }
        }
        report.readersWithoutWords = catalog.readersWithoutWords(
            try await remindedLocales(from: from, to: to), for: .diaryReminder
        ).map { HealthReport.Count(key: $0.language, count: $0.users) }
        return report
    }
}

extension HealthReport {
    /// The report's forms: text for a terminal, JSON for a program, one self-contained HTML file with charts.
    public enum Format: String, Sendable, CaseIterable {
        case text, json, html
    }

    package func rendered(_ format: Format) -> String {
        switch format {
        case .text: text
        case .json: json
        case .html: html
        }
    }

    package var json: String { JSONLine.encode(self) }

    package var text: String {
        let columns = DayType.columns
        var lines = [
            "delivery health \(from) … \(to) (\(days) days)", "",
            "day         " + pad("type", 18, left: true) + columns.map { " " + $0.name }.joined(),
        ]
        if volume.isEmpty { lines.append("  none") }
        for row in volume {
            lines.append(
                "\(row.day)  " + pad(row.type, 18, left: true)
                    + columns.map { " " + pad(String($0.value(row)), $0.name.count) }.joined())
        }
        func section(_ title: String, _ rows: [String]) -> [String] {
            ["", title] + (rows.isEmpty ? ["  none"] : rows.map { "  " + $0 })
        }
        lines += section("deliveries by provider/outcome:", deliveries.map { "\($0.key): \($0.count)" })
        lines += section(
            "provider answer times (request written to answer; the bucket of each percentile):",
            answerTimes.map(\.line))
        lines += section(
            "invalid-token rate by day:",
            invalidTokenRate.map {
                "\($0.day): \(String(format: "%.2f", $0.rate * 100)) % (\($0.tokenDead) of \($0.deliveries))"
            })
        lines += section("active devices by platform/provider/kind:", activeDevices.map { "\($0.key): \($0.count)" })
        lines += section("deactivations by reason:", deactivations.map { "\($0.key): \($0.count)" })
        if !orphans.isEmpty {
            lines += section(
                "rows whose user does not exist (no run reads them; written with SQLite's foreign keys off before migration 014):",
                ["\(orphans.description)"])
        }
        lines += section(
            "last run of each job:",
            lastRuns.map(\.line))
        lines += section("runs of each job in the window:", runsInWindow.map(\.line))
        func share(_ share: ReminderEffect.Share) -> String {
            String(format: "%5.1f %% [%4.1f–%4.1f]", share.share * 100, share.low * 100, share.high * 100)
        }
        lines += section(
            "does the reminder work? (wrote within 3 h / that local day, 95 % interval; messages assigned at random"
                + (heldOutOnly ? ": the held-out choices only; chance: of being chosen now)" : ")"),
            reminderEffect.map { message in
                "\(message.locale) #\(message.messageIndex) reminded=\(message.reminded) 3h=\(share(message.within3h)) day=\(share(message.sameLocalDay))"
                    + (message.chance.map { String(format: " chance=%.1f %%", $0 * 100) } ?? "")
                    + (message.title.map { " \"\($0)\"" } ?? "")
            })
        lines += section(
            "reminders paused for users who ignored them:",
            [
                "paused now: \(pauses.paused); started in the window: \(pauses.started), of whom \(pauses.cameBack) wrote again"
            ])
        lines += section(
            "reminded users whose language has no words in the catalog (sent \(CopyCatalog.fallbackLocale)), by language:",
            readersWithoutWords.map { "\($0.key): \($0.count)" })
        // Reasons, locales and titles are stored text (the app records its own deactivation reasons): each row
        // stays on its line.
        return lines.map(LineText.escapingControls).joined(separator: "\n")
    }

    /// `text` padded with spaces to `width`: right-aligned (numbers), or left-aligned.
    private func pad(_ text: String, _ width: Int, left: Bool = false) -> String {
        let padding = String(repeating: " ", count: max(0, width - text.count))
        return left ? text + padding : padding + text
    }
}

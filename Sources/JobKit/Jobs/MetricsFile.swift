import Foundation
import Logging
import Prometheus

/// A job's metrics in the Prometheus text format, for node_exporter's textfile collector: one file per job,
/// replaced whole after every run (written beside it, then renamed), so the collector never reads half a file.
///
/// Each run is its own process, so the values are gauges of the last run; `…_last_success_timestamp_seconds`
/// is carried over from the file it replaces when the run fails, which is what the standard dead-man alert
/// (`time() - diary_push_last_success_timestamp_seconds > 1800`) needs. The text is made by swift-prometheus's
/// registry (docs/OPERATIONS.md: it costs no measurable start-up, as it is only used after the run).
package struct MetricsFile: Sendable {
    package static let lastSuccessName = "diary_push_last_success_timestamp_seconds"

    package let path: String

    package init(path: String) { self.path = path }

    /// The figures every job reports, then `summary`'s own (``MeteredSummary``). `summary` is nil when the run
    /// failed before it had one.
    package static func text<Summary: MeteredSummary>(
        _ summary: Summary?, job: String, now: Int64, exitCode: Int32,
        durationSeconds: Double, previousLastSuccess: Double?, previousCounters: [String: Double] = [:]
    ) -> String {
        emit(
            job: job, now: now, exitCode: exitCode, durationSeconds: durationSeconds,
            previousLastSuccess: previousLastSuccess
        ) { registry in
            summary?.recordFigures(job: job, into: registry)
        } + counters(summary?.counterIncrements(job: job) ?? [], previous: previousCounters)
    }

    /// A counter's increase in one run: its samples' labels and the amount.
    package struct CounterIncrement: Sendable {
        package let labels: [(String, String)]
        package let amount: Int

        package init(labels: [(String, String)], amount: Int) {
            self.labels = labels
            self.amount = amount
        }
    }

    /// The counters the files carry from run to run: each run is a process of its own, so a counter's total is
    /// the file's previous sample plus what the run adds (Prometheus' `rate()` and `increase()` take a reset,
    /// a file deleted, in their stride).
    package static let missedDevicesCounter = "diary_push_devices_missed_total"
    static let carriedCounters: [(name: String, help: String)] = [
        (
            missedDevicesCounter,
            "Devices of reminders whose catch-up window closed before they were reached, by provider and reason."
        )
    ]

    /// The carried counters' text: the previous samples (`name{labels}` → value), each increased by this run.
    static func counters(_ increments: [(name: String, increment: CounterIncrement)], previous: [String: Double])
        -> String
    {
        var text = ""
        for (name, help) in carriedCounters {
            var samples = previous.filter { $0.key.hasPrefix(name + "{") }
            for (incrementName, increment) in increments where incrementName == name {
                let labels = increment.labels.map { "\($0.0)=\"\(escapeLabel($0.1))\"" }.joined(separator: ",")
                samples[name + "{" + labels + "}", default: 0] += Double(increment.amount)
            }
            guard !samples.isEmpty else { continue }
            text += "# HELP \(name) \(help)\n# TYPE \(name) counter\n"
            for (sample, value) in samples.sorted(by: { $0.key < $1.key }) {
                text += "\(sample) \(Int64(value))\n"
            }
        }
        return text
    }

    /// A label value as the Prometheus text format writes it.
    static func escapeLabel(_ value: String) -> String {
        value.replacingOccurrences(of: "\\", with: "\\\\").replacingOccurrences(of: "\"", with: "\\\"")
            .replacingOccurrences(of: "\n", with: "\\n")
    }

    /// The carried counters' samples in the file this run replaces (`name{labels}` → value).
    package func previousCounters() -> [String: Double] {
        guard let text = try? String(contentsOfFile: path, encoding: .utf8) else { return [:] }
        var samples: [String: Double] = [:]
        for line in text.split(separator: "\n")
        where Self.carriedCounters.contains(where: { line.hasPrefix($0.name + "{") }) {
            guard let space = line.lastIndex(of: " "), let value = Double(line[line.index(after: space)...]) else {
                continue
            }
            samples[String(line[..<space])] = value
        }
        return samples
    }

    fileprivate static func reminderFigures(
        _ summary: RunSummary, job: String, into registry: PrometheusCollectorRegistry
    ) {
        let users: [(String, Int)] = [
            ("candidates", summary.candidates), ("due", summary.due), ("claimed", summary.claimed),
            ("taken_over", summary.takenOver), ("pausing", summary.pausing), ("sent", summary.sent),
            ("partial", summary.partial),
            ("failed", summary.failed), ("retry", summary.retry),
        ]
        for (state, count) in users {
            registry.gauge(
                "diary_push_run_users", labels: [("job", job), ("state", state)],
                help:
                    "Users of the last run by state (due, claimed, pausing: sent their last reminder, sent, partial, failed, "
                    + "retry, …)."
            ).set(Int64(count))
        }
        let warnings: [(String, Int)] = [
            ("delivered", summary.warningsDelivered), ("held", summary.warningsHeld),
            ("withdrawn", summary.warningsWithdrawn),
        ]
        for (state, count) in warnings {
            registry.gauge(
                "diary_push_run_quota_warnings", labels: [("job", job), ("state", state)],
                help: "Quota warnings held for quiet hours or left for retry that the last run delivered, held again "
                    + "or withdrew."
            ).set(Int64(count))
        }
        // One value each for the whole run.
        let single: [(name: String, value: Int, help: String)] = [
            (
                "diary_push_run_ambiguous_attempts", summary.ambiguous,
                "Device attempts of the last run whose fate is unknown (no answer)."
            ),
            (
                "diary_push_run_stopped_early", summary.stoppedEarly ? 1 : 0,
                "1 when the last run's time ran out before it had claimed every due user (the next run reminds them)."
            ),
            (
                "diary_push_run_earlier_runs_without_end", summary.earlierRunsWithoutEnd,
                "Earlier runs the last run found without a recorded end past their lease (killed or lost)."
            ),
            (
                "diary_push_run_invalid_tokens", summary.invalidTokens,
                "Stored tokens of the wrong shape the last run deactivated."
            ),
        ]
        for gauge in single {
            registry.gauge(gauge.name, labels: [("job", job)], help: gauge.help).set(Int64(gauge.value))
        }
        for (provider, outcome, count) in deliveries(summary) {
            registry.gauge(
                "diary_push_run_deliveries",
                labels: [("job", job), ("provider", provider.rawValue), ("outcome", outcome.rawValue)],
                help: "Device attempts of the last run by provider and outcome."
            ).set(Int64(count))
        }
        for (reason, count) in summary.skipped.sorted(by: { $0.key < $1.key }) {
            registry.gauge(
                "diary_push_run_skipped_users", labels: [("job", job), ("reason", reason.rawValue)],
                help: "Users the last run did not remind, by reason."
            ).set(Int64(count))
        }
        if let leased = summary.bucketsLeased {
            // Runners sharing the slot's due set (``DueSetBuckets``): how much of it this one took, and
            // beside how many others.
            registry.gauge(
                "diary_push_run_buckets", labels: [("job", job), ("kind", "leased")],
                help: "Buckets of the due set the last run leased, and the due set's buckets in all."
            ).set(Int64(leased))
            registry.gauge(
                "diary_push_run_buckets", labels: [("job", job), ("kind", "total")],
                help: "Buckets of the due set the last run leased, and the due set's buckets in all."
            ).set(Int64(summary.buckets ?? 0))
            registry.gauge(
                "diary_push_run_other_runners", labels: [("job", job)],
                help: "Other runners that leased buckets of the last run's due set."
            ).set(Int64(summary.otherRunners))
        }
        troubles(registry, summary.troubles, job: job)
        var pending: [String: [String: Int]] = [:]
        for entry in summary.pendingRetry {
            pending[entry.provider.rawValue, default: [:]][entry.reason, default: 0] += entry.devices
        }
        for (provider, reason, devices) in pending.sorted(by: { $0.key < $1.key }).flatMap({ provider, reasons in
            reasons.sorted { $0.key < $1.key }.map { (provider, $0.key, $0.value) }
        }) {
            registry.gauge(
                "diary_push_run_devices_pending_retry",
                labels: [("job", job), ("provider", provider), ("reason", reason)],
                help: "Devices the last run left pending for a later run by a transient answer, by provider and reason "
                    + "(throttles and a few 5xx; an outage also counts in diary_push_run_devices_left)."
            ).set(Int64(devices))
        }
        for (provider, count) in summary.credentialMints.sorted(by: { $0.key.rawValue < $1.key.rawValue }) {
            registry.gauge(
                "diary_push_run_credential_mints", labels: [("job", job), ("provider", provider.rawValue)],
                help: "Provider credentials the last run minted (cached ones cost none)."
            ).set(Int64(count))
        }
    }

    /// The janitor's figures.
    fileprivate static func janitorFigures(
        _ summary: JanitorSummary, job: String, into registry: PrometheusCollectorRegistry
    ) {
        let figures: [(String, Int)] = [
            ("stale_deactivated", summary.staleDeactivated),
            ("fcm_expired_deactivated", summary.fcmExpiredDeactivated),
            ("probed", summary.probed), ("probe_unregistered", summary.probeUnregistered),
            ("deliveries_deleted", summary.deliveriesDeleted), ("logs_deleted", summary.logsDeleted),
            ("runs_deleted", summary.runsDeleted),
            ("devices_purged", summary.devicesPurged), ("waiting_expired", summary.waitingExpired),
            ("partitions_dropped", summary.partitionsDropped.count),
        ]
        for (action, count) in figures {
            registry.gauge(
                "diary_push_janitor_rows", labels: [("job", job), ("action", action)],
                help: "What the last janitor run did, by action."
            ).set(Int64(count))
        }
        for (key, count) in summary.activeDevices.sorted(by: { $0.key < $1.key }) {
            let parts = key.split(separator: "/", maxSplits: 1).map(String.init)
            registry.gauge(
                "diary_push_active_devices",
                labels: [("job", job), ("provider", parts.first ?? key), ("kind", parts.count > 1 ? parts[1] : "")],
                help: "Active devices by provider and kind (token, fid) after the last janitor run."
            ).set(Int64(count))
        }
        troubles(registry, summary.troubles, job: job)
    }

    /// A registry with the figures every job reports, then the job's own; its text.
    private static func emit(
        job: String, now: Int64, exitCode: Int32, durationSeconds: Double, previousLastSuccess: Double?,
        _ figures: (PrometheusCollectorRegistry) -> Void
    ) -> String {
        let registry = PrometheusCollectorRegistry()
        registry.gauge(
            "diary_push_last_run_timestamp_seconds", labels: [("job", job)],
            help: "When the last run ran (its --now), Unix seconds."
        ).set(Int64(now))
        registry.gauge(
            "diary_push_last_run_exit_code", labels: [("job", job)],
            help: "The last run's exit code (sysexits; 0 ok)."
        ).set(Int64(exitCode))
        registry.gauge(
            "diary_push_run_duration_seconds", labels: [("job", job)],
            help: "How long the last run took."
        ).set(durationSeconds)
        if let lastSuccess = exitCode == 0 ? Double(now) : previousLastSuccess {
            registry.gauge(
                lastSuccessName, labels: [("job", job)],
                help: "When the job last succeeded (exit 0), Unix seconds: alert when it is too old."
            ).set(lastSuccess)
        }
        figures(registry)
        return registry.emitToString()
    }

    private static func troubles(_ registry: PrometheusCollectorRegistry, _ troubles: [ProviderTrouble], job: String) {
        for cause in [ProviderTrouble.Cause.credentials, .unavailable, .misconfigured] {
            for provider in Provider.all.map(DeliveryChannel.init) {
                let devices = troubles.first { $0.provider == provider && $0.cause == cause }?.devices ?? 0
                registry.gauge(
                    "diary_push_run_devices_left",
                    labels: [("job", job), ("provider", provider.rawValue), ("cause", cause.rawValue)],
                    help: "Due devices the last run left to later runs because of a provider, by cause."
                ).set(Int64(devices))
            }
        }
    }

    /// Attempts by provider and outcome, every outcome listed for every provider that had attempts.
    private static func deliveries(_ summary: RunSummary) -> [(DeliveryChannel, DeliveryOutcome, Int)] {
        summary.outcomesByProvider.sorted { $0.key.rawValue < $1.key.rawValue }.flatMap { channel, counts in
            DeliveryOutcome.allCases.map { (channel, $0, counts[$0] ?? 0) }
        }
    }

    /// The last success recorded in the file this run replaces, if any.
    package func previousLastSuccess(job: String) -> Double? {
        guard let text = try? String(contentsOfFile: path, encoding: .utf8) else { return nil }
        for line in text.split(separator: "\n")
        where line.hasPrefix(Self.lastSuccessName + "{") && line.contains("job=\"\(job)\"") {
            if let value = line.split(separator: " ").last.flatMap({ Double($0) }) { return value }
        }
        return nil
    }

    /// Replaces the file atomically (``AtomicFile``), mode 0644 whatever the umask: the scraper reads it as
    /// another user.
    package func write(_ text: String) throws(JobError) {
        do { try AtomicFile.replace(path, with: Data(text.utf8), mode: 0o644) } catch {
            throw .ioError("cannot write the metrics file \(path): \(systemReason(error))")
        }
    }

    /// Writes the file; a failure is logged and never changes the run's outcome.
    package func writeLogging(_ text: String, logger: Logger) {
        do { try write(text) } catch {
            logger.error("metrics not written", metadata: ["path": "\(path)", "error": "\(error.message)"])
        }
    }
}

/// A summary that a scheduled run's metrics file is written from (``MetricsFile/text(_:job:now:exitCode:durationSeconds:previousLastSuccess:previousCounters:)``).
package protocol MeteredSummary: JobSummary {
    /// Adds the job's own figures to the ones every job reports.
    func recordFigures(job: String, into registry: PrometheusCollectorRegistry)
    /// What the run adds to the counters the file carries from run to run (``MetricsFile/carriedCounters``).
    func counterIncrements(job: String) -> [(name: String, increment: MetricsFile.CounterIncrement)]
}

extension MeteredSummary {
    package func counterIncrements(job: String) -> [(name: String, increment: MetricsFile.CounterIncrement)] { [] }
}

extension RunSummary: MeteredSummary {
    package func recordFigures(job: String, into registry: PrometheusCollectorRegistry) {
        MetricsFile.reminderFigures(self, job: job, into: registry)
    }

    package func counterIncrements(job: String) -> [(name: String, increment: MetricsFile.CounterIncrement)] {
        devicesMissed.map {
            (
                MetricsFile.missedDevicesCounter,
                MetricsFile.CounterIncrement(
                    labels: [("job", job), ("provider", $0.provider), ("reason", $0.reason)], amount: $0.devices)
            )
        }
    }
}

extension JanitorSummary: MeteredSummary {
    package func recordFigures(job: String, into registry: PrometheusCollectorRegistry) {
        MetricsFile.janitorFigures(self, job: job, into: registry)
    }
}

extension PrometheusCollectorRegistry {
    /// A gauge with its labels and `# HELP` line. Its name stays one literal, spelled as docs/alerts.yml and
    /// dashboards spell it, rather than composed of a namespace, a name and a unit.
    fileprivate func gauge(_ name: String, labels: [(String, String)], help: String) -> Gauge {
        makeGauge(descriptor: MetricNameDescriptor(metricName: name, unitName: "", helpText: help), labels: labels)
    }
}

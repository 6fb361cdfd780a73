import JobKit
import Logging

/// What watches a scheduled run from outside: the metrics file and the heartbeat. Both see every run, a
/// failed one included (an error before any summary, or a summary that leaves due work to a provider), and
/// neither can change the run's outcome.
package struct RunObservers: Sendable {
    package var metrics: MetricsFile?
    package var heartbeat: Heartbeat?

    package init(metrics: MetricsFile? = nil, heartbeat: Heartbeat? = nil) {
        self.metrics = metrics
        self.heartbeat = heartbeat
    }

    /// The observers the configuration asks for (`--metrics-file`/PUSH_METRICS_FILE, `--ping-url`/PUSH_PING_URL);
    /// an https heartbeat trusts the extra CA certificates the providers do (`--ca-file`/PUSH_CA_FILE).
    package init(
        _ config: ConfigResolver, metricsFile: String?, pingURL: String?, caFile: String? = nil, logger: Logger
    ) throws(JobError) {
        metrics = try config.string(.metricsFile, flag: metricsFile).map { MetricsFile(path: $0) }
        if let raw = try config.raw(.pingURL, flag: pingURL) {
            do throws(JobError) {
                heartbeat = try Heartbeat(url: raw.value, caFile: config.string(.caFile, flag: caFile), logger: logger)
            } catch {
                // A bad URL from the environment is a configuration error that names its variable; a CA file's
                // error is the CA file's own.
                guard error.isUsage, !raw.source.hasPrefix("--") else { throw error }
                throw JobError.config("\(raw.source): \(error.message)")
            }
        } else {
            heartbeat = nil
        }
    }

    /// Runs `body` between a start ping and a success or fail ping, writes the metrics file after it, and ends
    /// as the run does: with its summary, or its error (the summary's own failure included: 77, 69).
    package func observe<Summary: MeteredSummary>(
        job: String, now: Int64, logger: Logger, _ body: () async throws(JobError) -> Summary?
    ) async throws(JobError) -> Summary? {
        await heartbeat?.ping(.start)
        let previous = metrics?.previousLastSuccess(job: job)
        let previousCounters = metrics?.previousCounters() ?? [:]
        let started = ContinuousClock.now
        let result: Result<Summary?, JobError>
        do throws(JobError) { result = .success(try await body()) } catch { result = .failure(error) }
        let elapsed = ContinuousClock.now - started
        let seconds = Double(elapsed.components.seconds) + Double(elapsed.components.attoseconds) / 1e18
        let summary: Summary?
        let error: JobError?
        switch result {
        case .success(let made): (summary, error) = (made, made?.failure)
        case .failure(let failure): (summary, error) = (nil, failure)
        }
        let code = error?.exitCode ?? 0
        metrics?.writeLogging(
            MetricsFile.text(
                summary, job: job, now: now, exitCode: code, durationSeconds: seconds, previousLastSuccess: previous,
                previousCounters: previousCounters),
            logger: logger)
        let body =
            summary?.json
            ?? "{\"job\":\(JSONLine.quote(job)),\"error\":\(JSONLine.quote(error?.message ?? "")),\"exit_code\":\(code)}"
        await heartbeat?.ping(code == 0 ? .success : .fail, body: body)
        if let error { throw error }
        return summary
    }
}

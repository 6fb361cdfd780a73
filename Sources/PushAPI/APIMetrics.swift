import HTTPTypes
import NIOConcurrencyHelpers
import OpenAPIRuntime
import Prometheus

/// The server's own metrics, served at `/metrics`: requests by operation and status, and their durations.
package final class APIMetrics: Sendable {
    package let registry = PrometheusCollectorRegistry()
    /// The registry's metrics, made once per label set (the registry's own lookup builds its key every time).
    private let counters = NIOLockedValueBox<[String: Counter]>([:])
    private let histograms = NIOLockedValueBox<[String: DurationHistogram]>([:])

    package init() {}

    func record(operation: String, status: Int, duration: Duration) {
        let key = "\(operation) \(status)"
        let counter =
            counters.withLockedValue { $0[key] }
            ?? registry.makeCounter(
                descriptor: MetricNameDescriptor(
                    metricName: "diary_push_api_requests_total", unitName: "",
                    helpText: "HTTP API requests answered, by operation and status."),
                labels: [("operation", operation), ("status", String(status))])
        counters.withLockedValue { $0[key] = counter }
        counter.increment()
        let histogram = histograms.withLockedValue { $0[operation] } ?? makeHistogram(operation)
        histograms.withLockedValue { $0[operation] = histogram }
        histogram.recordNanoseconds(
            duration.components.seconds * 1_000_000_000 + duration.components.attoseconds / 1_000_000_000)
    }

    private func makeHistogram(_ operation: String) -> DurationHistogram {
        registry.makeDurationHistogram(
            descriptor: MetricNameDescriptor(
                metricName: "diary_push_api_request_duration_seconds", unitName: "",
                helpText: "Time from a request's head to its answer, by operation."),
            labels: [("operation", operation)],
            buckets: [
                .milliseconds(1), .milliseconds(5), .milliseconds(10), .milliseconds(50), .milliseconds(100),
                .milliseconds(500), .seconds(1), .seconds(5),
            ])
    }

    /// The Prometheus text exposition.
    package var text: String { registry.emitToString() }
}

/// Counts every operation's answer, problems included (it sits outside ``ProblemMiddleware``'s answers).
struct MetricsMiddleware: ServerMiddleware {
    let metrics: APIMetrics

    func intercept(
        _ request: HTTPRequest, body: HTTPBody?, metadata: ServerRequestMetadata, operationID: String,
        next: @Sendable (HTTPRequest, HTTPBody?, ServerRequestMetadata) async throws -> (HTTPResponse, HTTPBody?)
    ) async throws -> (HTTPResponse, HTTPBody?) {
        let start = ContinuousClock.now
        let answer = try await next(request, body, metadata)
        metrics.record(operation: operationID, status: answer.0.status.code, duration: ContinuousClock.now - start)
        return answer
    }
}

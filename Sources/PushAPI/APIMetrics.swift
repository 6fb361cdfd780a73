import HTTPTypes
import OpenAPIRuntime
import Prometheus

/// The server's own metrics, served at `/metrics`: requests by operation and status, and their durations.
package final class APIMetrics: Sendable {
    package let registry = PrometheusCollectorRegistry()

    package init() {}

    func record(operation: String, status: Int, duration: Duration) {
        registry.makeCounter(
            name: "diary_push_api_requests_total", labels: [("operation", operation), ("status", String(status))],
            help: "HTTP API requests answered, by operation and status."
        ).increment()
        registry.makeDurationHistogram(
            name: "diary_push_api_request_duration_seconds", labels: [("operation", operation)],
            buckets: [
                .milliseconds(1), .milliseconds(5), .milliseconds(10), .milliseconds(50), .milliseconds(100),
                .milliseconds(500), .seconds(1), .seconds(5),
            ],
            help: "Time from a request's head to its answer, by operation."
        ).recordNanoseconds(
            duration.components.seconds * 1_000_000_000 + duration.components.attoseconds / 1_000_000_000)
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

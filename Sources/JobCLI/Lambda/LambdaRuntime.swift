import Foundation
import JobKit
import JobKitDelivery
import Logging

/// The Lambda custom-runtime loop: fetch the next invocation, hand its event to the handler, post the
/// summary (or the error) back, and go again — with the same handler, so the store, provider
/// connections and credentials it holds stay warm between invocations.
package enum LambdaRuntime {
    /// Serves invocations until the Runtime API fails (the platform is shutting the environment down) or,
    /// with `limit`, until that many have been served.
    ///
    /// - Parameters:
    ///   - wallClockMs: the real clock in Unix milliseconds, read once per invocation: it turns the
    ///     deadline into a monotonic instant and is the instant of events that carry none (the hook's).
    ///   - exportsTraceID: set `_X_AMZN_TRACE_ID` in the process's environment, as the platform's runtimes do.
    ///     Off only where other threads of the process start processes (a test run): `setenv` beside
    ///     `Process.run()`, which copies the environment, corrupts it.
    package static func serve<Handler: JobHandler>(
        _ handler: Handler, client: RuntimeAPIClient, logger: Logger,
        wallClockMs: @Sendable () -> Int64 = { Int64(Date().timeIntervalSince1970 * 1000) },
        limit: Int? = nil, exportsTraceID: Bool = true
    ) async throws(JobError) where Handler.Event: LambdaEvent {
        var served = 0
        while limit.map({ served < $0 }) ?? true {
            let invocation = try await client.next()
            served += 1
            let arrivedMs = wallClockMs()
            let context = InvocationContext(
                now: arrivedMs / 1000,
                deadline: ContinuousClock.now + .milliseconds(invocation.deadlineMs - arrivedMs),
                requestID: invocation.requestID)
            var log = logger
            log[metadataKey: "request_id"] = "\(invocation.requestID)"
            if let traceID = invocation.traceID { log[metadataKey: "trace_id"] = "\(traceID)" }

            // The X-Ray trace id: in every log line of this invocation, and in the environment as the platform's
            // own runtimes set it.
            if !exportsTraceID {
                // The trace id is in the log lines and in ``LambdaTrace/id`` alone.
            } else if let traceID = invocation.traceID {
                setenv("_X_AMZN_TRACE_ID", traceID, 1)
            } else {
                unsetenv("_X_AMZN_TRACE_ID")
            }
            let result: Result<Handler.Summary, JobError> = await LambdaTrace.$id.withValue(invocation.traceID) {
                do throws(JobError) {
                    let event = try Handler.Event.decode(lambdaPayload: invocation.payload)
                    return .success(try await handler.handle(event, context: context))
                } catch {
                    return .failure(error)
                }
            }
            switch result {
            case .success(let summary) where summary.failure != nil:
                // Done all it could, and left due work to a provider's trouble: an error for Lambda's metrics,
                // alarms and destinations, with the summary in its message.
                let failure = summary.failure!
                log.error(
                    "invocation left due work undelivered",
                    metadata: ["error_type": "\(failure.kind)", "error": "\(failure.message)"])
                try await client.fail(invocation.requestID, LambdaErrorReport(failure, summary: summary.json))
            case .success(let summary):
                log.info("\(summary.text)")
                try await client.respond(to: invocation.requestID, json: summary.json)
            case .failure(let error):
                log.error("invocation failed", metadata: ["error_type": "\(error.kind)", "error": "\(error.message)"])
                try await client.fail(invocation.requestID, LambdaErrorReport(error))
            }
        }
    }
}

import Foundation
import Logging

/// A job served in-process: its store (as `PUSH_DATABASE_URL` says, opened by a ``StoreOpener``) and its handler,
/// built once from the `PUSH_*` settings and reused for every call — what the Lambda runtime loop serves, and
/// what a Swift backend (Vapor, Hummingbird, …) keeps for its lifetime instead of spawning a process per write:
///
/// ```swift
/// let hook = try await JobService.contentLimitHook(stores: .sqliteOrPostgres)  // at start-up: settings, key files checked
/// let summary = try await hook.handle(ContentLimitEvent(userID: "u1", used: 27, limit: 30))
/// await hook.close()                                          // at shutdown
/// ```
///
/// Calls may run concurrently (the store serialises what must be serialised). Errors are ``JobError``s with
/// the CLI's sysexits meaning; a summary whose ``JobSummary/failure`` is set did its work but left a warning
/// to a provider that refused or was unavailable (the CLI exits 77 or 69 for it).
public final class JobService<Handler: JobHandler>: Sendable {
    public let handler: Handler
    package let store: any JobStore
    public let job: String

    init(handler: Handler, store: any JobStore, job: String) {
        self.handler = handler
        self.store = store
        self.job = job
    }

    /// Opens the store `PUSH_DATABASE_URL` names with `stores` and builds the handler; on failure nothing stays
    /// open.
    package static func open(
        job: String, stores: StoreOpener, environment: [String: String], logger: Logger,
        make: @Sendable (ConfigResolver, any JobStore, Logger) async throws(JobError) -> Handler
    ) async throws(JobError) -> JobService {
        let config = ConfigResolver(environment: environment)
        let store = try await stores.open(config, mode: .readWrite, applicationName: job, logger: logger)
        do throws(JobError) {
            return JobService(handler: try await make(config, store, logger), store: store, job: job)
        } catch {
            await store.close()
            throw error
        }
    }

    /// Handles one event; `now` defaults to the system clock when the call arrives. `stop` is what the backend
    /// requests when it shuts down (its graceful shutdown, say): a reminder run then claims no more, finishes and
    /// records what is on its way, and returns with `stoppedBy` set.
    public func handle(
        _ event: Handler.Event, now: Int64? = nil, requestID: String? = nil, stop: StopRequest? = nil
    ) async throws(JobError) -> Handler.Summary {
        let instant = now ?? Int64(Date().timeIntervalSince1970)
        return try await handler.handle(
            event, context: InvocationContext(now: instant, requestID: requestID, stop: stop))
    }

    /// Closes the provider connections and the store. Call once, after the last ``handle(_:now:requestID:stop:)``.
    public func close() async {
        await handler.shutdown()
        await store.close()
    }
}

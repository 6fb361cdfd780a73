import Foundation
import JobKit
import Logging

extension JobService where Handler: ServedJob {
    /// The job `Handler` serves, from the `PUSH_*` settings in `environment`; `logger` defaults to one labelled
    /// with the job's name.
    package static func open(
        stores: StoreOpener, environment: [String: String], logger: Logger? = nil
    ) async throws(JobError) -> JobService {
        try await open(
            job: Handler.jobName, stores: stores, environment: environment,
            logger: logger ?? Logger(label: Handler.jobName), make: Handler.make)
    }
}

// Each job's constructor, from the `PUSH_*` settings (the process environment by default); `logger` defaults to
// one labelled with the job's name.

extension JobService where Handler == ContentLimitHookHandler {
    /// The content-limit hook: each ``handle(_:now:requestID:stop:)`` is one write's event.
    public static func contentLimitHook(
        stores: StoreOpener, environment: [String: String]? = nil, logger: Logger? = nil
    )
        async throws(JobError) -> JobService
    { try await open(stores: stores, environment: environment ?? ProcessInfo.processInfo.environment, logger: logger) }
}

extension JobService where Handler == DiaryReminderHandler {
    /// The reminder job: each ``handle(_:now:requestID:stop:)`` is one scheduled run (`ScheduledEvent(time:)`).
    public static func diaryReminder(stores: StoreOpener, environment: [String: String]? = nil, logger: Logger? = nil)
        async throws(JobError) -> JobService
    { try await open(stores: stores, environment: environment ?? ProcessInfo.processInfo.environment, logger: logger) }
}

extension JobService where Handler == TokenJanitorHandler {
    /// The token janitor: a run's options come from its event's `detail`.
    public static func tokenJanitor(stores: StoreOpener, environment: [String: String]? = nil, logger: Logger? = nil)
        async throws(JobError) -> JobService
    { try await open(stores: stores, environment: environment ?? ProcessInfo.processInfo.environment, logger: logger) }
}

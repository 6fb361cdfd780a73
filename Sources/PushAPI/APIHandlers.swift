import Foundation
import JobKit
import Logging
import OpenAPIRuntime

/// The operations of `openapi.yaml`, each over the jobs' own rules: the same checks and store calls as `pushctl`,
/// the same hook handler as `content-limit-hook`, the same explanation as `diary-reminder --explain`. Errors are
/// thrown (``JobError``, ``APIProblem``) and answered as problem+json by ``ProblemMiddleware``.
struct APIHandlers: APIProtocol {
    let store: any JobStore
    let hook: ContentLimitHookHandler
    let reminders: DiaryReminderHandler.Settings
    let runner: DiaryReminderRunner
    let metrics: APIMetrics
    /// The app's own tables, for database webhooks (nil: none configured).
    let mapping: AppTableMapping?
    /// The clock (injected: tests pass a fixed instant).
    let now: @Sendable () -> Int64

    /// Refuses a write of `kind` (users, devices) where the app's own table is its source of truth: a database
    /// webhook mapping names that table, or the SQL mirror of it is installed. Such a write would be undone by the
    /// table's next change, and `integrate check` would report it as drift (issue 78).
    func refuseIfTheAppOwns(_ kind: AppTableMapping.Kind) async throws {
        let noun = kind == .users ? "users and their settings" : "devices"
        if let table = mapping?.tables[kind] {
            throw APIProblem(
                .ownedByTheApp,
                "\(noun) come from the app's table \(table.qualifiedName) (\(ConfigKey.apiWebhookMapping.rawValue)): write the row there; this write would be undone by its next change"
            )
        }
        if let integration = store as? any IntegrationStore, try await integration.integratedKinds().contains(kind) {
            throw APIProblem(
                .ownedByTheApp,
                "\(noun) come from the app's own table, mirrored by pushctl integrate postgres: write the row there; this write would be undone by its next change"
            )
        }
    }

    // MARK: Users

    func putUser(_ input: Operations.PutUser.Input) async throws -> Operations.PutUser.Output {
        guard case .json(let body) = input.body else { throw APIProblem(.unsupportedMediaType, "send JSON") }
        try Caller.mayActFor(input.path.id)
        try await refuseIfTheAppOwns(.users)
        let edit = try UserEdit.checked(
            id: input.path.id, timezone: body.timezone, locale: body.locale, plan: body.plan,
            reminderTime: body.reminderTime, reminders: body.reminders, limitWarnings: body.limitWarnings,
            quietHours: body.quietHours, name: \.rawValue)
        let result = try await store.apply(edit, now: now())
        let profile = result.after.profile
        return .ok(
            .init(
                body: .json(
                    .init(
                        id: profile.id, timezone: profile.timezone, locale: profile.locale, plan: profile.plan,
                        reminderTime: profile.reminderTime, reminders: profile.diaryReminderEnabled,
                        limitWarnings: profile.contentLimitWarningsEnabled,
                        quietHours: profile.quietHoursStart.flatMap { start in
                            profile.quietHoursEnd.map { "\(start)-\($0)" }
                        }, created: result.before == nil))))
    }

    func deleteUser(_ input: Operations.DeleteUser.Input) async throws -> Operations.DeleteUser.Output {
        try Self.checkUserID(input.path.id)
        try await refuseIfTheAppOwns(.users)
        guard try await store.deleteUser(id: input.path.id) else { throw JobError.unknownUser(input.path.id) }
        return .noContent(.init())
    }

    // MARK: Devices

    func registerDevice(_ input: Operations.RegisterDevice.Input) async throws
        -> Operations.RegisterDevice.Output
    {
        guard case .json(let body) = input.body else { throw APIProblem(.unsupportedMediaType, "send JSON") }
        try Self.checkUserID(input.path.id)
        try Caller.mayActFor(input.path.id)
        try await refuseIfTheAppOwns(.devices)
        guard (body.token == nil) != (body.fid == nil) else {
            throw APIProblem(.badRequest, "give exactly one of token and fid")
        }
        let ofFIDs = Provider.ofInstallationIDs
        if body.fid != nil, let provider = body.provider.flatMap({ Provider(rawValue: $0.rawValue) }),
            !provider.takes(.fid)
        {
            throw APIProblem(
                .badRequest, "fid: an FCM installation id is for provider \(ofFIDs), not \(provider.rawValue)")
        }
        guard body.fid != nil || body.provider != nil else {
            throw APIProblem(.badRequest, "provider: required with token")
        }
        let registration = try DeviceRegistration(
            userID: input.path.id, token: body.fid ?? body.token ?? "",
            provider: body.fid != nil ? ofFIDs : Provider(rawValue: body.provider!.rawValue)!,
            platform: Platform(rawValue: body.platform.rawValue)!,
            apnsEnvironment: body.environment.map { APNsEnvironment(rawValue: $0.rawValue)! },
            appVersion: body.appVersion, kind: body.fid != nil ? .fid : .token, replaces: body.replaces)
        let result = try await store.register(registration, now: now())
        return .ok(
            .init(
                body: .json(
                    .init(
                        deviceId: Int(result.deviceID), kind: registration.kind == .fid ? .fid : .token,
                        change: .init(rawValue: result.change.rawValue)!, replaced: result.retiredReplaced))))
    }

    func unregisterDevice(_ input: Operations.UnregisterDevice.Input) async throws
        -> Operations.UnregisterDevice.Output
    {
        try await refuseIfTheAppOwns(.devices)
        // A user's token logs out that user's own device only (one that moved to another user is left alone).
        var user: String?
        if case .user(let id) = Caller.current { user = id }
        guard try await store.unregister(token: input.path.token, userID: user, reason: "logout", now: now()) else {
            throw APIProblem(.notFound, "no active device with that token\(user == nil ? "" : " of this user")")
        }
        return .noContent(.init())
    }

    // MARK: Entries and the hook

    func recordEntry(_ input: Operations.RecordEntry.Input) async throws -> Operations.RecordEntry.Output {
        try Self.checkUserID(input.path.id)
        var at = now()
        if case .json(let body) = input.body, let text = body.at { at = try Self.instant(text, field: "at") }
        try await store.recordEntry(userID: input.path.id, at: at)
        return .noContent(.init())
    }

    func contentLimitHook(_ input: Operations.ContentLimitHook.Input) async throws
        -> Operations.ContentLimitHook.Output
    {
        guard case .json(let body) = input.body else { throw APIProblem(.unsupportedMediaType, "send JSON") }
        try Self.checkUserID(body.userId, field: "user_id")
        let event = try ContentLimitEvent(
            userID: body.userId, used: body.used, limit: body.limit,
            period: body.period.map { LimitPeriod(rawValue: $0.rawValue)! } ?? .monthly)
        let summary = try await hook.handle(event, context: InvocationContext(now: now()))
        return .ok(
            .init(
                body: .json(
                    .init(
                        action: .init(rawValue: summary.action.rawValue)!, reason: summary.reason,
                        threshold: summary.threshold, period: summary.period, deliverAfter: summary.deliverAfter,
                        notifications: summary.notifications, runId: summary.runID, now: summary.now,
                        dryRun: summary.dryRun, userId: summary.userID, used: summary.used, limit: summary.limit))))
    }

    // MARK: Database webhooks

    func databaseWebhook(_ input: Operations.DatabaseWebhook.Input) async throws
        -> Operations.DatabaseWebhook.Output
    {
        guard case .json(let body) = input.body else { throw APIProblem(.unsupportedMediaType, "send JSON") }
        guard let mapping else {
            throw APIProblem(
                .notFound,
                "database webhooks are not configured: set \(ConfigKey.apiWebhookMapping.rawValue) to a mapping file")
        }
        let change = DatabaseChange(
            kind: DatabaseChange.Kind(rawValue: body._type.rawValue)!, schema: body.schema, table: body.table,
            record: body.record.map { JSONValue(container: $0) },
            oldRecord: body.oldRecord.map { JSONValue(container: $0) })
        let outcome = try await mapping.appChange(for: change).apply(to: store, now: now())
        let answer = Components.Schemas.WebhookAnswer(
            action: .init(rawValue: outcome.action.rawValue)!, userId: outcome.userID, detail: outcome.detail)
        return .ok(.init(body: .json(answer)))
    }

    // MARK: Explain, health, metrics

    func explainUser(_ input: Operations.ExplainUser.Input) async throws -> Operations.ExplainUser.Output {
        try Self.checkUserID(input.path.id)
        let at = try input.query.at.map { try Self.instant($0, field: "at") } ?? now()
        let localDate = try input.query.localDate.map { (text: String) throws -> LocalDate in
            guard input.query.at == nil else {
                throw APIProblem(.badRequest, "at and local_date: give one (local_date explains that day's slot)")
            }
            guard let date = LocalDate(text) else { throw APIProblem(.badRequest, "local_date: not a date: \(text)") }
            return date
        }
        var options = ReminderRunOptions(now: at, rule: reminders.rule, dryRun: true)
        options.claimLeaseSeconds = reminders.claimLeaseSeconds
        options.shard = reminders.shard
        options.pause = reminders.pause
        let explanation = try await runner.explain(userID: input.path.id, options: options, localDate: localDate)
        return .ok(
            .init(
                body: .json(
                    .init(
                        userId: explanation.userID, now: explanation.now, due: explanation.due,
                        verdict: explanation.verdict, skipReason: explanation.skipReason?.rawValue,
                        steps: explanation.steps.map { .init(rule: $0.rule, value: $0.value, ok: $0.ok) }))))
    }

    /// The delivery-health report, the same as `token-janitor report --format json`: read-only, so support's key may
    /// call it.
    func deliveryReport(_ input: Operations.DeliveryReport.Input) async throws -> Operations.DeliveryReport.Output {
        let days = input.query.days ?? 30
        guard (1...400).contains(days) else { throw APIProblem(.badRequest, "days: must be within 1…400, not \(days)") }
        let end = try input.query.now.map { try Self.instant($0, field: "now") } ?? now()
        let report = try await store.fullHealthReport(
            from: end - Int64(days) * 86_400, to: end, catalog: runner.catalog)
        let body: Components.Schemas.DeliveryReport
        do {
            body = try JSONDecoder().decode(Components.Schemas.DeliveryReport.self, from: Data(report.json.utf8))
        } catch {
            throw APIProblem(.unavailable, "the report could not be encoded: \(error)")
        }
        return .ok(.init(body: .json(body)))
    }

    func health(_ input: Operations.Health.Input) async throws -> Operations.Health.Output {
        do {
            _ = try await store.appliedMigrations()
        } catch {
            throw APIProblem(.unavailable, "the store does not answer: \(error.message)")
        }
        return .ok(.init(body: .json(.init(status: .ok, store: store.backend))))
    }

    func metrics(_ input: Operations.Metrics.Input) async throws -> Operations.Metrics.Output {
        .ok(.init(body: .plainText(HTTPBody(metrics.text))))
    }

    /// A query's instant: ISO 8601 with a zone, within the supported range; else 400 naming `field`.
    static func instant(_ text: String, field: String) throws(APIProblem) -> Int64 {
        guard let instant = Timestamps.parse(text), Timestamps.supportedRange.contains(instant) else {
            throw APIProblem(
                .badRequest, "\(field): not an ISO 8601 instant with a zone (e.g. 2026-11-21T20:00:00Z): \(text)")
        }
        return instant
    }

    /// A user id of 1–128 characters, as every command checks it.
    static func checkUserID(_ id: String, field: String = "id") throws(APIProblem) {
        if let problem = UserProfile.idProblem(id) { throw APIProblem(.badRequest, "\(field): \(problem)") }
    }
}

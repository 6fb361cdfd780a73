import Hummingbird
import JobKit
import JobKitDelivery
import Logging
import NIOCore
import OpenAPIHummingbird
import OpenAPIRuntime

/// The HTTP API as a Hummingbird application over one open store: the routes `openapi.yaml` declares, with a
/// body limit and strict JSON in front, then metrics, problem answers and authentication around each operation.
package struct APIServer: Sendable {
    package let application: Application<RouterResponder<APIRequestContext>>
    let hook: ContentLimitHookHandler

    /// Serves until SIGTERM or SIGINT (Hummingbird's service group): it stops accepting, lets the requests in
    /// flight finish, then closes the hook's provider connections. The caller then closes the store.
    package func run() async throws {
        do {
            try await application.runService()
        } catch {
            await hook.shutdown()
            throw error
        }
        await hook.shutdown()
    }

    /// The application serving `store` at `host:port` (port 0: any free one), over ``responder(store:config:flags:logger:now:)``.
    /// `onRunning` gets the port it listens on. The caller owns `store` and closes it after the application has
    /// stopped.
    package static func make(
        store: any JobStore, config: ConfigResolver, flags: [ConfigKey: String] = [:], host: String, port: Int,
        logger: Logger, now: @escaping @Sendable () -> Int64,
        onRunning: @escaping @Sendable (Int) async -> Void = { _ in }
    ) async throws(JobError) -> APIServer {
        let (responder, hook) = try await responder(
            store: store, config: config, flags: flags, logger: logger, now: now)
        let application = Application(
            responder: responder, configuration: .init(address: .hostname(host, port: port), serverName: "diary-push"),
            onServerRunning: { channel in await onRunning(channel.localAddress?.port ?? port) },
            logger: logger)
        return APIServer(application: application, hook: hook)
    }

    /// The routes `openapi.yaml` declares over `store`, with a body limit and strict JSON in front, then metrics,
    /// problem answers and authentication around each operation: what the server and the Lambda handler
    /// (``APILambdaHandler``) answer with. The hook and the reminder rules are resolved from `config` now (`flags`
    /// over it: the command line's), so that a wrong setting fails at start-up. The hook is returned for its
    /// owner to shut down.
    static func responder(
        store: any JobStore, config: ConfigResolver, flags: [ConfigKey: String], logger: Logger,
        now: @escaping @Sendable () -> Int64
    ) async throws(JobError) -> (RouterResponder<APIRequestContext>, ContentLimitHookHandler) {
        let users = try await AppUserTokens.resolve(config, flags: flags, logger: logger)
        let limiter = RateLimiter(rate: try config.integer(.apiRate, flag: flags[.apiRate].flatMap { Int($0) }))
        let hook = try await ContentLimitHookHandler.make(config, store: store, logger: logger)
        let reminders = try DiaryReminderHandler.Settings.resolve(config)
        let catalog = try CopyCatalog.resolve(config)
        let runner = DiaryReminderRunner(
            store: store, sender: DryRunSender(sink: StandardOutput(), json: true), catalog: catalog, logger: logger)
        let metrics = APIMetrics()
        let mapping = try config.string(.apiWebhookMapping, flag: flags[.apiWebhookMapping]).map {
            (path: String) throws(JobError) in
            try AppTableMapping.load(path: path, setting: ConfigKey.apiWebhookMapping.rawValue)
        }
        let handlers = APIHandlers(
            store: store, hook: hook, reminders: reminders, runner: runner, metrics: metrics, mapping: mapping,
            now: now)

        do {
            // Compact JSON (the generator's default pretty-prints every answer).
            func register(on router: Router<APIRequestContext>) throws {
                try handlers.registerHandlers(
                    on: router, configuration: Configuration(jsonEncodingOptions: [.sortedKeys]),
                    middlewares: [
                        MetricsMiddleware(metrics: metrics), ProblemMiddleware(), EmptyBodyMiddleware(),
                        AuthenticationMiddleware(
                            keys: APIKeyCache(store: store), users: users, limiter: limiter, now: now),
                        IdempotencyMiddleware(store: store, now: now),
                    ])
            }
            // The routes first, read from a router of their own: the middleware in front of them answers 405s.
            let listed = Router(context: APIRequestContext.self)
            try register(on: listed)
            let routes = KnownRoutes(listed.routes.map { ("\($0.path)", $0.method.rawValue) })
            let router = Router(context: APIRequestContext.self)
            router.add(middleware: BodyLimitMiddleware(routes: routes, metrics: metrics))
            try register(on: router)
            return (router.buildResponder(), hook)
        } catch {
            await hook.shutdown()
            throw .software("registering the API's routes: \(error)")
        }
    }
}

/// The API's request context: Hummingbird's basic one, made from a connection (the server) or from a logger
/// alone (a Lambda event, which has no connection).
package struct APIRequestContext: RequestContext {
    package var coreContext: CoreRequestContextStorage

    package init(source: ApplicationRequestContextSource) { coreContext = .init(source: source) }

    init(logger: Logger) { coreContext = .init(source: LoggerSource(logger: logger)) }

    private struct LoggerSource: RequestContextSource { let logger: Logger }
}

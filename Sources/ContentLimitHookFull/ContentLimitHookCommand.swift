import ArgumentParser
import Foundation
import JobCLI
import JobKit
import Logging

struct ContentLimitHookCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "content-limit-hook",
        abstract: "Warn a user at 90 % and 100 % of their content quota, once per period. Called on each write.",
        discussion: """
            Input: --user/--used/--limit[/--period], or one JSON event on stdin with --event - \
            ({"user_id":…, "used":…, "limit":…, "period":"monthly"|"annual"}). A missing or non-positive limit is \
            a no-op. Inside the user's quiet hours a warning is stored as deferred and a diary-reminder run delivers \
            it when they end.
            Exit codes: 0 ok, 64 usage, 65 bad event or unknown user, 66 no database, 69 unavailable, 75 database \
            locked (retry), 78 configuration.
            """,
        version: JobKitVersion.current)

    @OptionGroup var common: CommonOptions
    @OptionGroup(title: "Delivery") var delivery: DeliveryOptions

    @Option(help: "User id.") var user: String?
    // `.unconditional`: `--used -3` is a negative count (65, as `--used=-3`), not a missing value (64), and
    // `--limit -1` the documented "unlimited".
    @Option(parsing: .unconditional, help: "Items used in the current period, this write included.") var used: Int?
    @Option(parsing: .unconditional, help: "The plan's limit (missing or ≤ 0: unlimited, nothing to do).") var limit:
        Int?
    @Option(help: "monthly (default) or annual.") var period: LimitPeriod?
    @Option(
        help: ArgumentHelp("Read one JSON event from this file (- for stdin) instead of the flags.", valueName: "file"))
    var event: String?
    @Flag(help: "Decide and print; write and send nothing.") var dryRun = false
    @Flag(help: "Print each decision step (implies --dry-run).") var explain = false
    @Option(
        help: ArgumentHelp(
            "Deliver by appending JSON lines to this file (- for stdout) instead of providers.", valueName: "path"))
    var outbox: String?

    func validate() throws {
        if event != nil {
            guard user == nil && used == nil && limit == nil && period == nil else {
                throw ValidationError("give either --event or --user/--used/--limit/--period, not both")
            }
        } else {
            guard user != nil, used != nil else {
                throw ValidationError("--user and --used are required (or --event FILE)")
            }
        }
    }

    func run() async throws {
        try await withExitCode("content-limit-hook") { () async throws(JobError) in
            let config = ConfigResolver(environment: ProcessInfo.processInfo.environment)
            try common.bootstrapLogging(config)
            let logger = try common.makeLogger("content-limit-hook", config)
            let now = try common.resolvedNow()
            let input = try readEvent()
            let readOnly = dryRun || explain
            // Below 90 % nothing is sent, so provider settings are neither read nor checked — the same as
            // on the quiet path of the content-limit-hook front (a diary-reminder run checks them every 15 min).
            let warns = ContentLimitRule.threshold(used: input.used, limit: input.limit) != nil
            let deliveryConfiguration =
                warns ? try DeliveryConfiguration.resolve(config, flags: delivery.flags()) : DeliveryConfiguration()
            let outboxPath = config.string(.outbox, flag: outbox)
            if !readOnly && outboxPath == nil && !deliveryConfiguration.hasProvider && warns {
                throw .config(
                    "no provider configured: set the PUSH_APNS_* and/or PUSH_FCM_* variables, pass --outbox PATH, or use --dry-run"
                )
            }
            if input.limit ?? 0 <= 0 {
                // An unlimited plan: nothing to decide, nothing to open.
                let summary = HookSummary(
                    runID: UUID().uuidString.lowercased(), now: Timestamps.format(now), dryRun: readOnly,
                    userID: input.userID, used: input.used, limit: input.limit, reason: "unlimited plan")
                print(common.format == .json ? summary.json : summary.text)
                return
            }
            try await common.withStore(config, mode: readOnly ? .readOnly : .readWrite, job: "content-limit-hook") {
                store throws(JobError) in
                let handler = ContentLimitHookHandler.make(
                    config, delivery: deliveryConfiguration, outbox: outboxPath, store: store,
                    logger: logger, dryRun: readOnly, explain: explain)
                // A warning is probably sent: load the keys and trust roots while the store claims it.
                if warns && !readOnly && outboxPath == nil { await handler.senders.prepare() }
                let summary = try await handler.handleOnce(input, context: InvocationContext(now: now))
                if explain && common.format == .text {
                    for step in summary.steps { print("  \(step)") }
                }
                print(common.format == .json ? summary.json : summary.text)
                // After the summary: a warning a provider left undelivered fails the invocation (77 or 69).
                if let failure = summary.failure { throw failure }
            }
        }
    }

    private func readEvent() throws(JobError) -> ContentLimitEvent {
        guard let event else {
            return try ContentLimitEvent(userID: user ?? "", used: used ?? 0, limit: limit, period: period ?? .monthly)
        }
        let data: Data
        if event == "-" {
            data = FileHandle.standardInput.readDataToEndOfFile()
        } else {
            guard let contents = FileManager.default.contents(atPath: event) else {
                throw .noInput("cannot read the event file \(event)")
            }
            data = contents
        }
        return try ContentLimitEvent.parse(json: data)
    }
}

extension LimitPeriod: ExpressibleByArgument {}

/// The executable: one invocation per process from the app backend, or a Lambda custom runtime when the
/// platform says so.
@main
enum ContentLimitHookMain {
    static func main() async {
        guard LambdaAdapter.runtimeAPI != nil else { return await ContentLimitHookCommand.main() }
        await LambdaAdapter.serve(job: ContentLimitHook.jobName) { config, store, logger throws(JobError) in
            try await ContentLimitHookHandler.make(config, store: store, logger: logger)
        }
    }
}

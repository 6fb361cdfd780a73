import ArgumentParser
import Foundation
import JobCLI
import JobKit
import Logging

struct DiaryReminderCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "diary-reminder",
        abstract: "Send today's diary reminder to every user whose local reminder time has come.",
        discussion: """
            Run it every 15 minutes from cron (see crontab.example). Each user is reminded at most once per \
            local day: the notification log row is claimed before anything is sent.
            Exit codes: 0 ok, 64 usage, 65 bad data, 66 no database, 69 unavailable, 73 cannot create output, \
            75 database locked (retry), 78 configuration.
            """,
        version: JobKitVersion.current)

    @OptionGroup(title: "Observability") var observability: ObservabilityOptions
    @OptionGroup var common: CommonOptions
    @OptionGroup(title: "Delivery") var delivery: DeliveryOptions

    @Flag(name: .long, help: "Decide and print what would be sent; claim, send and write nothing.")
    var dryRun = false

    @Option(
        name: .long,
        help: ArgumentHelp("Explain each rule for this user at --now, and the verdict.", valueName: "user-id"))
    var explain: String?

    @Option(name: .long, help: "Minutes before the reminder time a run may already send (default 2).")
    var earlyMinutes: Int?

    @Option(name: .long, help: "Minutes after the reminder time a late run still sends (default 60).")
    var catchUpMinutes: Int?

    @Option(name: .long, help: "Minutes after which a dead run's unfinished claim is taken over (default 10).")
    var claimLeaseMinutes: Int?

    @Option(name: .long, help: ArgumentHelp("Copy catalog JSON replacing the built-in one.", valueName: "path"))
    var copyCatalog: String?

    @Option(
        name: .long,
        help: ArgumentHelp(
            "Deliver by appending JSON lines to this file (- for stdout) instead of providers.", valueName: "path"))
    var outbox: String?

    @Option(
        name: .long,
        help: ArgumentHelp(
            "Handle only this slice of the users (stable hash of the user id), e.g. 2/4; env PUSH_SHARD.",
            valueName: "K/N"))
    var shard: String?

    @Flag(
        name: .long,
        help:
            "A dry run that asks FCM to validate every token and payload (validate_only); nothing is delivered or claimed."
    )
    var validateOnly = false

    func run() async throws {
        try await withExitCode("diary-reminder") { () async throws(JobError) in
            let config = ConfigResolver(environment: ProcessInfo.processInfo.environment)
            try common.bootstrapLogging(config)
            let logger = try common.makeLogger("diary-reminder", config)
            let now = try common.resolvedNow()
            var settings = try DiaryReminderHandler.Settings.resolve(
                config, earlyMinutes: earlyMinutes, catchUpMinutes: catchUpMinutes,
                claimLeaseMinutes: claimLeaseMinutes, shard: shard)
            let catalog = try CopyCatalog.resolve(config, flag: copyCatalog)
            let json = common.format == .json
            let mode = DeliveryMode.chosen(
                dryRun: dryRun, explain: explain != nil, validateOnly: validateOnly,
                outbox: config.string(.outbox, flag: outbox), sink: StandardOutput(), json: json)
            settings.dryRun = mode.isQuestion
            let deliveryConfiguration = try DeliveryConfiguration.resolve(
                config, flags: delivery.flags(validateOnly: validateOnly)
            ).sharing(settings.shard)
            try await mode.check(deliveryConfiguration)
            let observers = mode.isQuestion ? RunObservers() : try observability.observers(config, logger: logger)
            _ = try await observers.observe(
                job: "diary-reminder", now: now, logger: logger,
                metricsText: { summary, code, seconds, previous in
                    MetricsFile.reminderText(
                        summary, job: "diary-reminder", now: now, exitCode: code, durationSeconds: seconds,
                        previousLastSuccess: previous)
                }
            ) { () async throws(JobError) -> RunSummary? in
                try await common.withStore(config, mode: mode.storeMode, job: "diary-reminder") {
                    store throws(JobError) -> RunSummary? in
                    let sender = try await deliveryConfiguration.sender(for: mode, credentials: store, logger: logger)
                    let handler = DiaryReminderHandler(
                        runner: DiaryReminderRunner(store: store, sender: sender, catalog: catalog, logger: logger),
                        settings: settings)

                    if let userID = explain {
                        let explanation = try await handler.closing { handler throws(JobError) in
                            try await handler.runner.explain(userID: userID, options: handler.options(now: now))
                        }
                        print(json ? explanation.json : explanation.text)
                        return nil
                    }
                    let summary = try await handler.handleOnce(
                        ScheduledEvent(time: now), context: InvocationContext(now: now))
                    print(json ? summary.json : summary.text)
                    // Returned to the observers: due work a provider left undelivered then fails the run (77 or 69),
                    // after the summary, the metrics and the ping.
                    return summary
                }
            }
        }
    }
}

/// The executable: a cron job from the command line, or a Lambda custom runtime when the platform says so.
@main
enum DiaryReminderMain {
    static func main() async {
        guard LambdaAdapter.runtimeAPI != nil else { return await DiaryReminderCommand.main() }
        await LambdaAdapter.serve(job: DiaryReminderRunner.jobName) { config, store, logger throws(JobError) in
            try await DiaryReminderHandler.make(config, store: store, logger: logger)
        }
    }
}

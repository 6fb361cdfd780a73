import ArgumentParser
import Foundation
import JobCLI
import JobKit

@main
struct DiaryReminderCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "diary-reminder",
        abstract: "Send today's diary reminder to every user whose local reminder time has come.",
        discussion: """
            Run it every 15 minutes from cron (see crontab.example). Each user is reminded at most once per \
            local day: the notification log row is claimed before anything is sent.
            Exit codes: 0 ok, 64 usage, 65 bad data, 66 no database, 69 unavailable, 73 cannot create output, \
            75 database locked (retry), 78 configuration.
            """)

    @OptionGroup var common: CommonOptions
    @OptionGroup(title: "Delivery") var delivery: DeliveryOptions

    @Flag(name: .long, help: "Decide and print what would be sent; claim, send and write nothing.")
    var dryRun = false

    @Option(name: .long, help: ArgumentHelp("Explain each rule for this user at --now, and the verdict.", valueName: "user-id"))
    var explain: String?

    @Option(name: .long, help: "Minutes before the reminder time a run may already send (default 2).")
    var earlyMinutes: Int?

    @Option(name: .long, help: "Minutes after the reminder time a late run still sends (default 60).")
    var catchUpMinutes: Int?

    @Option(name: .long, help: "Minutes after which a dead run's unfinished claim is taken over (default 10).")
    var claimLeaseMinutes: Int?

    @Option(name: .long, help: ArgumentHelp("Copy catalog JSON replacing the built-in one.", valueName: "path"))
    var copyCatalog: String?

    @Option(name: .long, help: ArgumentHelp("Deliver by appending JSON lines to this file (- for stdout) instead of providers.", valueName: "path"))
    var outbox: String?

    @Option(name: .long, help: ArgumentHelp("Handle only this slice of the users (stable hash of the user id), e.g. 2/4; env PUSH_SHARD.",
                                            valueName: "K/N"))
    var shard: String?

    @Flag(name: .long, help: "A dry run that asks FCM to validate every token and payload (validate_only); nothing is delivered or claimed.")
    var validateOnly = false

    func run() async throws {
        try await withExitCode("diary-reminder") { () async throws(JobError) in
            bootstrapLogging()
            let config = ConfigResolver(environment: ProcessInfo.processInfo.environment)
            let logger = try common.makeLogger("diary-reminder", config)
            let now = try common.resolvedNow()
            let rule = try DueRule(
                earlyMinutes: config.integer(.earlyMinutes, flag: earlyMinutes, default: DueRule.defaultEarlyMinutes,
                                             range: DueRule.earlyMinutesRange),
                catchUpMinutes: config.integer(.catchUpMinutes, flag: catchUpMinutes,
                                               default: DueRule.defaultCatchUpMinutes, range: DueRule.catchUpMinutesRange))
            let shard = try config.raw(.shard, flag: shard).map { raw throws(JobError) in
                try Shard.parse(raw.value, source: raw.source)
            } ?? .all
            let lease = try config.integer(.claimLeaseMinutes, flag: claimLeaseMinutes, default: 10, range: 2...60)
            let catalog = try config.string(.copyCatalog, flag: copyCatalog).map { path throws(JobError) in
                try CopyCatalog.load(path: path)
            } ?? .builtIn
            let json = common.format == .json
            let readOnly = dryRun || explain != nil
            let deliveryConfiguration = try DeliveryConfiguration.resolve(config, flags: delivery.flags(validateOnly: validateOnly))
            let outboxPath = config.string(.outbox, flag: outbox)
            if validateOnly && deliveryConfiguration.fcm == nil {
                throw .config("--validate-only needs FCM (PUSH_FCM_SERVICE_ACCOUNT_FILE)")
            }
            if !readOnly && !validateOnly && outboxPath == nil && !deliveryConfiguration.hasProvider {
                throw .config("no provider configured: set the PUSH_APNS_* and/or PUSH_FCM_* variables (README \"Configuration\"), pass --outbox PATH, or use --dry-run")
            }
            if !readOnly || validateOnly { try await deliveryConfiguration.checkFiles() }
            // Validation mints (and caches) an FCM access token: the only write it makes.
            try await common.withStore(config, mode: readOnly && !validateOnly ? .readOnly : .readWrite, job: "diary-reminder") { store throws(JobError) in
                let sender: any Sender
                if readOnly && !validateOnly {
                    sender = DryRunSender(sink: StandardOutput(), json: json)
                } else if let outboxPath, !validateOnly {
                    sender = try OutboxSender(path: outboxPath)
                } else {
                    var providers = deliveryConfiguration
                    if validateOnly { providers.apns = nil }
                    let push = try await PushSender(configuration: providers, credentials: store, logger: logger)
                    for (name, configured) in [("APNs", providers.apns != nil), ("FCM", providers.fcm != nil)] where !configured {
                        logger.warning("provider not configured: its devices are skipped", metadata: ["provider": "\(name)"])
                    }
                    sender = validateOnly ? ReportingSender(inner: push, sink: StandardOutput(), json: json) : push
                }
                let runner = DiaryReminderRunner(store: store, sender: sender, catalog: catalog, logger: logger)
                var options = ReminderRunOptions(now: now, rule: rule, dryRun: readOnly || validateOnly)
                options.claimLeaseSeconds = Int64(lease) * 60
                options.shard = shard

                if let userID = explain {
                    let explanation = try await runner.explain(userID: userID, options: options)
                    print(json ? explanation.json : explanation.text)
                    return
                }
                let summary: RunSummary
                do throws(JobError) {
                    summary = try await runner.run(options)
                } catch {
                    await sender.shutdown()
                    throw error
                }
                await sender.shutdown()
                print(json ? summary.json : summary.text)
            }
        }
    }
}

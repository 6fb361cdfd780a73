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

    @Option(name: .long, help: ArgumentHelp("Deliver by appending JSON lines to this file (- for stdout).", valueName: "path"))
    var outbox: String?

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
            let lease = try config.integer(.claimLeaseMinutes, flag: claimLeaseMinutes, default: 10, range: 2...60)
            let catalog = try config.string(.copyCatalog, flag: copyCatalog).map { path throws(JobError) in
                try CopyCatalog.load(path: path)
            } ?? .builtIn
            let json = common.format == .json
            let readOnly = dryRun || explain != nil
            let sender: any Sender
            if readOnly {
                sender = DryRunSender(sink: StandardOutput(), json: json)
            } else if let path = config.string(.outbox, flag: outbox) {
                sender = try OutboxSender(path: path)
            } else {
                throw .config("no delivery configured: pass --outbox PATH (or PUSH_OUTBOX), or use --dry-run")
            }
            let store = try common.openStore(config, mode: readOnly ? .readOnly : .readWrite)
            let runner = DiaryReminderRunner(store: store, sender: sender, catalog: catalog, logger: logger)
            var options = ReminderRunOptions(now: now, rule: rule, dryRun: readOnly)
            options.claimLeaseSeconds = Int64(lease) * 60

            if let userID = explain {
                let explanation = try await runner.explain(userID: userID, options: options)
                print(json ? explanation.json : explanation.text)
                return
            }
            let summary = try await runner.run(options)
            print(json ? summary.json : summary.text)
        }
    }
}

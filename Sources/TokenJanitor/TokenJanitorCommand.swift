import ArgumentParser
import BuildVersion
import JobCLI
import JobKit

struct TokenJanitorCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "token-janitor",
        abstract: "Keep device tokens truthful and the log tables bounded; report delivery health.",
        discussion:
            "Exit codes: 0 ok, 64 usage, 66 no database, 69 unavailable, 73 cannot write the report, 75 database locked (retry), 78 configuration.",
        version: BuildVersion.text,
        subcommands: [Run.self, Report.self],
        defaultSubcommand: Run.self)
}

struct Run: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Deactivate stale tokens, probe FCM, apply retention (daily).")

    /// Its delivery options are those of `--probe`.
    @OptionGroup var job: ScheduledJobOptions
    @OptionGroup(title: "Run") var janitor: JanitorRunOptions

    func run() async throws {
        try await job.run(TokenJanitor.jobName) { invocation throws(JobError) in
            try await invocation.tokenJanitor(janitor.settings, shard: janitor.shard)
        }
    }
}

struct Report: AsyncParsableCommand {
    static let configuration = CommandConfiguration(abstract: "The delivery-health report of the last days.")

    @OptionGroup var store: StoreOptions
    @Option(help: ArgumentHelp("The report's end instant, ISO 8601 (default: the clock).", valueName: "iso8601"))
    var now: String?
    @Option(parsing: .unconditional, help: "How many days back (1…400).") var days = 30
    @Option(help: "The report's format; html is one self-contained file with charts.")
    var format: HealthReport.Format = .text
    @Option(help: ArgumentHelp("Write to this file instead of stdout.", valueName: "path")) var output: String?

    func run() async throws {
        try await store.common(now: now).run("\(TokenJanitor.jobName) report") { invocation throws(JobError) in
            try await invocation.healthReport(days: days, format: format, path: output)
        }
    }
}

/// The executable: the daily cron job and the report from the command line, or a Lambda custom runtime
/// (the daily run) when the platform says so.
@main
enum TokenJanitorMain {
    static func main() async {
        guard LambdaAdapter.runtimeAPI != nil else { return await TokenJanitorCommand.main() }
        await LambdaAdapter.serve(TokenJanitorHandler.self)
    }
}

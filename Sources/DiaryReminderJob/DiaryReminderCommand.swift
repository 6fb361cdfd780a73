import ArgumentParser
import BuildVersion
import JobCLI
import JobKit

struct DiaryReminderCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "diary-reminder",
        abstract: "Send today's diary reminder to every user whose local reminder time has come.",
        discussion: """
            Run it every 15 minutes from cron (see crontab.example). Each user is reminded at most once per \
            local day: the notification log row is claimed before anything is sent.
            Exit codes: 0 ok, 64 usage, 65 bad data, 66 no database, 69 unavailable, 73 cannot create output, \
            75 database locked or time ran out with due users left (the next run reminds them), 78 configuration.
            """,
        version: BuildVersion.text)

    @OptionGroup var job: ScheduledJobOptions
    @OptionGroup(title: "Run") var reminder: ReminderOptions

    func run() async throws {
        try await job.run(DiaryReminderRunner.jobName) { invocation throws(JobError) in
            try await invocation.diaryReminder(reminder.request)
        }
    }
}

/// The executable: a cron job from the command line, or a Lambda custom runtime when the platform says so.
@main
enum DiaryReminderMain {
    static func main() async {
        guard LambdaAdapter.runtimeAPI != nil else { return await DiaryReminderCommand.main() }
        await LambdaAdapter.serve(DiaryReminderHandler.self)
    }
}

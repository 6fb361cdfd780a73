import ArgumentParser
import BuildVersion
import JobCLI
import JobKit

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
        version: BuildVersion.text)

    @OptionGroup var common: CommonOptions
    @OptionGroup(title: "Delivery") var delivery: DeliveryOptions
    @OptionGroup var hook: HookOptions

    func run() async throws {
        try await common.run(ContentLimitHook.jobName, delivery: delivery) { invocation throws(JobError) in
            try await invocation.contentLimitHook(try hook.request())
        }
    }
}

/// The executable: one invocation per process from the app backend, or a Lambda custom runtime when the
/// platform says so.
@main
enum ContentLimitHookMain {
    static func main() async {
        guard LambdaAdapter.runtimeAPI != nil else { return await ContentLimitHookCommand.main() }
        await LambdaAdapter.serve(ContentLimitHookHandler.self)
    }
}

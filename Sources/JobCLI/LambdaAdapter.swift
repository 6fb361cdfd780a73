import Foundation
import JobKit
import JobKitDelivery
import JobKitWiring
import Logging

/// Runs a job as an AWS Lambda custom runtime (`provided.al2023`, the executable as `bootstrap`) when
/// `AWS_LAMBDA_RUNTIME_API` is set: the handler is built once at init — settings from the environment,
/// the store opened, key files read — and then serves every invocation of the execution environment.
package enum LambdaAdapter {
    package static let runtimeAPIVariable = "AWS_LAMBDA_RUNTIME_API"

    /// The Runtime API's `host:port`, when running inside Lambda.
    package static var runtimeAPI: String? {
        ProcessInfo.processInfo.environment[runtimeAPIVariable].flatMap { $0.isEmpty ? nil : $0 }
    }

    /// Serves invocations until the environment is shut down; never returns. Init reads the settings (and
    /// fetches the `PUSH_*_SECRET`s, ``LambdaSecrets``), opens the store and builds the handler through
    /// ``JobService``, as a Swift backend would. A failure to initialise is
    /// posted to `…/runtime/init/error` and ends the process with the error's sysexits code.
    package static func serve<Handler: ServedJob>(_: Handler.Type) async -> Never where Handler.Event: LambdaEvent {
        let job = Handler.jobName
        let environment = ProcessInfo.processInfo.environment
        do throws(JobError) {
            try CommonOptions.environmentOnly.bootstrapLogging(ConfigResolver(environment: environment))
        } catch {
            JobLogging.bootstrap(.text)
            fail(job, error)
        }
        let address = environment[runtimeAPIVariable] ?? ""
        let client: RuntimeAPIClient
        do {
            client = try await RuntimeAPIClient.connect(address)
        } catch {
            fail(job, error)
        }
        let config = ConfigResolver(environment: environment)
        let logger: Logger
        let service: JobService<Handler>
        do throws(JobError) {
            logger = try CommonOptions.environmentOnly.makeLogger(job, config)
            // PUSH_*_SECRET: passwords and keys fetched from Secrets Manager or Parameter Store into /tmp files.
            let resolved = try await LambdaSecrets.resolve(environment)
            service = try await JobService<Handler>.open(
                stores: .sqliteOrPostgres, environment: resolved, logger: logger)
        } catch {
            try? await client.failInitialization(LambdaErrorReport(error))
            fail(job, error)
        }
        do {
            try await LambdaRuntime.serve(service.handler, client: client, logger: logger)
        } catch {
            fail(job, error)
        }
        exit(0)
    }

    private static func fail(_ job: String, _ error: JobError) -> Never {
        FileHandle.standardError.write(Data((JobLogging.errorLine(job: job, error) + "\n").utf8))
        exit(error.exitCode)
    }
}

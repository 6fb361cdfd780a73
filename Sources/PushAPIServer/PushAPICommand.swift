import ArgumentParser
import BuildVersion
import Foundation
import JobCLI
import JobKit
import JobKitWiring
import PushAPI

/// The executable: a server, or, when the platform says so, a Lambda custom runtime answering Function URL and
/// API Gateway HTTP API events with the same routes.
@main
enum PushAPIMain {
    static func main() async {
        guard LambdaAdapter.runtimeAPI != nil else { return await PushAPICommand.main() }
        await LambdaAdapter.serve(APILambdaHandler.self)
    }
}

struct PushAPICommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "push-api",
        abstract: "Serve the HTTP API (openapi.yaml): users, devices, entries, the content-limit hook, explain.",
        discussion: """
            Keys: pushctl api-key create --scope admin|hook|devices|webhook. SIGTERM or SIGINT stops accepting, finishes \
            the requests in flight, closes the store and exits 0. With --now every request is answered at that \
            instant (tests, dry runs).
            """,
        version: BuildVersion.text)

    @Option(help: "The address to listen on (0.0.0.0 for every interface).") var host = "127.0.0.1"
    @Option(help: "The port to listen on (0: any free one; the line on stderr at start-up says which).")
    var port = 8080
    @Option(name: .setting(.apiRate), parsing: .unconditional, help: .setting(.apiRate)) var apiRate: Int?
    @Option(name: .setting(.apiWebhookMapping), help: .setting(.apiWebhookMapping)) var apiWebhookMapping: String?
    @OptionGroup var common: CommonOptions
    @OptionGroup(title: "End-user JWTs (apps calling with their user's token)") var tokens: TokenOptions

    struct TokenOptions: ParsableArguments {
        @Option(name: .setting(.apiJWTSecretFile), help: .setting(.apiJWTSecretFile)) var apiJWTSecretFile: String?
        @Option(name: .setting(.apiJWKSFile), help: .setting(.apiJWKSFile)) var apiJWKSFile: String?
        @Option(name: .setting(.apiJWKSURL), help: .setting(.apiJWKSURL)) var apiJWKSURL: String?
        @Option(name: .setting(.apiJWTIssuer), help: .setting(.apiJWTIssuer)) var apiJWTIssuer: String?
        @Option(name: .setting(.apiJWTAudience), help: .setting(.apiJWTAudience)) var apiJWTAudience: String?
        @Option(name: .setting(.apiJWTUserClaim), help: .setting(.apiJWTUserClaim)) var apiJWTUserClaim: String?

        /// The settings given as flags, over their variables.
        var flags: [ConfigKey: String] {
            let all: [(ConfigKey, String?)] = [
                (.apiJWTSecretFile, apiJWTSecretFile), (.apiJWKSFile, apiJWKSFile), (.apiJWKSURL, apiJWKSURL),
                (.apiJWTIssuer, apiJWTIssuer),
                (.apiJWTAudience, apiJWTAudience), (.apiJWTUserClaim, apiJWTUserClaim),
            ]
            return Dictionary(uniqueKeysWithValues: all.compactMap { key, value in value.map { (key, $0) } })
        }
    }

    func validate() throws {
        guard (0...65_535).contains(port) else { throw ValidationError("--port: not a port: \(port)") }
        guard !host.isEmpty else { throw ValidationError("--host: empty") }
    }

    func run() async throws {
        var flags = tokens.flags
        flags[.apiRate] = apiRate.map(String.init)
        flags[.apiWebhookMapping] = apiWebhookMapping
        let (host, port, fixedNow, allFlags) = (host, port, common.now != nil, flags)
        try await common.run("push-api") { (invocation: JobInvocation) async throws(JobError) -> Void in
            try await Self.serve(invocation, flags: allFlags, host: host, port: port, fixedNow: fixedNow)
        }
    }

    /// Opens the store, serves until a signal stops the server, and closes the store.
    static func serve(
        _ invocation: JobInvocation, flags: [ConfigKey: String], host: String, port: Int, fixedNow: Bool
    ) async throws(JobError) {
        let instant = invocation.now
        let now: @Sendable () -> Int64
        if fixedNow {
            now = { instant }
        } else {
            now = { Int64(Date().timeIntervalSince1970) }
        }
        try await invocation.withStore(mode: StoreOpenMode.readWrite) {
            (store: any JobStore) async throws(JobError) -> Void in
            try await serve(store, invocation, flags: flags, host: host, port: port, now: now)
        }
    }

    static func serve(
        _ store: any JobStore, _ invocation: JobInvocation, flags: [ConfigKey: String], host: String, port: Int,
        now: @escaping @Sendable () -> Int64
    ) async throws(JobError) {
        let announce: @Sendable (Int) async -> Void = { port in
            FileHandle.standardError.write(Data("push-api: listening on \(host):\(port)\n".utf8))
        }
        let server = try await APIServer.make(
            store: store, config: invocation.config, flags: flags, host: host, port: port, logger: invocation.logger,
            now: now,
            onRunning: announce)
        do {
            try await server.run()
        } catch {
            throw .unavailable("serving on \(host):\(port): \(error)")
        }
    }
}

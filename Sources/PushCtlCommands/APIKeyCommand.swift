import ArgumentParser
import JobCLI
import JobKit

extension APIScope: ExpressibleByArgument {}

struct APIKeyCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "api-key", abstract: "Keys of the HTTP API (push-api): create, list, revoke.",
        subcommands: [Create.self, List.self, Revoke.self])

    struct Create: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Create a key and print it alone on stdout: it is shown once; the store keeps its hash only.",
            discussion: """
                Scopes: admin (everything), hook (the content-limit hook and entries), devices (users' settings \
                and their devices).
                """)
        @OptionGroup var db: StoreOptions
        @Option(help: "What the key may call.") var scope: APIScope
        @Option(help: "A name to tell keys apart in the list (e.g. the backend that holds it).") var name = ""
        @Option(help: ArgumentHelp("The creation instant (ISO 8601; default now).", valueName: "iso8601"))
        var now: String?

        func validate() throws {
            guard name.count <= 200, !name.contains(where: \.isNewline) else {
                throw ValidationError("--name: at most 200 characters on one line")
            }
        }

        func run() async throws {
            try await withExitCode("pushctl api-key create") { () async throws(JobError) in
                let instant = try clockNow(now)
                let key = try await db.with { store throws(JobError) in
                    try await store.createAPIKey(scope: scope, name: name, now: instant)
                }
                print(key.text)
            }
        }
    }

    struct List: AsyncParsableCommand {
        static let configuration = CommandConfiguration(abstract: "List the keys: id, scope, created, revoked, name.")
        @OptionGroup var db: StoreOptions

        func run() async throws {
            try await withExitCode("pushctl api-key list") { () async throws(JobError) in
                let keys = try await db.with { store throws(JobError) in try await store.apiKeys() }
                for key in keys {
                    let revoked = key.revokedAt.map { "revoked \(Timestamps.format($0))" } ?? "active"
                    print(
                        "\(key.id) \(key.scope.rawValue) created \(Timestamps.format(key.createdAt)) \(revoked) \(LineText.field(key.name))"
                    )
                }
            }
        }
    }

    struct Revoke: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Revoke a key: the API refuses it from now on (401); its row stays.")
        @OptionGroup var db: StoreOptions
        @Option(help: "The key's id (the 16 hex digits after dpk_, as the list shows it).") var id: String
        @Option(help: ArgumentHelp("The revocation instant (ISO 8601; default now).", valueName: "iso8601"))
        var now: String?

        func run() async throws {
            try await withExitCode("pushctl api-key revoke") { () async throws(JobError) in
                let instant = try clockNow(now)
                let revoked = try await db.with { store throws(JobError) in
                    try await store.revokeAPIKey(id: id, now: instant)
                }
                guard revoked else { throw .dataError("no active API key \(LineText.field(id))") }
                print("revoked API key \(id)")
            }
        }
    }
}

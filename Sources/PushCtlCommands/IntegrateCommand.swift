import ArgumentParser
import Foundation
import JobCLI
import JobKit
import JobKitPostgres

extension AppTableMapping.Kind: ExpressibleByArgument {}

struct IntegrateCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "integrate",
        abstract: "The app's own PostgreSQL tables as the source of truth: the SQL, the backfill, the drift check.",
        discussion: """
            The mapping is the database webhooks' (PUSH_API_WEBHOOK_MAPPING, docs/API.md). Review the SQL, apply it \
            with psql as the owner of the push schema, then backfill; check from cron.
            """,
        subcommands: [Postgres.self, Backfill.self, Check.self])

    struct Postgres: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Print the SQL migration that mirrors the app's tables into the push schema (or --drop it).")
        @Option(help: ArgumentHelp("The mapping of the app's tables (JSON).", valueName: "path")) var mapping: String
        @Option(help: "The schema that holds the jobs' tables.") var pushSchema = "push"
        @Option(help: "A role (created if missing) to own the functions, with only the rights they need.")
        var owner: String?
        @Flag(help: "Print the SQL that removes it instead.") var drop = false

        func run() async throws {
            try await withExitCode("pushctl integrate postgres") { () async throws(JobError) in
                let mapping = try AppTableMapping.load(path: self.mapping, setting: "--mapping")
                let sql = try IntegrationSQL(mapping: mapping, pushSchema: pushSchema, owner: owner)
                print(drop ? sql.drop : sql.install, terminator: "")
            }
        }
    }

    struct Backfill: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Bring the app's existing rows in, a batch of pages at a time; resumable, with progress.",
            discussion: "Users first, then devices (entries are read in place). Run it again to go on after a stop.")
        @OptionGroup var db: StoreOptions
        @Option(help: "Only this table kind (users, devices).") var kind: AppTableMapping.Kind?
        @Option(help: "Pages (8 KiB) of the app's table per transaction.") var blocks = 64

        func validate() throws {
            guard (1...100_000).contains(blocks) else { throw ValidationError("--blocks: 1 to 100000") }
            if kind == .entries {
                throw ValidationError("--kind entries: nothing to bring in (entries are read in place, through a view)")
            }
        }

        func run() async throws {
            try await withExitCode("pushctl integrate backfill") { () async throws(JobError) in
                try await db.with { store throws(JobError) in
                    let integration = try Self.integration(store)
                    for kind in kind.map({ [$0] }) ?? AppTableMapping.Kind.mirrored {
                        var progress: BackfillProgress
                        repeat {
                            progress = try await integration.integrationBackfill(kind: kind, blocks: blocks)
                            FileHandle.standardError.write(
                                Data(
                                    "\(kind.rawValue): page \(min(progress.nextBlock, progress.totalBlocks)) of \(progress.totalBlocks), \(progress.rows) rows\n"
                                        .utf8))
                        } while !progress.done
                        print("\(kind.rawValue): done, \(progress.rows) rows")
                    }
                }
            }
        }

        static func integration(_ store: any JobStore) throws(JobError) -> any IntegrationStore {
            guard let integration = store as? any IntegrationStore else {
                throw .usage(
                    "integrate: the app's own tables are a PostgreSQL integration; this store is \(store.backend)")
            }
            return integration
        }
    }

    struct Check: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Report drift between the app's tables and the push schema; exit 1 when there is any.",
            discussion: "Counts, then the first differences of each kind and the rows the mirror could not take.")
        @OptionGroup var db: StoreOptions
        @Option(help: "At most this many differences of each kind.") var max = 10

        func run() async throws {
            var drifted = false
            try await withExitCode("pushctl integrate check") { () async throws(JobError) in
                let rows = try await db.with { store throws(JobError) in
                    try await Backfill.integration(store).integrationDrift(max: max)
                }
                for row in rows {
                    print("\(row.kind) \(LineText.field(row.key)): \(LineText.escapingControls(row.what))")
                    if !row.isCount { drifted = true }
                }
                print(drifted ? "drift" : "in step")
            }
            if drifted { throw ExitCode(1) }
        }
    }
}

import ArgumentParser
import BuildVersion
import Foundation
import JobCLI
import JobKit
import JobKitWiring

/// `pushctl`'s commands: each parses its flags and calls JobKit or the wiring module; `Sources/PushCtl` runs it.
public struct PushCtl: AsyncParsableCommand {
    public init() {}

    public static let configuration = CommandConfiguration(
        commandName: "pushctl",
        abstract: "Administer the push store: migrations, demo data, users, devices, copy.",
        version: BuildVersion.text,
        subcommands: [
            Migrate.self, Seed.self, UserCommand.self, DeviceCommand.self, EntryCommand.self, CopyCommand.self,
            Backup.self, APIKeyCommand.self, IntegrateCommand.self, ReferenceCommand.self,
        ])
}

extension StoreOptions {
    /// Opens the store, runs `body`, and closes it.
    func with<T>(create: Bool = false, _ body: (any JobStore) async throws(JobError) -> T) async throws(JobError) -> T {
        try await common(now: nil).withStore(
            ConfigResolver(environment: ProcessInfo.processInfo.environment),
            mode: create ? .create : .readWrite, job: "pushctl", body)
    }
}

/// A user id as the schema holds one (1 to 128 characters), or a usage error naming `flag`, before anything is opened.
func checkUserID(_ id: String, flag: String) throws {
    if let problem = UserProfile.idProblem(id) { throw ValidationError("\(flag): \(problem)") }
}

/// The instant of `flag` (`--now`, `--at`, …), or the clock's without one.
func clockNow(_ text: String?, flag: String = "--now") throws(JobError) -> Int64 {
    var common = CommonOptions()
    common.now = text
    return try common.resolvedNow(flag: flag)
}

struct Migrate: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Create the database if needed and apply pending migrations.")
    @OptionGroup var db: StoreOptions
    @Option(
        help: ArgumentHelp(
            "Make the history partitions rows written around this instant need (PostgreSQL; ISO 8601; default the clock).",
            valueName: "iso8601"))
    var now: String?

    func run() async throws {
        try await withExitCode("pushctl migrate") { () async throws(JobError) in
            let instant = try clockNow(now)
            let applied = try await db.with(create: true) { store throws(JobError) in
                try await store.prepareHistory(now: instant)
                return try await store.appliedMigrations()
            }
            print("schema up to date: \(applied.joined(separator: ", "))")
        }
    }
}

struct Backup: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Copy a SQLite database while the jobs run, as it is at one instant.",
        discussion: """
            The copy replaces PATH whole, mode 0600 (it holds the cached provider credentials), as one file with no \
            -wal beside it. The database is neither migrated nor written. A PostgreSQL database is refused: copy it \
            with pg_dump.
            """)
    @OptionGroup var db: StoreOptions
    @Argument(help: ArgumentHelp("Where to write the copy.", valueName: "path")) var path: String

    func validate() throws {
        guard !path.isEmpty else { throw ValidationError("the copy's path is empty") }
    }

    func run() async throws {
        try await withExitCode("pushctl backup") { () async throws(JobError) in
            let (source, copy) = try db.backup(to: path)
            print(
                "copied \(source) to \(copy.path): \(copy.users) users, \(copy.bytes) bytes, schema \(copy.migrations.last ?? "none")"
            )
        }
    }
}

struct Seed: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Add synthetic users (zones, reminder times, 1–3 devices, some who wrote today).")
    @OptionGroup var db: StoreOptions
    @Option(parsing: .unconditional, help: "How many users.") var users: Int
    @Option(help: "Seed of the generator: the same seed gives the same users.") var randomSeed: UInt64 = 1
    @Option(
        help: ArgumentHelp(
            "\"Today\" for users who wrote today (ISO 8601; default --due-at or the clock).", valueName: "iso8601"))
    var now: String?
    @Option(help: ArgumentHelp("Make --due-count users due at this instant, and nobody else.", valueName: "iso8601"))
    var dueAt: String?
    @Option(parsing: .unconditional, help: "How many users are due at --due-at.") var dueCount: Int = 0
    @Option(help: "User id prefix.") var idPrefix = "user-"
    @Option(parsing: .unconditional, help: "Share of users with an entry today (0–1).") var wroteTodayShare = 0.2
    @Flag(help: "Seed a database that already has users (a user of the same id is overwritten).") var add = false

    func validate() throws {
        if let problem = Seeder.usersProblem(users) { throw ValidationError("--users: \(problem)") }
        guard dueCount >= 0 && dueCount <= users else {
            throw ValidationError("--due-count must be between 0 and --users")
        }
        guard dueCount == 0 || dueAt != nil else { throw ValidationError("--due-count needs --due-at") }
        guard (0...1).contains(wroteTodayShare) else { throw ValidationError("--wrote-today-share must be within 0…1") }
        if let problem = Seeder.idProblem(prefix: idPrefix, users: users) {
            throw ValidationError("--id-prefix: \(problem)")
        }
    }

    func run() async throws {
        try await withExitCode("pushctl seed") { () async throws(JobError) in
            var dueInstant: Int64?
            if let dueAt { dueInstant = try clockNow(dueAt, flag: "--due-at") }
            let today: Int64
            if let now {
                today = try clockNow(now)
            } else if let dueInstant {
                today = dueInstant
            } else {
                today = try clockNow(nil)
            }
            var options = SeedOptions(users: users, now: today)
            options.randomSeed = randomSeed
            options.dueAt = dueInstant
            options.dueCount = dueCount
            options.idPrefix = idPrefix
            options.wroteTodayShare = wroteTodayShare
            options.addToExistingUsers = add
            let report = try await db.with(create: true) { store throws(JobError) in
                try await Seeder().seed(options, into: store)
            }
            let due = dueAt.map { ", \(report.due) due at \($0)" } ?? ""
            print("seeded \(report.users) users, \(report.devices) devices, \(report.entries) entries today\(due)")
        }
    }
}

struct UserCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "user", abstract: "Users and their notification settings.",
        subcommands: [Set.self, Delete.self])

    struct Delete: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Delete a user (account deletion): their settings, devices, entries and history go too.")
        @OptionGroup var db: StoreOptions
        @Option(help: "User id.") var id: String

        func validate() throws { try checkUserID(id, flag: "--id") }

        func run() async throws {
            try await withExitCode("pushctl user delete") { () async throws(JobError) in
                let deleted = try await db.with { store throws(JobError) in try await store.deleteUser(id: id) }
                guard deleted else { throw .unknownUser(id) }
                print("deleted user \(LineText.quoted(id))")
            }
        }
    }

    struct Set: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Create a user, or change the settings its flags name.",
            discussion: """
                A flag left out keeps the user's stored value (a new user's default is in its help). A new user \
                needs --timezone.
                """)
        @OptionGroup var db: StoreOptions
        @Option(help: "User id.") var id: String
        @Option(help: "IANA time zone, e.g. Asia/Tokyo (required for a new user).") var timezone: String?
        @Option(help: "Locale, e.g. ja, pt-BR or pt_BR.UTF-8 (new user: en).") var locale: String?
        @Option(help: "Plan (free, pro, …) (new user: free).") var plan: String?
        @Option(help: "Local reminder time HH:MM (new user: 21:00).") var reminderTime: String?
        @Option(help: "Diary reminders on or off (new user: on).") var reminders: Toggle?
        @Option(help: "Content-limit warnings on or off (new user: on).") var limitWarnings: Toggle?
        @Option(
            help: ArgumentHelp(
                "Quiet hours, local HH:MM-HH:MM (may span midnight), or off (new user: none).",
                valueName: "start-end|off"))
        var quietHours: String?

        enum Toggle: String, ExpressibleByArgument { case on, off }

        /// The edit, checked as the HTTP API checks one (``UserEdit/checked(id:timezone:locale:plan:reminderTime:reminders:limitWarnings:quietHours:name:)``).
        private func edit() throws(JobError) -> UserEdit {
            try UserEdit.checked(
                id: id, timezone: timezone, locale: locale, plan: plan, reminderTime: reminderTime,
                reminders: reminders.map { $0 == .on }, limitWarnings: limitWarnings.map { $0 == .on },
                quietHours: quietHours, name: \.flag)
        }

        func validate() throws {
            do { _ = try edit() } catch { throw ValidationError(error.message) }
        }

        func run() async throws {
            try await withExitCode("pushctl user set") { () async throws(JobError) in
                let edit = try edit()
                let now = try clockNow(nil)
                let result = try await db.with { store throws(JobError) in try await store.apply(edit, now: now) }
                print(result.summary)
            }
        }
    }
}

struct DeviceCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "device", abstract: "Register and unregister device tokens.",
        subcommands: [Register.self, Unregister.self])

    struct Register: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract:
                "Register a token or an FCM installation id for a user (moves it from another user; reactivates it if inactive)."
        )
        @OptionGroup var db: StoreOptions
        @Option(help: "User id.") var user: String
        @Option(help: "Device token: an APNs device token or an FCM registration token. Give this or --fid.")
        var token: String?
        @Option(
            help: "FCM installation id (FID), sent in FCM's message.fid. Give this or --token; implies --provider fcm.")
        var fid: String?
        @Option(help: "The push provider (fcm with --fid).") var provider: Provider?
        @Option(help: "The device's operating system.") var platform: Platform
        @Option(help: "The APNs environment of an APNs token (default production).") var environment: APNsEnvironment?
        @Option(help: "App version.") var appVersion: String?
        @Option(
            help:
                "The token this registration replaces on the same phone (its FCM registration token on the first launch with installation ids): retired as 'replaced' in the same transaction, if it is this user's."
        )
        var replaces: String?

        func validate() throws {
            try checkUserID(user, flag: "--user")
            guard (token == nil) != (fid == nil) else { throw ValidationError("give exactly one of --token and --fid") }
            if fid != nil, let provider, !provider.takes(.fid) {
                throw ValidationError(
                    "--fid: an FCM installation id is for --provider \(Provider.ofInstallationIDs), not \(provider)")
            }
            if token != nil, provider == nil { throw ValidationError("--provider: required with --token") }
        }

        func run() async throws {
            try await withExitCode("pushctl device register") { () async throws(JobError) in
                let registration = try DeviceRegistration(
                    userID: user, token: fid ?? token ?? "",
                    provider: fid != nil ? .ofInstallationIDs : provider ?? .ofInstallationIDs,
                    platform: platform, apnsEnvironment: environment, appVersion: appVersion,
                    kind: fid != nil ? .fid : .token, replaces: replaces)
                let now = try clockNow(nil)
                let result = try await db.with { store throws(JobError) in
                    try await store.register(registration, now: now)
                }
                let retired = result.retiredReplaced ? ", replaced \(Redaction.maskToken(replaces ?? ""))" : ""
                print(
                    "device \(result.deviceID) \(registration.kind) \(Redaction.maskToken(registration.token)): \(result.change.rawValue)\(retired)"
                )
            }
        }
    }

    struct Unregister: AsyncParsableCommand {
        static let configuration = CommandConfiguration(abstract: "Deactivate a token (logout). Never deletes.")
        @OptionGroup var db: StoreOptions
        @Option(help: "Device token.") var token: String
        @Option(
            help:
                "The user logging out: only their device is deactivated (a token that moved to another user since is left alone)."
        )
        var user: String?
        @Option(help: "Recorded deactivation reason.") var reason = "logout"

        func validate() throws {
            guard !token.isEmpty else { throw ValidationError("--token: empty") }
            if let user { try checkUserID(user, flag: "--user") }
            guard !reason.isEmpty else { throw ValidationError("--reason: empty") }
        }

        func run() async throws {
            try await withExitCode("pushctl device unregister") { () async throws(JobError) in
                let now = try clockNow(nil)
                let changed = try await db.with { store throws(JobError) in
                    try await store.unregister(token: token, userID: user, reason: reason, now: now)
                }
                print(
                    changed
                        ? "deactivated \(Redaction.maskToken(token))"
                        : "no active device with that token\(user == nil ? "" : " of that user")")
            }
        }
    }
}

struct EntryCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "entry", abstract: "Diary entries.", subcommands: [Add.self])

    struct Add: AsyncParsableCommand {
        static let configuration = CommandConfiguration(abstract: "Record that a user wrote an entry.")
        @OptionGroup var db: StoreOptions
        @Option(help: "User id.") var user: String
        @Option(help: ArgumentHelp("When (ISO 8601; default now).", valueName: "iso8601")) var at: String?

        func validate() throws { try checkUserID(user, flag: "--user") }

        func run() async throws {
            try await withExitCode("pushctl entry add") { () async throws(JobError) in
                let instant = try clockNow(at, flag: "--at")
                try await db.with { store throws(JobError) in try await store.recordEntry(userID: user, at: instant) }
                print("recorded an entry for \(LineText.field(user))")
            }
        }
    }
}

struct CopyCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "copy", abstract: "The notification copy catalog.",
        subcommands: [Export.self, Check.self])

    struct Export: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Print the built-in catalog (a starting point for --copy-catalog).")
        func run() async throws { print(CopyCatalog.builtInJSON, terminator: "") }
    }

    struct Check: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Validate a catalog file: every problem, with its path.",
            discussion:
                "A valid catalog is followed by a note for each language one type has words for and another lacks.")
        @Argument(help: "Catalog file.") var path: String
        func run() async throws {
            try await withExitCode("pushctl copy check") { () async throws(JobError) in
                let catalog = try CopyCatalog.load(path: path)
                print("\(path): valid")
                for note in catalog.coverageNotes { print("note: \(note)") }
            }
        }
    }
}

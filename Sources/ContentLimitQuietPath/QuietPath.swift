internal import GRDBSQLite
import JobKitCore

#if canImport(Glibc)
    import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif

/// The `content-limit-hook` quiet path: a write below 90 % of its quota, answered without Foundation.
///
/// Most writes fire nothing, and the app backend runs the hook on every write, so that answer has to
/// cost about as much as the one indexed read it needs. Foundation alone takes longer to load than that
/// read, so the `content-limit-hook` executable is this Foundation-free front. It answers only the
/// plain case it fully understands — flags (not `--event`), a SQLite database migrated to this
/// version, a known user, usage below 90 % or an unlimited plan — and prints exactly what the full hook
/// prints for it. Everything else is handed over, arguments untouched, to `content-limit-hook-full`,
/// which decides and reports it: warnings, errors, `--help`, `--explain`, PostgreSQL, Lambda.
///
/// Like the full hook below 90 %, it reads no provider setting and no credential, and writes nothing.
public enum QuietPath {
    /// What the front does with one invocation.
    public enum Outcome: Sendable, Hashable {
        /// Print this line on stdout and exit 0.
        case answered(String)
        /// Run the full hook; the reason is for tests and `--explain`-style debugging only.
        case handOver(String)
    }

    /// The flags the quiet path understands, each taking a value.
    static let valueFlags: Set<String> = [
        "--user", "--used", "--limit", "--period", "--now", "--database", "--format", "--log-level",
        "--log-format",
    ]

    /// Decides one invocation. `arguments` excludes the program name; `now` is read only when `--now`
    /// is absent. Settings are read with the code the full hook uses (JobKitCore: ``ConfigKey``,
    /// ``DatabaseLocationSyntax``, ``LogLevelName``, ``Timestamps``, ``QuotaLevel``, ``HookSummary``), and
    /// any setting the full hook reads on this path that the front does not is a hand-over.
    public static func answer(
        arguments: [String], environment: [String: String],
        now wallClock: () -> Int64 = QuietPath.wallClock
    ) -> Outcome {
        if environment["AWS_LAMBDA_RUNTIME_API"] != nil { return .handOver("a Lambda runtime") }
        for (name, value) in environment where name.hasPrefix("PUSH_") && !value.isEmpty {
            if let key = ConfigKey(rawValue: name), key.hookQuietPath == .fullHookOnly {
                return .handOver("\(name) is set")
            }
        }
        var values: [String: String] = [:]
        var dryRun = false
        var index = 0
        while index < arguments.count {
            let argument = arguments[index]
            if argument == "--dry-run" {
                if dryRun { return .handOver("--dry-run repeated") }
                dryRun = true
                index += 1
                continue
            }
            guard valueFlags.contains(argument) else { return .handOver("argument \(argument)") }
            guard index + 1 < arguments.count, !arguments[index + 1].hasPrefix("-") else {
                return .handOver("\(argument) without a plain value")
            }
            let value = arguments[index + 1]
            guard values.updateValue(value, forKey: argument) == nil else { return .handOver("\(argument) repeated") }
            index += 2
        }

        guard let user = values["--user"], !user.isEmpty else { return .handOver("no --user") }
        guard let usedText = values["--used"], let used = Int(usedText), used >= 0 else {
            return .handOver("no usable --used")
        }
        var limit: Int?
        if let text = values["--limit"] {
            guard let number = Int(text) else { return .handOver("--limit is not a number") }
            limit = number
        }
        if let period = values["--period"], LimitPeriod(rawValue: period) == nil {
            return .handOver("--period \(period)")
        }
        let format = values["--format"] ?? "text"
        guard format == "text" || format == "json" else { return .handOver("--format \(format)") }
        if let level = values["--log-level"] ?? nonEmpty(environment[ConfigKey.logLevel.rawValue]),
            LogLevelName.parse(level) == nil
        {
            return .handOver("log level \(level)")
        }
        if let logFormat = values["--log-format"] ?? nonEmpty(environment[ConfigKey.logFormat.rawValue]),
            LogFormatName.parse(logFormat) == nil
        {
            return .handOver("log format \(logFormat)")
        }
        let instant: Int64
        if let text = values["--now"] {
            guard let parsed = Timestamps.parse(text), Timestamps.supportedRange.contains(parsed) else {
                return .handOver("--now \(text)")
            }
            instant = parsed
        } else {
            instant = wallClock()
        }
        guard QuotaLevel(used: used, limit: limit) == .below else { return .handOver("a warning is due") }

        var summary = HookSummary(
            runID: uuid(), now: Timestamps.format(instant), dryRun: dryRun, userID: user, used: used, limit: limit)
        guard (limit ?? 0) > 0 else {
            summary.reason = "unlimited plan"
            return .answered(format == "json" ? summary.json : summary.text)
        }
        guard let location = values["--database"] ?? nonEmpty(environment[ConfigKey.databaseURL.rawValue]),
            case .sqlite(let path) = DatabaseLocationSyntax.parse(location)
        else { return .handOver("no SQLite database given") }
        let started = monotonicNanoseconds()
        switch userExists(path: path, user: user) {
        case .some(true):
            summary.durationMs = Int((monotonicNanoseconds() - started) / 1_000_000)
            summary.reason = "below 90 %"
            return .answered(format == "json" ? summary.json : summary.text)
        case .some(false):
            return .handOver("unknown user")
        case nil:
            return .handOver("the database cannot be read here")
        }
    }

    /// `true` or `false` when the lookup ran on a database migrated to this version; `nil` when anything
    /// at all was not as expected (missing file, older schema, lock, I/O error) — the full hook then
    /// reports it properly.
    static func userExists(path: String, user: String) -> Bool? {
        var connection: OpaquePointer?
        defer { sqlite3_close(connection) }
        guard sqlite3_open_v2(path, &connection, SQLITE_OPEN_READONLY, nil) == SQLITE_OK, let connection else {
            return nil
        }
        sqlite3_busy_timeout(connection, 30_000)  // the full hook's busy timeout
        // Exactly this version's schema: the newest migration applied is the one this version knows last (a
        // database migrated by a newer release is the full hook's to refuse).
        guard
            row(
                connection, "SELECT 1 WHERE (SELECT max(identifier) FROM grdb_migrations) = ?1",
                SQLiteSchemaVersion.latestMigration) == true
        else {
            return nil
        }
        return row(connection, "SELECT 1 FROM users WHERE id = ?1", user)
    }

    /// Whether the query bound to `text` gives a row; `nil` on any error.
    private static func row(_ connection: OpaquePointer, _ sql: String, _ text: String) -> Bool? {
        var statement: OpaquePointer?
        defer { sqlite3_finalize(statement) }
        guard sqlite3_prepare_v2(connection, sql, -1, &statement, nil) == SQLITE_OK,
            sqlite3_bind_text(statement, 1, text, -1, transientDestructor) == SQLITE_OK
        else { return nil }
        switch sqlite3_step(statement) {
        case SQLITE_ROW: return true
        case SQLITE_DONE: return false
        default: return nil
        }
    }

    /// SQLITE_TRANSIENT: SQLite copies the bound text.
    private static let transientDestructor = unsafeBitCast(-1, to: sqlite3_destructor_type.self)

    private static func nonEmpty(_ value: String?) -> String? {
        value.flatMap { $0.isEmpty ? nil : $0 }
    }

    /// The system clock, whole seconds.
    public static func wallClock() -> Int64 {
        var time = timespec()
        clock_gettime(CLOCK_REALTIME, &time)
        return Int64(time.tv_sec)
    }

    static func monotonicNanoseconds() -> Int64 {
        var time = timespec()
        clock_gettime(CLOCK_MONOTONIC, &time)
        return Int64(time.tv_sec) * 1_000_000_000 + Int64(time.tv_nsec)
    }
}

extension QuietPath {
    /// A random (version 4) UUID, lower-case, as the full hook's run ids.
    static func uuid() -> String {
        var generator = SystemRandomNumberGenerator()
        var bytes = (0..<16).map { _ in UInt8.random(in: 0...255, using: &generator) }
        bytes[6] = bytes[6] & 0x0F | 0x40
        bytes[8] = bytes[8] & 0x3F | 0x80
        let hex = Array("0123456789abcdef".utf8)
        var text: [UInt8] = []
        for (index, byte) in bytes.enumerated() {
            if [4, 6, 8, 10].contains(index) { text.append(UInt8(ascii: "-")) }
            text.append(hex[Int(byte >> 4)])
            text.append(hex[Int(byte & 0x0F)])
        }
        return String(decoding: text, as: UTF8.self)
    }
}

/// Where the full hook is: beside the running executable.
public enum HandOver {
    public static let fullHookName = "content-limit-hook-full"

    /// `<directory of this executable>/content-limit-hook-full`.
    public static func fullHookPath() -> String {
        directory(of: executablePath() ?? CommandLine.arguments.first ?? "") + fullHookName
    }

    /// The directory part of `path`, with its trailing slash (`./` for a bare name).
    static func directory(of path: String) -> String {
        guard let slash = path.lastIndex(of: "/") else { return "./" }
        return String(path[...slash])
    }

    static func executablePath() -> String? {
        #if os(Linux)
            var buffer = [CChar](repeating: 0, count: 4096)
            let count = readlink("/proc/self/exe", &buffer, buffer.count - 1)
            guard count > 0 else { return nil }
            return String(decoding: buffer[..<count].map { UInt8(bitPattern: $0) }, as: UTF8.self)
        #elseif canImport(Darwin)
            var size: UInt32 = 4096
            var buffer = [CChar](repeating: 0, count: Int(size))
            guard _NSGetExecutablePath(&buffer, &size) == 0 else { return nil }
            return String(cString: buffer)
        #else
            return nil
        #endif
    }
}

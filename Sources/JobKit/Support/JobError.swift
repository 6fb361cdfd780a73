/// The one error type the jobs surface to their callers. Each carries a sysexits(3) exit code, so cron,
/// a shell script or the Lambda adapter can tell a bad flag from bad data from an unavailable database.
///
/// A struct wrapping a private code (not a public enum), so adding a kind of error breaks nobody.
/// `description` never contains secrets: callers build messages from names and counts, never from
/// keys, access tokens or full device tokens.
public struct JobError: Error, Sendable, CustomStringConvertible, Hashable {
    private enum Code: String, Sendable, Hashable, CaseIterable {
        case usage, dataError, noInput, unavailable, software, cantCreate, ioError, tempFailure, noPermission, config
    }

    private let code: Code
    /// A human-readable, secret-free explanation.
    public let message: String
    /// Whether this is ``unknownUser(_:)``'s error (the HTTP API answers it 404).
    package let isUnknownUser: Bool

    private init(_ code: Code, _ message: String, unknownUser: Bool = false) {
        self.code = code
        self.message = message
        self.isUnknownUser = unknownUser
    }

    /// Bad command-line usage (EX_USAGE, 64).
    public static func usage(_ message: String) -> JobError { JobError(.usage, message) }
    /// The input data was incorrect: malformed event, unknown user, invalid value (EX_DATAERR, 65).
    public static func dataError(_ message: String) -> JobError { JobError(.dataError, message) }
    /// A user id the store does not know (EX_DATAERR, 65): one message wherever a user is looked up.
    public static func unknownUser(_ userID: String) -> JobError {
        JobError(.dataError, "unknown user \(LineText.field(userID))", unknownUser: true)
    }
    /// ``unknownUser(_:)`` with why the app may still have them (not a push user yet): the same code, the same 404.
    package static func unknownUser(_ userID: String, why: String) -> JobError {
        JobError(.dataError, "unknown user \(LineText.field(userID)): \(why)", unknownUser: true)
    }
    /// An input file (the database, a catalog) does not exist or cannot be read (EX_NOINPUT, 66).
    public static func noInput(_ message: String) -> JobError { JobError(.noInput, message) }
    /// A service (the database, a provider) is unavailable (EX_UNAVAILABLE, 69).
    public static func unavailable(_ message: String) -> JobError { JobError(.unavailable, message) }
    /// An internal error: a bug (EX_SOFTWARE, 70).
    public static func software(_ message: String) -> JobError { JobError(.software, message) }
    /// An output file cannot be created (EX_CANTCREAT, 73).
    public static func cantCreate(_ message: String) -> JobError { JobError(.cantCreate, message) }
    /// An I/O error (EX_IOERR, 74).
    public static func ioError(_ message: String) -> JobError { JobError(.ioError, message) }
    /// A temporary failure (a locked database): try again later (EX_TEMPFAIL, 75).
    public static func tempFailure(_ message: String) -> JobError { JobError(.tempFailure, message) }
    /// Permission denied: a provider refused our credentials (EX_NOPERM, 77).
    public static func noPermission(_ message: String) -> JobError { JobError(.noPermission, message) }
    /// Something is misconfigured: missing credentials, an unmigrated database, a provider's answers saying the
    /// sender is set up wrong (EX_CONFIG, 78).
    public static func config(_ message: String) -> JobError { JobError(.config, message) }

    /// A temporary failure (a locked database): the same call may succeed later.
    public var isTemporary: Bool { code == .tempFailure }
    /// A service could not be reached or failed (not a refusal of what we sent).
    public var isUnavailable: Bool { code == .unavailable }
    /// Whether the condition may pass while the caller waits: a locked database (75), a full disk or an I/O
    /// error (74), a database that cannot be reached (69). Not bad data, bad usage, a configuration or a bug.
    public var mayPassWithTime: Bool { [.tempFailure, .ioError, .unavailable].contains(code) }
    /// Bad usage: what was given is not a valid value for its flag or variable.
    public var isUsage: Bool { code == .usage }

    /// The sysexits(3) code for this error.
    public var exitCode: Int32 {
        switch code {
        case .usage: 64
        case .dataError: 65
        case .noInput: 66
        case .unavailable: 69
        case .software: 70
        case .cantCreate: 73
        case .ioError: 74
        case .tempFailure: 75
        case .noPermission: 77
        case .config: 78
        }
    }

    /// A short, value-free label for metrics and JSON output.
    public var kind: String { code.rawValue }

    /// Every exit code a job or tool ends with, its label and what it means: docs/reference/exit-codes.md is
    /// generated from this (`scripts/reference`).
    package static var exitCodes: [(code: Int32, kind: String, meaning: String)] {
        Code.allCases.map { code in
            let error = JobError(code, "")
            let meaning =
                switch code {
                case .usage: "bad usage: a flag or variable with a value it does not take; nothing was done"
                case .dataError: "bad data: an input (an event, a token, a catalog, a mapping) refused; nothing written"
                case .noInput: "a file to read is missing or unreadable"
                case .unavailable:
                    "a service is unavailable (the database), or a run left due devices because a provider failed; "
                        + "the next runs retry them"
                case .software: "an internal error: a bug to report"
                case .cantCreate: "a file could not be created (the outbox, a metrics file, a backup)"
                case .ioError: "reading or writing failed (a full disk, the database's file)"
                case .tempFailure:
                    "temporary: a locked database, a serialization failure, or a run that stopped claiming in time; "
                        + "the next run does the work"
                case .noPermission:
                    "a run left due devices because a provider refused the credentials; a person must act"
                case .config:
                    "configuration: a setting that cannot work (TLS over a socket, a schema that does not exist), or a "
                        + "run whose provider called most tokens dead for a reason that means the sender is set up wrong "
                        + "(a topic of another app, sandbox tokens sent to production, a service account of another "
                        + "Firebase project): no device deactivated, each held; the error names the setting to check"
                }
            return (error.exitCode, code.rawValue, meaning)
        }
    }

    public var description: String { message }

    /// Equal by kind and message (an unknown user's error is a data error with its message, however made).
    public static func == (lhs: JobError, rhs: JobError) -> Bool { lhs.code == rhs.code && lhs.message == rhs.message }

    public func hash(into hasher: inout Hasher) {
        hasher.combine(code)
        hasher.combine(message)
    }
}

import Foundation

/// Every environment variable the jobs read, with its meaning. The executables read the environment at
/// their entry point only and resolve each setting here: a flag wins over the environment, the
/// environment over the default. The README's configuration table lists the same keys.
public enum ConfigKey: String, CaseIterable, Sendable {
    case databaseURL = "PUSH_DATABASE_URL"
    case earlyMinutes = "PUSH_EARLY_MINUTES"
    case catchUpMinutes = "PUSH_CATCH_UP_MINUTES"
    case claimLeaseMinutes = "PUSH_CLAIM_LEASE_MINUTES"
    case copyCatalog = "PUSH_COPY_CATALOG"
    case outbox = "PUSH_OUTBOX"
    case logLevel = "PUSH_LOG_LEVEL"

    /// The flag that overrides this key.
    public var flag: String {
        switch self {
        case .databaseURL: "--database"
        case .earlyMinutes: "--early-minutes"
        case .catchUpMinutes: "--catch-up-minutes"
        case .claimLeaseMinutes: "--claim-lease-minutes"
        case .copyCatalog: "--copy-catalog"
        case .outbox: "--outbox"
        case .logLevel: "--log-level"
        }
    }

    public var help: String {
        switch self {
        case .databaseURL: "SQLite file path (or sqlite:///absolute/path). Required."
        case .earlyMinutes: "Minutes before the reminder time a run may already send (default 2, 0–14)."
        case .catchUpMinutes: "Minutes after the reminder time a late run still sends (default 60, 1–720)."
        case .claimLeaseMinutes: "Minutes after which an unfinished claim of a dead run is taken over (default 10, 2–60)."
        case .copyCatalog: "A copy catalog JSON file replacing the built-in one."
        case .outbox: "Deliver by appending JSON lines to this file (- for stdout) instead of a provider."
        case .logLevel: "trace, debug, info, notice, warning, error or critical (default info); logs go to stderr."
        }
    }
}

/// Resolves settings from flags and the environment, naming the source of a bad value in the error.
public struct ConfigResolver: Sendable {
    public let environment: [String: String]

    public init(environment: [String: String]) {
        self.environment = environment
    }

    /// The raw value and where it came from.
    public func raw(_ key: ConfigKey, flag: String?) -> (value: String, source: String)? {
        if let flag { return (flag, key.flag) }
        if let value = environment[key.rawValue], !value.isEmpty { return (value, key.rawValue) }
        return nil
    }

    public func string(_ key: ConfigKey, flag: String?) -> String? {
        raw(key, flag: flag)?.value
    }

    /// An integer setting; a malformed flag is a usage error (64), a malformed variable a configuration
    /// error (78).
    public func integer(_ key: ConfigKey, flag: Int?, default value: Int, range: ClosedRange<Int>) throws(JobError) -> Int {
        let resolved: Int
        let source: String
        if let flag {
            resolved = flag
            source = key.flag
        } else if let text = environment[key.rawValue], !text.isEmpty {
            guard let number = Int(text.trimmingCharacters(in: .whitespaces)) else {
                throw .config("\(key.rawValue): not a whole number: \(text)")
            }
            resolved = number
            source = key.rawValue
        } else {
            return value
        }
        guard range.contains(resolved) else {
            let message = "\(source) must be within \(range.lowerBound)…\(range.upperBound), got \(resolved)"
            throw source.hasPrefix("--") ? .usage(message) : .config(message)
        }
        return resolved
    }
}

/// Where the data lives.
public struct DatabaseLocation: Sendable, Hashable {
    public enum Kind: Sendable, Hashable { case sqlite(path: String), postgres(url: String) }
    public let kind: Kind

    /// Accepts a file path, `sqlite:///absolute/path`, `sqlite://relative/path`, `file:path`, or a
    /// `postgres://`/`postgresql://` URL.
    public static func parse(_ text: String, source: String) throws(JobError) -> DatabaseLocation {
        let trimmed = text.trimmingCharacters(in: .whitespaces)
        guard !trimmed.isEmpty else { throw .config("\(source): empty database location") }
        let lower = trimmed.lowercased()
        if lower.hasPrefix("postgres://") || lower.hasPrefix("postgresql://") {
            return DatabaseLocation(kind: .postgres(url: trimmed))
        }
        for scheme in ["sqlite://", "file://", "sqlite:", "file:"] where lower.hasPrefix(scheme) {
            let path = String(trimmed.dropFirst(scheme.count))
            guard !path.isEmpty else { throw .config("\(source): no path in \(scheme) URL") }
            return DatabaseLocation(kind: .sqlite(path: path))
        }
        if lower.contains("://") {
            throw .config("\(source): unsupported database URL scheme (use a SQLite path or sqlite:///path)")
        }
        return DatabaseLocation(kind: .sqlite(path: trimmed))
    }
}

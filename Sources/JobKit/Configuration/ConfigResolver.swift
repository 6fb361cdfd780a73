import Foundation

/// Resolves settings from flags and the environment, naming the source of a bad value in the error.
public struct ConfigResolver: Sendable {
    package let environment: [String: String]

    public init(environment: [String: String]) {
        self.environment = environment
    }

    /// The raw value and where it came from. An empty variable is unset (as `PUSH_OUTBOX=` in an env file); an
    /// empty flag is a usage error, for it is what `--outbox "$UNSET"` passes.
    package func raw(_ key: ConfigKey, flag: String?) throws(JobError) -> (value: String, source: String)? {
        if let flag {
            guard !flag.isEmpty else { throw .usage("\(key.flag): empty") }
            return (flag, key.flag)
        }
        return string(key).map { ($0, key.rawValue) }
    }

    package func string(_ key: ConfigKey, flag: String?) throws(JobError) -> String? {
        try raw(key, flag: flag)?.value
    }

    /// A setting that has no flag here: its variable, unset when empty.
    package func string(_ key: ConfigKey) -> String? {
        environment[key.rawValue].flatMap { $0.isEmpty ? nil : $0 }
    }

    /// A whole-number setting (``ConfigKey/number``): the flag, else the variable, else the default.
    package func integer(_ key: ConfigKey, flag: Int?) throws(JobError) -> Int {
        guard let number = key.number else { preconditionFailure("\(key.rawValue) is not a whole-number setting") }
        return try integer(key, flag: flag, default: number.default, range: number.range)
    }

    /// An integer setting; a malformed flag is a usage error (64), a malformed variable a configuration
    /// error (78).
    package func integer(_ key: ConfigKey, flag: Int?, default value: Int, range: ClosedRange<Int>) throws(JobError)
        -> Int
    {
        let resolved: Int
        let source: String
        if let flag {
            resolved = flag
            source = key.flag
        } else if let text = string(key) {
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
package struct DatabaseLocation: Sendable, Hashable {
    package enum Kind: Sendable, Hashable {
        case sqlite(path: String)
        case postgres(url: String)
    }
    package let kind: Kind

    /// Accepts a file path, `sqlite:///absolute/path`, `sqlite://relative/path`, `file:path`, or a
    /// `postgres://`/`postgresql://` URL.
    package static func parse(_ text: String, source: String) throws(JobError) -> DatabaseLocation {
        switch DatabaseLocationSyntax.parse(text) {
        case .sqlite(let path): return DatabaseLocation(kind: .sqlite(path: path))
        case .postgres(let url): return DatabaseLocation(kind: .postgres(url: url))
        case .invalid(let reason): throw .config("\(source): \(reason)")
        }
    }
}

import Foundation
import JobKit
import Logging

/// The log formats every job writes to stderr: swift-log's text lines, or one JSON object per line.
package enum LogFormat: String, Sendable, CaseIterable {
    case text, json
}

/// The trace id of the Lambda invocation being served (`Lambda-Runtime-Trace-Id`), put into every log line
/// written while it is served (``JobLogging/metadataProvider``).
package enum LambdaTrace {
    @TaskLocal package static var id: String?
}

/// Sets up swift-log for a job: the format, and the metadata every line carries.
package enum JobLogging {
    /// Adds `trace_id` to every line written during a Lambda invocation.
    package static let metadataProvider = Logger.MetadataProvider {
        LambdaTrace.id.map { ["trace_id": "\($0)"] } ?? [:]
    }

    /// The format chosen at bootstrap: the final error line of a job follows it.
    package nonisolated(unsafe) private(set) static var format = LogFormat.text

    /// The last line of a job that fails: `<job>: error: <message>` as text, or a JSON object with the exit code.
    package static func errorLine(job: String, _ error: JobError) -> String {
        guard format == .json else { return "\(job): error: \(error.message)" }
        return JSONLogHandler.line(
            label: job, level: .error, message: error.message,
            fields: ["exit_code": "\(error.exitCode)", "error_kind": "\(error.kind)"])
            ?? "\(job): error: \(error.message)"
    }

    /// What a line of `event` shows besides its message: the handler's metadata, then the provider's, then the
    /// call's (a later one wins), and the event's error as `error.message` and `error.type`.
    static func fields(of event: LogEvent, metadata: Logger.Metadata, provider: Logger.MetadataProvider?)
        -> Logger.Metadata
    {
        var fields = metadata
        if let provided = provider?.get() { fields.merge(provided) { $1 } }
        if let given = event.metadata { fields.merge(given) { $1 } }
        if let error = event.error {
            fields["error.message"] = "\(error)"
            fields["error.type"] = "\(String(reflecting: type(of: error)))"
        }
        return fields
    }

    /// Bootstraps the process's logging; call once, before the first logger is made.
    package static func bootstrap(_ format: LogFormat) {
        Self.format = format
        switch format {
        case .text:
            LoggingSystem.bootstrap(
                { label, provider in
                    LineSafeLogHandler(StreamLogHandler.standardError(label: label), metadataProvider: provider)
                },
                metadataProvider: metadataProvider)
        case .json:
            LoggingSystem.bootstrap(
                { label, provider in JSONLogHandler(label: label, metadataProvider: provider) },
                metadataProvider: metadataProvider)
        }
    }
}

/// The text log format's guard: a log line holds values from outside (a user id, a zone, a provider's answer, an
/// error's message), and swift-log's ``StreamLogHandler`` writes them as they are, so that a line break in one
/// would end the line and start a forged one. This handler escapes the control characters of the message and of
/// every metadata value (its own, the provider's, the call's) and hands the line to `inner`, which writes it.
package struct LineSafeLogHandler<Inner: LogHandler>: LogHandler {
    package var metadata: Logger.Metadata = [:]
    package var metadataProvider: Logger.MetadataProvider?
    private var inner: Inner

    /// `inner` is given the escaped metadata with each event; its own metadata and provider are not used.
    package init(_ inner: Inner, metadataProvider: Logger.MetadataProvider? = nil) {
        self.inner = inner
        self.inner.metadata = [:]
        self.inner.metadataProvider = nil
        self.metadataProvider = metadataProvider
    }

    package var logLevel: Logger.Level {
        get { inner.logLevel }
        set { inner.logLevel = newValue }
    }

    package subscript(metadataKey key: String) -> Logger.Metadata.Value? {
        get { metadata[key] }
        set { metadata[key] = newValue }
    }

    package func log(event: LogEvent) {
        let fields = JobLogging.fields(of: event, metadata: metadata, provider: metadataProvider)
        var escaped = event
        escaped.error = nil
        escaped.message = "\(LineText.escapingControls(event.message.description))"
        escaped.metadata =
            fields.isEmpty ? nil : fields.mapValues { .string(LineText.escapingControls($0.description)) }
        inner.log(event: escaped)
    }
}

/// One JSON object per line on stderr: `timestamp` (UTC, milliseconds), `level`, `job` (the logger's label),
/// `message`, and each metadata entry as a field of its own (`run`, `provider`, `devices`, `trace_id`, …).
/// Lists and nested metadata stay JSON. What goes in is what the text format shows: callers never log
/// secrets or full tokens.
package struct JSONLogHandler: LogHandler {
    package var metadata: Logger.Metadata = [:]
    package var logLevel: Logger.Level = .info
    package var metadataProvider: Logger.MetadataProvider?
    private let label: String
    private let write: @Sendable (String) -> Void

    package init(
        label: String, metadataProvider: Logger.MetadataProvider? = nil,
        write: @escaping @Sendable (String) -> Void = { FileHandle.standardError.write(Data(($0 + "\n").utf8)) }
    ) {
        self.label = label
        self.metadataProvider = metadataProvider
        self.write = write
    }

    package subscript(metadataKey key: String) -> Logger.Metadata.Value? {
        get { metadata[key] }
        set { metadata[key] = newValue }
    }

    package func log(event: LogEvent) {
        let fields = JobLogging.fields(of: event, metadata: metadata, provider: metadataProvider)
        if let line = Self.line(label: label, level: event.level, message: "\(event.message)", fields: fields) {
            write(line)
        }
    }

    /// One log line as a JSON object, keys sorted.
    static func line(label: String, level: Logger.Level, message: String, fields: Logger.Metadata) -> String? {
        var object: [String: Field] = fields.mapValues(Field.init)
        let milliseconds = Int64((Date().timeIntervalSince1970 * 1000).rounded(.down))
        let millisecondText = String(milliseconds % 1000)
        object["timestamp"] = .string(
            String(Timestamps.format(milliseconds / 1000).dropLast())
                + "." + String(repeating: "0", count: 3 - millisecondText.count) + millisecondText + "Z")
        object["level"] = .string(level.rawValue)
        object["job"] = .string(label)
        object["message"] = .string(message)
        return JSONLine.encode(object, verbatimKeys: true)
    }

    /// A metadata value as JSON: a string, an array or an object.
    private enum Field: Encodable {
        case string(String)
        case array([Field])
        case object([String: Field])

        init(_ value: Logger.Metadata.Value) {
            switch value {
            case .string(let text): self = .string(text)
            case .stringConvertible(let convertible): self = .string("\(convertible)")
            case .array(let values): self = .array(values.map(Field.init))
            case .dictionary(let members): self = .object(members.mapValues(Field.init))
            }
        }

        func encode(to encoder: any Encoder) throws {
            var container = encoder.singleValueContainer()
            switch self {
            case .string(let text): try container.encode(text)
            case .array(let values): try container.encode(values)
            case .object(let members): try container.encode(members)
            }
        }
    }
}

import Foundation
import JobKit

/// Where a job writes its lines (stdout in the executables, a buffer in tests).
public protocol LineSink: Sendable {
    func write(_ line: String)
}

/// Lines to standard output, written whole.
public struct StandardOutput: LineSink {
    public init() {}
    public func write(_ line: String) {
        FileHandle.standardOutput.write(Data((line + "\n").utf8))
    }
}

/// The dry-run "sender": prints one line per notification it would send and delivers nothing.
package struct DryRunSender: Sender {
    package let sink: any LineSink
    package let json: Bool
    /// The providers a real run would deliver to (those configured): a dry run skips the others' devices as
    /// the run would. `nil`: every provider (an outbox delivers to all).
    package let providers: Set<Provider>?

    package init(sink: any LineSink, json: Bool, providers: Set<Provider>? = nil) {
        self.sink = sink
        self.json = json
        self.providers = providers
    }

    package func canDeliver(to provider: Provider) -> Bool { providers?.contains(provider) ?? true }

    package func send(_ batch: [OutgoingNotification]) async -> [DeliveryReport] {
        for notification in batch {
            if json {
                sink.write(NotificationLine(notification, event: "would_send").json)
            } else {
                // A reminder's line says no type (most lines are reminders); a quota warning's does.
                let type = notification.type == .diaryReminder ? "" : " type=\(notification.type.rawValue)"
                sink.write(
                    "would send: user=\(LineText.field(notification.device.userID))\(type) device=\(Redaction.maskToken(notification.device.token)) provider=\(notification.device.provider) locale=\(LineText.field(notification.locale)) title=\(LineText.quoted(notification.title)) body=\(LineText.quoted(notification.body))"
                )
            }
        }
        return batch.map { _ in DeliveryReport(channel: .dryRun, outcome: .delivered) }
    }
}

/// Hands notifications to another system: appends one JSON line per notification to a file (or standard
/// output) and counts it delivered to the outbox. Useful to pipe a run into an existing push service,
/// and for running the job end to end where no provider is configured.
///
/// Unlike logs and dry-run output, outbox lines carry the full device token: the outbox is a delivery
/// channel, and its file must be protected like the database.
package final class OutboxSender: Sender {
    private let handle: FileHandle
    private let path: String
    private let lock = NSLock()
    /// Set by the first write that fails; every later batch is refused without touching the file.
    private nonisolated(unsafe) var failure: JobError?

    /// Opens (creating, appending to) `path`; `-` is standard output.
    package init(path: String) throws(JobError) {
        self.path = path
        if path == "-" {
            handle = .standardOutput
            return
        }
        if !FileManager.default.fileExists(atPath: path) {
            do { try AtomicFile.create(path, mode: 0o600) } catch {
                throw .cantCreate("cannot create the outbox file \(path): \(systemReason(error))")
            }
        }
        do {
            let handle = try FileHandle(forWritingTo: URL(fileURLWithPath: path))
            try handle.seekToEnd()
            self.handle = handle
        } catch {
            throw .cantCreate("cannot open the outbox file \(path) for writing: \(systemReason(error))")
        }
    }

    /// Appends the batch's lines and makes them durable (fsync) before counting them delivered: a line the
    /// next system may read is a notification sent. A write or sync that fails (a full disk, a file size
    /// limit) cuts the file back to where the batch began, so that it never holds a torn line or half a
    /// batch; the batch is left for a later run (`retry_later`) and the run fails with 74.
    package func send(_ batch: [OutgoingNotification]) async -> [DeliveryReport] {
        guard !batch.isEmpty else { return [] }
        var text = ""
        for notification in batch {
            text += NotificationLine(notification, event: "outbox", fullToken: true).json + "\n"
        }
        let data = Data(text.utf8)
        let written: Bool = lock.withLock {
            guard failure == nil else { return false }
            let regularFile = path != "-"
            let start = regularFile ? try? handle.offset() : nil
            do {
                try handle.write(contentsOf: data)
                if regularFile { try handle.synchronize() }
                return true
            } catch {
                var restored = "the file is as it was before them"
                if let start {
                    do {
                        try handle.truncate(atOffset: start)
                        try handle.synchronize()
                    } catch {
                        restored =
                            "cutting the file back to \(start) bytes failed too (\(systemReason(error))): its last line may be torn"
                    }
                }
                failure = .ioError(
                    "the outbox \(path) could not be written (\(systemReason(error))); the notifications not written are left for the next run, and \(restored)"
                )
                return false
            }
        }
        return batch.map { _ in
            DeliveryReport(
                channel: .outbox, outcome: written ? .delivered : .retryLater,
                reason: written ? nil : "outbox write failed")
        }
    }

    package func channelFailure() async -> JobError? {
        lock.withLock { failure }
    }
}

/// The JSON shape of one notification in dry-run and outbox output: its fields under their snake-case names
/// (``JSONLine``), written from the notification as they are encoded.
struct NotificationLine: Encodable {
    let notification: OutgoingNotification
    let event: String
    /// The whole token (the outbox, which a consumer sends from); otherwise it is masked.
    let fullToken: Bool

    init(_ notification: OutgoingNotification, event: String, fullToken: Bool = false) {
        self.notification = notification
        self.event = event
        self.fullToken = fullToken
    }

    private enum CodingKeys: String, CodingKey {
        case event, userID, device, deviceID, provider, platform, apnsEnvironment, tokenKind
        case type, period, locale, messageIndex, title, body, collapseID, expiresAt
    }

    func encode(to encoder: any Encoder) throws {
        let device = notification.device
        var line = encoder.container(keyedBy: CodingKeys.self)
        try line.encode(event, forKey: .event)
        try line.encode(device.userID, forKey: .userID)
        try line.encode(fullToken ? device.token : Redaction.maskToken(device.token), forKey: .device)
        try line.encode(device.id, forKey: .deviceID)
        try line.encode(device.provider.rawValue, forKey: .provider)
        try line.encode(device.platform.rawValue, forKey: .platform)
        try line.encodeIfPresent(device.apnsEnvironment?.rawValue, forKey: .apnsEnvironment)
        // Only for an FCM installation id, which a consumer sends in `message.fid`: a token's line is unchanged.
        if device.sendingKind == .fid { try line.encode(TokenKind.fid.rawValue, forKey: .tokenKind) }
        try line.encode(notification.type.rawValue, forKey: .type)
        try line.encode(notification.period, forKey: .period)
        try line.encode(notification.locale, forKey: .locale)
        try line.encode(notification.messageIndex, forKey: .messageIndex)
        try line.encode(notification.title, forKey: .title)
        try line.encode(notification.body, forKey: .body)
        try line.encode(notification.collapseID, forKey: .collapseID)
        try line.encode(Timestamps.format(notification.expiresAt), forKey: .expiresAt)
    }

    var json: String {
        JSONLine.encode(self)
    }
}

/// Sends through another sender and prints one line per notification with its outcome
/// (for `--validate-only`, where FCM checks each token and payload and delivers nothing).
package struct ReportingSender: Sender {
    package let inner: any Sender
    package let sink: any LineSink
    package let json: Bool

    package func canDeliver(to provider: Provider) -> Bool { inner.canDeliver(to: provider) }
    package func shutdown() async { await inner.shutdown() }
    package var outageThreshold: OutageThreshold { inner.outageThreshold }

    package func send(_ batch: [OutgoingNotification]) async -> [DeliveryReport] {
        let reports = await inner.send(batch)
        for (notification, report) in zip(batch, reports) {
            if json {
                sink.write(
                    JSONLine.encode(
                        ValidationLine(
                            notification: NotificationLine(notification, event: "validated"),
                            outcome: report.outcome.rawValue, reason: report.reason)))
            } else {
                sink.write(
                    "validated: user=\(LineText.field(notification.device.userID)) device=\(Redaction.maskToken(notification.device.token)) provider=\(notification.device.provider) outcome=\(report.outcome.rawValue)\(report.reason.map { " reason=\(LineText.field($0))" } ?? "")"
                )
            }
        }
        return reports
    }

    private struct ValidationLine: Encodable {
        let notification: NotificationLine
        let outcome: String
        let reason: String?
    }
}

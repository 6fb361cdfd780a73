import Foundation
import Logging
@testable import JobKit

/// A fresh SQLite file in its own temporary directory.
struct TemporaryDatabase {
    let directory: URL
    let path: String
    let store: SQLiteStore

    init() throws {
        directory = FileManager.default.temporaryDirectory.appendingPathComponent("jobkit-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        path = directory.appendingPathComponent("push.sqlite").path
        store = try SQLiteStore.open(path: path, mode: .create)
    }

    func count(_ sql: String) throws -> Int {
        try store.pool.read { db in try Int.fetchOne(db, sql: sql) ?? 0 }
    }

    func strings(_ sql: String) throws -> [String] {
        try store.pool.read { db in try String.fetchAll(db, sql: sql) }
    }
}

/// Records what it is asked to send; answers by token prefix:
/// `dead` → token dead, `flaky` → retry later, `auth` → credentials, anything else → delivered.
actor RecordingSender: Sender {
    private(set) var sent: [OutgoingNotification] = []

    func send(_ batch: [OutgoingNotification]) async -> [DeliveryReport] {
        sent += batch
        return batch.map { notification in
            let token = notification.device.token
            let outcome: DeliveryOutcome = token.hasPrefix("dead") ? .tokenDead
                : token.hasPrefix("flaky") ? .retryLater
                : token.hasPrefix("auth") ? .credentials : .delivered
            return DeliveryReport(channel: notification.device.provider.rawValue, outcome: outcome,
                                  reason: outcome == .tokenDead ? "Unregistered" : nil)
        }
    }

    func users() -> [String] { sent.map(\.device.userID) }
}

/// Collects output lines.
final class LineBuffer: LineSink, @unchecked Sendable {
    private let lock = NSLock()
    private var stored: [String] = []
    func write(_ line: String) { lock.withLock { stored.append(line) } }
    var lines: [String] { lock.withLock { stored } }
}

let quietLogger: Logger = {
    var logger = Logger(label: "test")
    logger.logLevel = .critical
    return logger
}()

extension SQLiteStore {
    /// A user with reminders at `time`, and `devices` active tokens (`token-<user>-<n>` unless given).
    func addUser(_ id: String, zone: String = "UTC", time: String = "20:00", locale: String = "en",
                 enabled: Bool = true, tokens: [String]? = nil, now: Int64 = 0) async throws {
        try await upsertUser(UserProfile(id: id, timezone: zone, locale: locale, diaryReminderEnabled: enabled,
                                         reminderTime: time), now: now)
        for token in tokens ?? ["token-\(id)-1"] {
            _ = try await register(DeviceRegistration(userID: id, token: token, provider: .fcm, platform: "android"), now: now)
        }
    }
}

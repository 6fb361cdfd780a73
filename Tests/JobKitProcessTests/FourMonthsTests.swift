import Foundation
import JobKitTestSupport
import PostgresNIO
import Testing

@testable import JobKit
@testable import JobKitDelivery
@testable import JobKitPostgres

/// Issue 78's "four months of a diary app": a Supabase-like schema (uuid ids, JSON preferences, RLS, the API
/// roles) integrated with triggers; 200 users over 120 days sign up (a third of them without a time zone, set
/// days later), change settings and zones, add, rotate and log out devices (iOS APNs tokens, Android FCM tokens and
/// FIDs, in one table), write (some entries soft-deleted), stop writing, delete their accounts; the app marks
/// devices seen when their user writes. The janitor runs daily, the reminder job at every slot a user's reminder
/// can fall on. At each run the users reminded equal an oracle computed from the app's side alone (Foundation's
/// calendar in each zone, never the jobs' own clock): nobody missed, nobody extra, nobody twice a local day; no
/// valid device deactivated; no day of drift.
@Suite struct FourMonthsTests {
    struct Device {
        var token: String?
        var fid: String?
        var active = true
        /// Answered dead by the simulator ("dead" prefix): never a user's only device.
        var dead = false
    }

    struct User {
        let id: String
        var zone: String?
        var reminderTime: String
        var remindersOn = true
        var devices: [Device] = []
        var deleted = false
        var activeDeviceTokens: [String] { devices.filter { $0.active && !$0.dead }.compactMap { $0.fid ?? $0.token } }
    }

    static let zones = [
        "Asia/Kolkata", "Australia/Adelaide", "America/St_Johns", "Asia/Kathmandu", "Pacific/Chatham",
        "Europe/Berlin", "America/Los_Angeles", "UTC",
    ]
    static let times = ["07:30", "21:00"]
    static let start = JobKitTestSupport.instant("2026-09-01T00:00:00Z")
    static let day: Int64 = 86_400
    /// The app's settings, devices and sign-ups change at 12:45 UTC: no reminder of these zones and times is due
    /// within the early and catch-up window around it (the last slot before is 11:30, the next 14:30).
    static let changesAt: Int64 = 12 * 3600 + 45 * 60

    /// The instant the wall clock in `zone` reads `time` on `date` (Foundation's calendar: the oracle's own).
    static func wallInstant(zone: String, date: DateComponents, time: String) -> Int64 {
        var calendar = Calendar(identifier: .gregorian)
        calendar.timeZone = TimeZone(identifier: zone)!
        var components = date
        components.hour = Int(time.prefix(2))
        components.minute = Int(time.suffix(2))
        return Int64(calendar.date(from: components)!.timeIntervalSince1970)
    }

    static func localDate(zone: String, _ at: Int64) -> DateComponents {
        var calendar = Calendar(identifier: .gregorian)
        calendar.timeZone = TimeZone(identifier: zone)!
        return calendar.dateComponents([.year, .month, .day], from: Date(timeIntervalSince1970: TimeInterval(at)))
    }

    static let app = IntegrationTests.App(
        ddl: [
            """
            CREATE TABLE public.profiles (id uuid PRIMARY KEY, timezone text,
                preferences jsonb NOT NULL DEFAULT '{}'::jsonb)
            """,
            """
            CREATE TABLE public.user_devices (id bigserial PRIMARY KEY,
                user_id uuid NOT NULL REFERENCES public.profiles (id) ON DELETE CASCADE,
                token text UNIQUE, fid text UNIQUE, platform text NOT NULL, is_active boolean NOT NULL DEFAULT true,
                last_seen timestamptz NOT NULL DEFAULT now(), CHECK (token IS NOT NULL OR fid IS NOT NULL))
            """,
            """
            CREATE TABLE public.entries (id bigserial PRIMARY KEY,
                user_id uuid NOT NULL REFERENCES public.profiles (id) ON DELETE CASCADE,
                created_at timestamptz NOT NULL, deleted_at timestamptz)
            """,
        ],
        mapping: """
            { "users": { "table": "public.profiles",
                         "columns": { "id": "id", "timezone": "timezone",
                                      "reminder_time": "preferences.reminder_time",
                                      "reminders": "preferences.reminders" } },
              "devices": { "table": "public.user_devices",
                           "columns": { "user_id": "user_id", "token": "token", "fid": "fid", "platform": "platform",
                                        "active": "is_active", "last_seen": "last_seen" },
                           "fixed": { "provider": "by_shape" } },
              "entries": { "table": "public.entries",
                           "columns": { "user_id": "user_id", "at": "created_at", "deleted": "deleted_at" } } }
            """,
        signUp: { _, _, _ in "" }, addDevice: { _, _ in "" }, write: { _, _ in "" }, logout: { _, _ in "" },
        rotate: { _, _, _ in "" }, remindersOff: { _ in "" }, deleteAccount: { _ in "" }, isActive: { _ in "" },
        tables: ["public.profiles", "public.user_devices", "public.entries"])

    /// How the app's changes reach the push schema: the SQL mirror's triggers, or database webhooks (each row change
    /// captured as Supabase sends it, and answered by the webhook's own rule, `AppChange.apply`, into a push schema
    /// of its own).
    enum Path: String, CaseIterable, CustomTestStringConvertible, Sendable {
        case triggers, webhooks
        var testDescription: String { rawValue }
    }

    @Test(arguments: Path.allCases) func fourMonthsOfADiaryAppRemindExactlyTheOraclesUsers(_ path: Path) async throws {
        let setup = try await IntegrationTests.integrated(Self.app)
        defer { try? FileManager.default.removeItem(at: setup.directory) }
        var pushLocation = setup.location
        if path == .webhooks {
            // The app's tables as before; their changes captured as a webhook carries them; a push schema apart.
            try await IntegrationTests.captureChanges(setup.location, of: Self.app.tables)
            let admin = try PostgresLocation.parse(try Backend.postgresAdminURL)
            pushLocation.database = setup.location.database + "_webhooks"
            _ = try await IntegrationTests.session(admin, ["CREATE DATABASE \(pushLocation.database)"])
            _ = try await IntegrationTests.session(
                pushLocation,
                [
                    "CREATE SCHEMA push",
                    "ALTER ROLE \(pushLocation.user) IN DATABASE \(pushLocation.database) SET search_path = push",
                ])
        }
        let store = try await PostgresStore.open(pushLocation, mode: .create, logger: quietLogger)
        defer { Task { await store.close() } }
        let mapping = try AppTableMapping(json: Self.app.mapping)
        var capturedSoFar = 0
        // Two sessions for the whole run (a connection a statement would be most of its time): the app's, as its
        // signed-in users' role, and the webhook's sender, which reads what was captured.
        func connect(_ id: Int) async throws -> PostgresConnection {
            try await PostgresConnection.connect(
                configuration: try setup.location.connectionConfiguration(applicationName: "tests"), id: id,
                logger: quietLogger)
        }
        let (appSession, senderSession) = (try await connect(1), try await connect(2))
        defer {
            Task {
                try? await appSession.close()
                try? await senderSession.close()
            }
        }
        func query(_ connection: PostgresConnection, _ sql: String) async throws -> [String] {
            do {
                return try await connection.query(PostgresQuery(unsafeSQL: sql), logger: quietLogger).collect()
                    .map { (try? $0.decode(String.self)) ?? "" }
            } catch {
                throw TestSetupError(message: "\(sql): \(String(reflecting: error))")
            }
        }
        _ = try await query(appSession, "SET ROLE authenticated")
        _ = try await query(appSession, "SET search_path = public")
        /// The app's statements, as the app runs them; on the webhook path, each row change they made is then sent.
        func app(_ statements: [String], at now: Int64) async throws {
            guard !statements.isEmpty else { return }
            for statement in statements { _ = try await query(appSession, statement) }
            guard path == .webhooks else { return }
            let rows = try await query(
                senderSession,
                """
                SELECT json_build_array(n, kind, table_name, record, old_record)::text FROM public.captured
                WHERE n > \(capturedSoFar) ORDER BY n
                """)
            for row in rows {
                guard case .array(let fields)? = try? JSONValue(parsing: row), fields.count == 5,
                    case .number(let n) = fields[0], case .string(let kind) = fields[1],
                    case .string(let table) = fields[2]
                else { throw TestSetupError(message: "captured: \(row)") }
                capturedSoFar = Int(n) ?? capturedSoFar
                let change = DatabaseChange(
                    kind: DatabaseChange.Kind(rawValue: kind)!, schema: "public", table: table,
                    record: fields[3].isNull ? nil : fields[3], oldRecord: fields[4].isNull ? nil : fields[4])
                do throws(JobError) {
                    _ = try await mapping.appChange(for: change).apply(to: store, now: now)
                } catch {
                    // The webhook's 404 for a device or an entry of a user deleted in the same cascade.
                    guard error.isUnknownUser else { throw error }
                }
            }
        }
        let harness = try await DeliveryHarness.start()
        defer { Task { await harness.stop() } }
        let sender = try await PushSender(configuration: harness.delivery(), credentials: store, logger: quietLogger)
        defer { Task { await sender.shutdown() } }
        let runner = DiaryReminderRunner(store: store, sender: sender, logger: quietLogger)
        let janitor = TokenJanitor(store: store, logger: quietLogger) { () async throws(JobError) -> any Sender in
            sender
        }

        var random = IntegrationTests.SplitMix(state: 78)
        func roll(_ percent: UInt64) -> Bool { random.next() % 1000 < percent }
        func pick<T>(_ items: [T]) -> T { items[Int(random.next() % UInt64(items.count))] }
        var serial = 0
        func newDevice(dead: Bool = false) -> (Device, platform: String) {
            serial += 1
            let hex = String(format: "%062x", serial * 7919)
            switch random.next() % 3 {
            case 0: return (Device(token: (dead ? "dead" : "ab") + hex.suffix(dead ? 60 : 62), dead: dead), "ios")
            case 1:
                return (
                    Device(token: "\(dead ? "dead" : "fcm")-\(serial):APA91b\(hex.suffix(20))", dead: dead), "android"
                )
            default:
                return dead
                    ? (Device(token: "dead-fid-\(serial):APA91b", dead: true), "android")
                    : (Device(fid: "cF" + String(format: "%020d", serial)), "android")
            }
        }
        func insert(_ user: String, _ device: Device, _ platform: String, seen: Int64) -> String {
            let token = device.token.map { "'\($0)'" } ?? "NULL"
            let fid = device.fid.map { "'\($0)'" } ?? "NULL"
            return
                "INSERT INTO user_devices (user_id, token, fid, platform, last_seen) VALUES ('\(user)', \(token), \(fid), '\(platform)', to_timestamp(\(seen)))"
        }

        // The app as it stands (`users`), and as it will after the day's changes at 12:45 UTC (`next`).
        var users: [User] = []
        var entries: [String: [(at: Int64, deleted: Bool)]] = [:]
        var remindedOn: [String: Int] = [:]  // "user date" → runs that reminded
        var (reminded, missed, extra, twice, driftDays) = (0, 0, 0, 0, 0)
        var mismatches: [String] = []
        var acceptedSoFar = 0
        var tokenOwner: [String: String] = [:]

        for dayIndex in 0..<120 {
            let dayStart = Self.start + Int64(dayIndex) * Self.day
            // The day's entries (and the app marking the writer's devices seen), before and after each run.
            var writes: [(at: Int64, user: Int, deleted: Bool)] = []
            for index in users.indices where !users[index].deleted {
                // Nearly half write on any day; a fifth stop writing after day 20, so that the app last saw their
                // devices more than the janitor's 90 days before the end (it must leave them alone).
                let quits = index % 5 == 0 && dayIndex > 20
                // A user writes once the app knows their zone (on the webhook path an entry of a user who is not a
                // push user yet is answered 404, and lost).
                if !quits && users[index].zone != nil && roll(450) {
                    let at = dayStart + Int64(random.next() % 86_000) / 60 * 60 + 7 * 60 + 7
                    writes.append((at, index, roll(80)))
                }
            }
            // The app's changes of the day, at 12:45 UTC.
            var next = users
            var changes: [String] = []
            let changeAt = dayStart + Self.changesAt
            if dayIndex < 80 {
                for _ in 0..<(dayIndex < 40 ? 3 : 2) where next.count < 200 {
                    let id = UUID(uuidString: String(format: "00000000-0000-4000-8000-%012d", next.count + 1))!
                        .uuidString.lowercased()
                    var user = User(id: id, zone: roll(330) ? nil : pick(Self.zones), reminderTime: pick(Self.times))
                    let zone = user.zone.map { "'\($0)'" } ?? "NULL"
                    changes.append(
                        "INSERT INTO profiles (id, timezone, preferences) VALUES ('\(id)', \(zone), '{\"reminder_time\": \"\(user.reminderTime)\", \"reminders\": true}')"
                    )
                    let (device, platform) = newDevice()
                    user.devices.append(device)
                    changes.append(insert(id, device, platform, seen: changeAt))
                    if roll(150) {
                        let (dead, deadPlatform) = newDevice(dead: true)
                        user.devices.append(dead)
                        changes.append(insert(id, dead, deadPlatform, seen: changeAt))
                    }
                    next.append(user)
                }
            }
            for index in next.indices where !next[index].deleted {
                let id = next[index].id
                if next[index].zone == nil {
                    if roll(150) {
                        let zone = pick(Self.zones)
                        next[index].zone = zone
                        changes.append("UPDATE profiles SET timezone = '\(zone)' WHERE id = '\(id)'")
                    }
                    continue
                }
                if roll(15) {
                    next[index].remindersOn.toggle()
                    changes.append(
                        "UPDATE profiles SET preferences = preferences || '{\"reminders\": \(next[index].remindersOn)}' WHERE id = '\(id)'"
                    )
                }
                if roll(15) {
                    let time = pick(Self.times)
                    next[index].reminderTime = time
                    changes.append(
                        "UPDATE profiles SET preferences = preferences || '{\"reminder_time\": \"\(time)\"}' WHERE id = '\(id)'"
                    )
                }
                if roll(8) {
                    let zone = pick(Self.zones)
                    next[index].zone = zone
                    changes.append("UPDATE profiles SET timezone = '\(zone)' WHERE id = '\(id)'")
                }
                if roll(10) {
                    let (device, platform) = newDevice()
                    next[index].devices.append(device)
                    changes.append(insert(id, device, platform, seen: changeAt))
                }
                if roll(10),
                    let slot = next[index].devices.indices.first(where: {
                        next[index].devices[$0].active && !next[index].devices[$0].dead
                            && next[index].devices[$0].token != nil
                    })
                {
                    // A token rotation: the same row, a new token of the same kind.
                    let old = next[index].devices[slot].token!
                    serial += 1
                    let new =
                        old.hasPrefix("ab") ? "ab" + String(format: "%062x", serial * 7919) : "fcm-\(serial):APA91b"
                    next[index].devices[slot].token = new
                    changes.append("UPDATE user_devices SET token = '\(new)' WHERE token = '\(old)'")
                }
                if roll(5), let slot = next[index].devices.indices.first(where: { next[index].devices[$0].active }) {
                    next[index].devices[slot].active = false
                    let device = next[index].devices[slot]
                    let key = device.fid.map { "fid = '\($0)'" } ?? "token = '\(device.token!)'"
                    changes.append("UPDATE user_devices SET is_active = false WHERE \(key)")
                }
                if roll(2) {
                    next[index].deleted = true
                    changes.append("DELETE FROM profiles WHERE id = '\(id)'")
                }
            }
            for user in next { for device in user.devices { tokenOwner[device.fid ?? device.token ?? ""] = user.id } }

            // The runs of the day: every instant a reminder of these zones and times falls on (local dates either
            // side of the UTC day), in order, with the writes and the day's changes between them.
            var slots = Set<Int64>()
            for zone in Self.zones {
                for offset in [-1, 0, 1] {
                    let date = Self.localDate(zone: "UTC", dayStart + Int64(offset) * Self.day)
                    for time in Self.times {
                        let at = Self.wallInstant(zone: zone, date: date, time: time)
                        if at >= dayStart && at < dayStart + Self.day { slots.insert(at) }
                    }
                }
            }
            var pendingWrites = writes.sorted { $0.at < $1.at }[...]
            var changesApplied = false
            for slot in slots.sorted() {
                var statements: [String] = []
                while let write = pendingWrites.first, write.at < slot {
                    pendingWrites.removeFirst()
                    let user = users[write.user]
                    guard !user.deleted else { continue }
                    entries[user.id, default: []].append((write.at, write.deleted))
                    statements.append(
                        "INSERT INTO entries (user_id, created_at, deleted_at) VALUES ('\(user.id)', to_timestamp(\(write.at)), \(write.deleted ? "to_timestamp(\(write.at + 60))" : "NULL"))"
                    )
                    statements.append(
                        "UPDATE user_devices SET last_seen = to_timestamp(\(write.at)) WHERE user_id = '\(user.id)' AND is_active"
                    )
                }
                if !changesApplied && changeAt < slot {
                    statements += changes
                    changesApplied = true
                    users = next
                    _ = try await janitor.run(JanitorOptions(now: changeAt + 300))
                }
                try await app(statements, at: slot - 60)

                var options = ReminderRunOptions(now: slot)
                options.pause = .off
                _ = try await runner.run(options)
                let accepted = harness.simulator.accepted()
                let now = Set(accepted[acceptedSoFar...].compactMap { tokenOwner[$0.token] })
                acceptedSoFar = accepted.count

                // The oracle, from the app's side only.
                var due = Set<String>()
                for user in users where !user.deleted && user.remindersOn && !user.activeDeviceTokens.isEmpty {
                    guard let zone = user.zone else { continue }
                    let date = Self.localDate(zone: zone, slot)
                    guard Self.wallInstant(zone: zone, date: date, time: user.reminderTime) == slot else { continue }
                    // At most one reminder a local day (a user who moved zones may meet a date again).
                    guard remindedOn["\(user.id) \(date.year!)-\(date.month!)-\(date.day!)"] == nil else { continue }
                    let wrote = (entries[user.id] ?? []).contains {
                        !$0.deleted && $0.at < slot && Self.localDate(zone: zone, $0.at) == date
                    }
                    if !wrote { due.insert(user.id) }
                }
                reminded += now.count
                for id in due.subtracting(now) {
                    missed += 1
                    mismatches.append("missed \(id) at \(Timestamps.format(slot))")
                }
                for id in now.subtracting(due) {
                    extra += 1
                    mismatches.append("extra \(id) at \(Timestamps.format(slot))")
                }
                for id in now {
                    let zone = users.first { $0.id == id }?.zone ?? "UTC"
                    let date = Self.localDate(zone: zone, slot)
                    let key = "\(id) \(date.year!)-\(date.month!)-\(date.day!)"
                    remindedOn[key, default: 0] += 1
                    if remindedOn[key]! > 1 { twice += 1 }
                }
            }
            if !changesApplied {
                _ = try await janitor.run(JanitorOptions(now: changeAt + 300))
                try await app(changes, at: changeAt)
                users = next
            }
            for write in pendingWrites where !users[write.user].deleted {
                entries[users[write.user].id, default: []].append((write.at, write.deleted))
                try await app(
                    [
                        "INSERT INTO entries (user_id, created_at, deleted_at) VALUES ('\(users[write.user].id)', to_timestamp(\(write.at)), \(write.deleted ? "to_timestamp(\(write.at + 60))" : "NULL"))"
                    ], at: write.at)
            }
            // The app's dead tokens are written back by the runs; anything else drifting is a failure.
            if path == .triggers, try await store.integrationDrift(max: 5).contains(where: { !$0.isCount }) {
                driftDays += 1
            }
        }

        // Valid devices the push schema holds inactive though the app's row is active: none. (A dead token's
        // deactivation reaches the app's row through the mirror's write-back; a webhook has no way back.)
        let appActive = Set(
            try await IntegrationTests.session(
                setup.location, ["SELECT coalesce(fid, token) FROM public.user_devices WHERE is_active"]))
        let pushInactive = Set(
            try await IntegrationTests.session(
                pushLocation, ["SELECT token FROM push.user_devices WHERE NOT is_active"]))
        let dead = Set(users.flatMap { $0.devices.filter(\.dead).compactMap(\.token) })
        let deactivated = ["\(appActive.intersection(pushInactive).subtracting(dead).count)"]
        print(
            "four months (\(path.rawValue)): users=\(users.count) reminded=\(reminded) missed=\(missed) extra=\(extra) twice=\(twice) valid_devices_deactivated=\(deactivated.first ?? "?") drift_days=\(driftDays)"
        )
        #expect(reminded > 1000)
        #expect(missed == 0 && extra == 0 && twice == 0, "\(mismatches.prefix(20).joined(separator: "\n"))")
        #expect(deactivated == ["0"] && driftDays == 0)
        // The quitters' devices were last seen by the app over 90 days ago, and are still active.
        let unseen = try await IntegrationTests.session(
            pushLocation,
            [
                "SELECT count(*)::text FROM push.user_devices WHERE is_active AND last_seen < to_timestamp(\(Self.start + 119 * Self.day - 90 * Self.day))"
            ])
        #expect(
            Int(unseen.first ?? "") ?? 0 > 0, "no device went unseen for 90 days: the janitor was not put to the test")
    }
}

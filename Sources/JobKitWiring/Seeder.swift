import Foundation
import JobKit

/// Synthetic users for demos, tests and benchmarks: spread over IANA zones roughly like an app's
/// audience, reminder times clustered in the evening, 1–3 devices each, some who wrote today.
/// The same `randomSeed` gives the same data.
package struct SeedOptions: Sendable {
    package var users: Int
    package var randomSeed: UInt64 = 1
    /// "Today" for the users who wrote today.
    package var now: Int64
    /// Make exactly `dueCount` users due at `dueAt` (reminders on, a device, no entry that day); every
    /// other user is then made not due at that instant, so the due set is exact.
    package var dueAt: Int64?
    package var dueCount = 0
    /// User ids are `prefix` + a zero-padded number.
    package var idPrefix = "user-"
    /// Share of users with an entry on their local day of `now`.
    package var wroteTodayShare = 0.2
    /// Seed a database that already has users (`pushctl seed --add`); a user of the same id is overwritten.
    /// Without it, seeding refuses such a database: synthetic users are for a demo or a benchmark, and a
    /// database with users may be production's.
    package var addToExistingUsers = false

    package init(users: Int, now: Int64) {
        self.users = users
        self.now = now
    }
}

package struct SeedReport: Sendable, Hashable, Codable {
    package var users = 0
    package var devices = 0
    package var entries = 0
    package var due = 0
}

package struct Seeder: Sendable {
    /// (zone, weight, locale)
    static let zones: [(String, Double, String)] = [
        ("America/New_York", 9, "en"), ("America/Chicago", 5, "en"), ("America/Denver", 2, "en"),
        ("America/Phoenix", 1, "en"), ("America/Los_Angeles", 6, "en"), ("America/Anchorage", 0.3, "en"),
        ("Pacific/Honolulu", 0.3, "en"), ("America/Toronto", 2, "en"), ("America/St_Johns", 0.2, "en"),
        ("America/Mexico_City", 3, "es"), ("America/Bogota", 2, "es"), ("America/Santiago", 1, "es"),
        ("America/Argentina/Buenos_Aires", 2, "es"), ("America/Sao_Paulo", 5, "pt-BR"),
        ("Europe/London", 5, "en"), ("Europe/Lisbon", 1, "pt"), ("Europe/Madrid", 3, "es"),
        ("Europe/Paris", 4, "fr"), ("Europe/Berlin", 5, "de"), ("Europe/Rome", 3, "en"),
        ("Europe/Istanbul", 2, "en"), ("Europe/Moscow", 3, "en"), ("Africa/Lagos", 2, "en"),
        ("Africa/Cairo", 2, "en"), ("Africa/Johannesburg", 1, "en"), ("Asia/Tehran", 0.5, "en"),
        ("Asia/Dubai", 1, "en"), ("Asia/Kabul", 0.1, "en"), ("Asia/Kolkata", 8, "en"),
        ("Asia/Kathmandu", 0.3, "en"), ("Asia/Dhaka", 1, "en"), ("Asia/Bangkok", 2, "en"),
        ("Asia/Jakarta", 3, "en"), ("Asia/Shanghai", 4, "en"), ("Asia/Hong_Kong", 1, "en"),
        ("Asia/Manila", 2, "en"), ("Asia/Seoul", 3, "ko"), ("Asia/Tokyo", 8, "ja"),
        ("Australia/Perth", 0.5, "en"), ("Australia/Adelaide", 0.4, "en"), ("Australia/Sydney", 2, "en"),
        ("Pacific/Auckland", 0.6, "en"), ("Pacific/Chatham", 0.05, "en"), ("Pacific/Marquesas", 0.05, "fr"),
        ("Pacific/Kiritimati", 0.05, "en"),
    ]

    package init() {}

    /// The most users one seed makes: a hundred times the largest benchmark. Synthetic users are for demos,
    /// tests and benchmarks, and a number past this is a typo that would seed until it was stopped.
    package static let maxUsers = 100_000_000

    /// What is wrong with `users` as a number of users to seed (`nil`: nothing).
    package static func usersProblem(_ users: Int) -> String? {
        (0...maxUsers).contains(users) ? nil : "must be between 0 and 100,000,000, got \(users)"
    }

    /// How many digits follow the prefix in a user id: 7, or more for ten million users and more.
    static func idWidth(users: Int) -> Int { max(7, String(users).count) }

    /// What is wrong with the ids `prefix` and `users` give (`nil`: nothing): the longest must be a user id the
    /// schema holds (``UserProfile/idProblem(_:)``).
    package static func idProblem(prefix: String, users: Int) -> String? {
        let width = idWidth(users: users)
        guard let problem = UserProfile.idProblem(prefix + String(repeating: "0", count: width)) else { return nil }
        return "the ids are the prefix and \(width) digits, and \(problem)"
    }

    package func seed(_ options: SeedOptions, into sink: any SeedSink, batchSize: Int = 5_000) async throws(JobError)
        -> SeedReport
    {
        if let problem = Self.usersProblem(options.users) { throw .usage("the number of users \(problem)") }
        guard options.dueCount >= 0, options.dueCount <= options.users else {
            throw .usage("the due count must be between 0 and the number of users (\(options.users))")
        }
        guard options.dueCount == 0 || options.dueAt != nil else { throw .usage("a due count needs a due instant") }
        if let problem = Self.idProblem(prefix: options.idPrefix, users: options.users) {
            throw .usage("the id prefix: \(problem)")
        }
        if !options.addToExistingUsers, try await sink.hasUsers() {
            throw .dataError(
                "the database already has users: synthetic users go into an empty database (pushctl seed --add adds them anyway; a user of the same id is overwritten)"
            )
        }
        var random = SplitMix64(seed: options.randomSeed)
        let clocks = Self.zones.map { ZoneClock(identifier: $0.0)! }
        let totalWeight = Self.zones.reduce(0) { $0 + $1.1 }
        var report = SeedReport()
        var batch: [SeedUser] = []
        batch.reserveCapacity(batchSize)
        // Spread the due users evenly over the id space (reproducibly).
        let dueStride = options.dueCount > 0 ? Double(options.users) / Double(options.dueCount) : 0
        var nextDue = 0.0
        let width = Self.idWidth(users: options.users)
        for number in 0..<options.users {
            var pick = Double.random(in: 0..<totalWeight, using: &random)
            var zoneIndex = 0
            while pick >= Self.zones[zoneIndex].1 && zoneIndex < Self.zones.count - 1 {
                pick -= Self.zones[zoneIndex].1
                zoneIndex += 1
            }
            let clock = clocks[zoneIndex]
            let id = options.idPrefix + LocalDate.pad(number, width)
            let isDue = options.dueCount > 0 && Double(number) >= nextDue && report.due < options.dueCount
            if isDue { nextDue += dueStride }
            var profile = UserProfile(
                id: id, timezone: clock.identifier, locale: Self.zones[zoneIndex].2,
                plan: random.next() % 5 == 0 ? "pro" : "free",
                diaryReminderEnabled: isDue || random.next() % 10 != 0,
                reminderTime: Self.reminderTime(&random).description)
            var entries: [Int64] = []
            if let dueAt = options.dueAt {
                if isDue {
                    let wall = clock.wall(at: dueAt)
                    profile.reminderTime = LocalTime(minuteOfDay: wall.secondOfDay / 60)!.description
                    report.due += 1
                } else if options.dueCount > 0 {
                    // Keep everyone else out of the due set at that instant.
                    while DueRule.default.timing(now: dueAt, reminder: LocalTime(profile.reminderTime)!, in: clock)
                        .state == .due
                    {
                        profile.reminderTime = Self.reminderTime(&random).description
                    }
                }
            }
            if !isDue && Double.random(in: 0..<1, using: &random) < options.wroteTodayShare {
                let day = clock.dayBounds(clock.wall(at: options.now).date)
                let latest = max(day.lowerBound, min(options.now, day.upperBound - 1))
                entries.append(Int64.random(in: day.lowerBound...latest, using: &random))
            }
            let deviceCount = [1, 1, 1, 1, 1, 1, 2, 2, 2, 3][Int(random.next() % 10)]
            var devices: [DeviceRegistration] = []
            for _ in 0..<deviceCount {
                devices.append(Self.device(for: id, &random))
            }
            batch.append(SeedUser(profile: profile, devices: devices, entries: entries))
            report.users += 1
            report.devices += devices.count
            report.entries += entries.count
            if batch.count == batchSize {
                try await sink.insertSeed(batch, now: options.now)
                batch.removeAll(keepingCapacity: true)
            }
        }
        if !batch.isEmpty { try await sink.insertSeed(batch, now: options.now) }
        return report
    }

    /// Mostly evening, on the quarter hour; some mornings; some any minute.
    static func reminderTime(_ random: inout SplitMix64) -> LocalTime {
        let roll = random.next() % 100
        let minute = random.next() % 5 == 0 ? Int(random.next() % 60) : [0, 15, 30, 45][Int(random.next() % 4)]
        let hour: Int
        switch roll {
        case 0..<15: return LocalTime(hour: 21, minute: 0)!
        case 15..<75: hour = 20 + Int(random.next() % 3)
        case 75..<90: hour = 7 + Int(random.next() % 2)
        default: hour = Int(random.next() % 24)
        }
        return LocalTime(hour: hour, minute: minute)!
    }

    static func device(for userID: String, _ random: inout SplitMix64) -> DeviceRegistration {
        let roll = random.next() % 100
        let hex = Array("0123456789abcdef")
        let base64url = Array("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_")
        do {
            if roll < 50 {
                let token = String((0..<64).map { _ in hex[Int(random.next() % 16)] })
                return try DeviceRegistration(
                    userID: userID, token: token, provider: .apns, platform: .ios,
                    apnsEnvironment: .production, appVersion: "3.2.0")
            }
            let token =
                String((0..<22).map { _ in base64url[Int(random.next() % 64)] }) + ":APA91b"
                + String((0..<134).map { _ in base64url[Int(random.next() % 64)] })
            return try DeviceRegistration(
                userID: userID, token: token, provider: .fcm,
                platform: roll < 55 ? .ios : .android, appVersion: "3.2.0")
        } catch {
            preconditionFailure("generated an invalid device: \(error)")
        }
    }
}

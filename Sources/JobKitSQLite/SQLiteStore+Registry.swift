import GRDB
import JobKit

extension SQLiteStore {
    /// Fails with ``JobError/unknownUser(_:)`` unless `userID` is a user: one deleted since the caller read them (an
    /// account closed meanwhile) is unknown, as at the read. Inside a write transaction, whose lock keeps the user
    /// until it ends.
    static func requireUser(_ userID: String, _ db: Database) throws {
        guard try Bool.fetchOne(db, sql: "SELECT 1 FROM users WHERE id = ?", arguments: [userID]) != nil else {
            throw JobError.unknownUser(userID)
        }
    }
}

extension SQLiteStore: DeviceRegistry {
    package func register(_ registration: DeviceRegistration, now: Int64) async throws(JobError) -> RegistrationResult {
        let reRegister = DeviceRegistration.reRegisterSetSQL(
            .sqlite, row: "user_devices",
            lastSeen: DeviceRegistration.lastSeenSQL(.sqlite, row: "user_devices", given: registration.lastSeen != nil),
            mirrored: DeviceRegistration.mirroredSQL(.sqlite, row: "user_devices"))
        return try await write("registering a device") { db in
            try Self.requireUser(registration.userID, db)
            let previous = try Row.fetchOne(
                db, sql: "SELECT user_id, is_active FROM user_devices WHERE token = ?",
                arguments: [registration.token])
            let id = try Int64.fetchOne(
                db,
                sql: """
                    INSERT INTO user_devices
                        (user_id, token, provider, platform, apns_environment, token_kind, is_active, last_seen, app_version, created_at, updated_at, mirrored)
                    VALUES (?, ?, ?, ?, ?, ?, 1, ?, ?, ?, ?, ?)
                    ON CONFLICT (token) DO UPDATE SET \(reRegister)
                    RETURNING id
                    """,
                arguments: [
                    registration.userID, registration.token, registration.provider.rawValue,
                    registration.platform.rawValue, registration.apnsEnvironment?.rawValue,
                    registration.kind.rawValue, registration.lastSeen ?? now, registration.appVersion, now, now,
                    registration.mirrored,
                ])!
            var retired = false
            if let replaced = registration.replaces {
                // Only the same user's device: naming a token is no right over another account's devices.
                try db.execute(
                    sql: """
                        UPDATE user_devices SET is_active = 0, deactivated_at = ?, deactivation_reason = ?, updated_at = ?
                        WHERE token IN (?, lower(?)) AND user_id = ? AND is_active = 1
                        """,
                    arguments: [
                        now, DeviceRegistration.replacedReason, now, replaced, replaced, registration.userID,
                    ])
                retired = db.changesCount > 0
            }
            return RegistrationResult(
                deviceID: id,
                change: .init(
                    previous: previous.map { (owner: $0[0], active: $0[1]) },
                    userID: registration.userID),
                retiredReplaced: retired)
        }
    }

    @discardableResult
    package func unregister(token: String, userID: String?, reason: String = "logout", now: Int64)
        async throws(JobError) -> Bool
    {
        try await write("unregistering a device") { db in
            try db.execute(
                sql: """
                    UPDATE user_devices SET is_active = 0, deactivated_at = ?, deactivation_reason = ?, updated_at = ?
                    WHERE token IN (?, lower(?)) AND is_active = 1 AND (? IS NULL OR user_id = ?)
                    """, arguments: [now, reason, now, token, token, userID, userID])
            return db.changesCount > 0
        }
    }
}

extension SQLiteStore: AppDataStore {
    package func upsertUser(_ profile: UserProfile, now: Int64) async throws(JobError) {
        try await write("saving a user") { db in
            try Self.upsertUser(profile, now: now, db: db)
        }
    }

    package func editUser(
        id: String, now: Int64, _ edit: @escaping @Sendable (StoredUser?) throws(JobError) -> StoredUser
    ) async throws(JobError) -> UserEditResult {
        try await write("saving a user") { db in
            let before = try Row.fetchOne(
                db,
                sql: """
                    SELECT u.timezone, u.locale, u.plan, s.user_id IS NOT NULL, s.diary_reminder_enabled, s.reminder_time,
                           s.content_limit_warnings_enabled, s.quiet_hours_start, s.quiet_hours_end
                    FROM users u LEFT JOIN notification_settings s ON s.user_id = u.id WHERE u.id = ?
                    """, arguments: [id]
            ).map { row in
                guard row[3] else {
                    return StoredUser.withoutSettings(id: id, timezone: row[0], locale: row[1], plan: row[2])
                }
                return StoredUser(
                    profile: UserProfile(
                        id: id, timezone: row[0], locale: row[1], plan: row[2], diaryReminderEnabled: row[4],
                        reminderTime: row[5], contentLimitWarningsEnabled: row[6], quietHoursStart: row[7],
                        quietHoursEnd: row[8]),
                    hasSettings: true)
            }
            let after = try edit(before)
            try Self.upsertUser(after.profile, now: now, db: db, settings: after.hasSettings)
            return UserEditResult(before: before, after: after)
        }
    }

    static func upsertUser(_ profile: UserProfile, now: Int64, db: Database, settings: Bool = true) throws {
        let user = try db.cachedStatement(
            sql: """
                INSERT INTO users (id, timezone, locale, plan, created_at, updated_at) VALUES (?, ?, ?, ?, ?, ?)
                ON CONFLICT (id) DO UPDATE SET timezone = excluded.timezone, locale = excluded.locale,
                    plan = excluded.plan, updated_at = excluded.updated_at
                """)
        try user.execute(arguments: [profile.id, profile.timezone, profile.locale, profile.plan, now, now])
        guard settings else { return }
        let settings = try db.cachedStatement(
            sql: """
                INSERT INTO notification_settings
                    (user_id, diary_reminder_enabled, reminder_time, content_limit_warnings_enabled, quiet_hours_start,
                     quiet_hours_end, updated_at)
                VALUES (?, ?, ?, ?, ?, ?, ?)
                ON CONFLICT (user_id) DO UPDATE SET diary_reminder_enabled = excluded.diary_reminder_enabled,
                    reminder_time = excluded.reminder_time,
                    content_limit_warnings_enabled = excluded.content_limit_warnings_enabled,
                    quiet_hours_start = excluded.quiet_hours_start, quiet_hours_end = excluded.quiet_hours_end,
                    updated_at = excluded.updated_at
                -- Only a change is written: updated_at says when the settings last changed, which ends a pause.
                WHERE diary_reminder_enabled IS NOT excluded.diary_reminder_enabled
                   OR reminder_time IS NOT excluded.reminder_time
                   OR content_limit_warnings_enabled IS NOT excluded.content_limit_warnings_enabled
                   OR quiet_hours_start IS NOT excluded.quiet_hours_start
                   OR quiet_hours_end IS NOT excluded.quiet_hours_end
                """)
        try settings.execute(arguments: [
            profile.id, profile.diaryReminderEnabled, profile.reminderTime,
            profile.contentLimitWarningsEnabled, profile.quietHoursStart,
            profile.quietHoursEnd, now,
        ])
    }

    package func deleteUser(id: String) async throws(JobError) -> Bool {
        try await write("deleting a user") { db in
            try db.execute(sql: "DELETE FROM users WHERE id = ?", arguments: [id])
            return db.changesCount > 0
        }
    }

    package func recordEntry(userID: String, at: Int64) async throws(JobError) {
        try await write("recording a diary entry") { db in
            try db.execute(
                sql: "INSERT INTO diary_entries (user_id, created_at) SELECT id, ? FROM users WHERE id = ?",
                arguments: [at, userID])
            guard db.changesCount == 1 else { throw JobError.unknownUser(userID) }
        }
    }
}

extension SQLiteStore: SeedSink {
    package func hasUsers() async throws(JobError) -> Bool {
        try await read("looking for users") { db in
            try Bool.fetchOne(db, sql: "SELECT EXISTS (SELECT 1 FROM users)") ?? false
        }
    }

    package func insertSeed(_ users: [SeedUser], now: Int64) async throws(JobError) {
        try await write("seeding users") { db in
            let device = try db.cachedStatement(
                sql: """
                    INSERT INTO user_devices
                        (user_id, token, provider, platform, apns_environment, token_kind, is_active, last_seen, app_version, created_at, updated_at)
                    VALUES (?, ?, ?, ?, ?, ?, 1, ?, ?, ?, ?)
                    ON CONFLICT (token) DO NOTHING
                    """)
            let entry = try db.cachedStatement(sql: "INSERT INTO diary_entries (user_id, created_at) VALUES (?, ?)")
            for user in users {
                try Self.upsertUser(user.profile, now: now, db: db)
                for registration in user.devices {
                    try device.execute(arguments: [
                        registration.userID, registration.token, registration.provider.rawValue,
                        registration.platform.rawValue, registration.apnsEnvironment?.rawValue,
                        registration.kind.rawValue, now, registration.appVersion, now, now,
                    ])
                }
                for at in user.entries {
                    try entry.execute(arguments: [user.profile.id, at])
                }
            }
        }
    }
}

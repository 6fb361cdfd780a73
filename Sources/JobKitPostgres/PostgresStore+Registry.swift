import Foundation
import JobKit
import PostgresNIO

extension PostgresStore {
    /// Fails with ``JobError/unknownUser(_:)`` unless `userID` is a user: one deleted since the caller read them (an
    /// account closed meanwhile) is unknown, as at the read. The key-share lock keeps the user until the transaction
    /// ends: a delete meanwhile waits for it (the history has no foreign key here, migration 008, and its delete
    /// trigger then removes what the transaction wrote with the user's other rows).
    static func requireUser(_ userID: String, on connection: PostgresConnection, logger: Logger) async throws {
        guard
            try await connection.query("SELECT 1 FROM users WHERE id = \(userID) FOR KEY SHARE", logger: logger)
                .collect().first != nil
        else { throw JobError.unknownUser(userID) }
    }
}

extension PostgresStore: DeviceRegistry {
    package func register(_ registration: DeviceRegistration, now: Int64) async throws(JobError) -> RegistrationResult {
        let logger = self.logger
        let reRegister = DeviceRegistration.reRegisterSetSQL(
            .postgres, row: "user_devices",
            lastSeen: DeviceRegistration.lastSeenSQL(
                .postgres, row: "user_devices", given: registration.lastSeen != nil),
            mirrored: DeviceRegistration.mirroredSQL(.postgres, row: "user_devices"))
        return try await transaction("registering a device") { connection in
            try await Self.requireUser(registration.userID, on: connection, logger: logger)
            // Locks the token's row (if any) until commit, so the change reported is the one made.
            let previous = try await connection.query(
                """
                SELECT user_id, is_active FROM user_devices WHERE token = \(registration.token) FOR UPDATE
                """, logger: logger
            ).collect().first.map { try $0.decode((String, Bool).self) }
            guard
                let row = try await connection.query(
                    """
                    INSERT INTO user_devices
                        (user_id, token, provider, platform, apns_environment, token_kind, is_active, last_seen, app_version, created_at, updated_at, mirrored)
                    VALUES (\(registration.userID), \(registration.token), \(registration.provider.rawValue), \(registration.platform.rawValue),
                            \(registration.apnsEnvironment?.rawValue), \(registration.kind.rawValue), true, to_timestamp(\(registration.lastSeen ?? now)),
                            \(registration.appVersion), to_timestamp(\(now)), to_timestamp(\(now)), \(registration.mirrored))
                    ON CONFLICT (token) DO UPDATE SET \(unescaped: reRegister)
                    RETURNING id
                    """, logger: logger
                ).collect().first
            else {
                throw JobError.software("registering a device: no id returned")
            }
            var retired = false
            if let replaced = registration.replaces {
                // Only the same user's device: naming a token is no right over another account's devices.
                retired =
                    try await connection.query(
                        """
                        UPDATE user_devices SET is_active = false, deactivated_at = to_timestamp(\(now)),
                               deactivation_reason = \(DeviceRegistration.replacedReason), updated_at = to_timestamp(\(now))
                        WHERE token IN (\(replaced), lower(\(replaced))) AND user_id = \(registration.userID) AND is_active
                        RETURNING 1
                        """, logger: logger
                    ).collect().count > 0
            }
            return RegistrationResult(
                deviceID: try row.decode(Int64.self),
                change: .init(previous: previous.map { (owner: $0.0, active: $0.1) }, userID: registration.userID),
                retiredReplaced: retired)
        }
    }

    @discardableResult
    package func unregister(token: String, userID: String?, reason: String = "logout", now: Int64)
        async throws(JobError) -> Bool
    {
        try await changed(
            "unregistering a device",
            """
            UPDATE user_devices SET is_active = false, deactivated_at = to_timestamp(\(now)), deactivation_reason = \(reason),
                   updated_at = to_timestamp(\(now))
            WHERE token IN (\(token), lower(\(token))) AND is_active AND (\(userID)::text IS NULL OR user_id = \(userID))
            RETURNING 1
            """) > 0
    }

    /// Runs a writing statement ending in `RETURNING 1` and returns how many rows it changed.
    func changed(_ context: String, _ query: PostgresQuery) async throws(JobError) -> Int {
        let logger = self.logger
        return try await transaction(context, explicit: false) { connection in
            let rows = try await connection.query(query, logger: logger)
            var count = 0
            for try await _ in rows { count += 1 }
            return count
        }
    }
}

extension PostgresStore: AppDataStore {
    package func deleteUser(id: String) async throws(JobError) -> Bool {
        try await changed("deleting a user", "DELETE FROM users WHERE id = \(id) RETURNING 1") > 0
    }

    package func upsertUser(_ profile: UserProfile, now: Int64) async throws(JobError) {
        try await insertProfiles([profile], now: now, context: "saving a user")
    }

    package func recordEntry(userID: String, at: Int64) async throws(JobError) {
        let inserted = try await write(
            "recording a diary entry",
            """
            INSERT INTO diary_entries (user_id, created_at) SELECT id, to_timestamp(\(at)) FROM users WHERE id = \(userID)
            RETURNING 1
            """)
        guard !inserted.isEmpty else { throw .unknownUser(userID) }
    }

    package func editUser(
        id: String, now: Int64, _ edit: @escaping @Sendable (StoredUser?) throws(JobError) -> StoredUser
    ) async throws(JobError) -> UserEditResult {
        let logger = self.logger
        return try await transaction("saving a user") { connection in
            let before = try await connection.query(
                """
                SELECT u.timezone, u.locale, u.plan, s.diary_reminder_enabled, s.reminder_time,
                       s.content_limit_warnings_enabled, s.quiet_hours_start, s.quiet_hours_end
                FROM users u LEFT JOIN notification_settings s ON s.user_id = u.id WHERE u.id = \(id)
                FOR UPDATE OF u
                """, logger: logger
            ).collect().first.map { row in
                let (timezone, locale, plan, reminders, time, warnings, start, end) = try row.decode(
                    (String, String, String, Bool?, String?, Bool?, String?, String?).self)
                guard let reminders, let time, let warnings else {
                    return StoredUser.withoutSettings(id: id, timezone: timezone, locale: locale, plan: plan)
                }
                return StoredUser(
                    profile: UserProfile(
                        id: id, timezone: timezone, locale: locale, plan: plan, diaryReminderEnabled: reminders,
                        reminderTime: time, contentLimitWarningsEnabled: warnings, quietHoursStart: start,
                        quietHoursEnd: end),
                    hasSettings: true)
            }
            let after = try edit(before)
            try await Self.upsertProfiles(
                Self.json([after.profile]), now: now, settings: after.hasSettings, connection: connection,
                logger: logger)
            return UserEditResult(before: before, after: after)
        }
    }

    private func insertProfiles(_ profiles: [UserProfile], now: Int64, context: String) async throws(JobError) {
        let json = Self.json(profiles)
        let logger = self.logger
        try await transaction(context) { connection in
            try await Self.upsertProfiles(json, now: now, connection: connection, logger: logger)
        }
    }

    /// The users rows of `json`'s profiles and, with `settings`, their settings rows.
    private static func upsertProfiles(
        _ json: String, now: Int64, settings: Bool = true, connection: PostgresConnection, logger: Logger
    ) async throws {
        _ = try await connection.query(
            """
            INSERT INTO users (id, timezone, locale, plan, created_at, updated_at)
            SELECT r.id, r.timezone, r.locale, r.plan, to_timestamp(\(now)), to_timestamp(\(now))
            FROM jsonb_to_recordset(\(json)::jsonb) AS r(id text, timezone text, locale text, plan text)
            ON CONFLICT (id) DO UPDATE SET timezone = excluded.timezone, locale = excluded.locale, plan = excluded.plan,
                                           updated_at = excluded.updated_at
            """, logger: logger
        ).collect()
        guard settings else { return }
        _ = try await connection.query(
            """
            INSERT INTO notification_settings
                (user_id, diary_reminder_enabled, reminder_time, content_limit_warnings_enabled, quiet_hours_start,
                 quiet_hours_end, updated_at)
            SELECT r.id, r.diary_reminder_enabled, r.reminder_time, r.content_limit_warnings_enabled, r.quiet_hours_start,
                   r.quiet_hours_end, to_timestamp(\(now))
            FROM jsonb_to_recordset(\(json)::jsonb) AS r(id text, diary_reminder_enabled boolean, reminder_time text,
                 content_limit_warnings_enabled boolean, quiet_hours_start text, quiet_hours_end text)
            ON CONFLICT (user_id) DO UPDATE SET diary_reminder_enabled = excluded.diary_reminder_enabled,
                reminder_time = excluded.reminder_time, content_limit_warnings_enabled = excluded.content_limit_warnings_enabled,
                quiet_hours_start = excluded.quiet_hours_start, quiet_hours_end = excluded.quiet_hours_end,
                updated_at = excluded.updated_at
            -- Only a change is written: updated_at says when the settings last changed, which ends a pause.
            WHERE (notification_settings.diary_reminder_enabled, notification_settings.reminder_time,
                   notification_settings.content_limit_warnings_enabled, notification_settings.quiet_hours_start,
                   notification_settings.quiet_hours_end)
                  IS DISTINCT FROM (excluded.diary_reminder_enabled, excluded.reminder_time,
                   excluded.content_limit_warnings_enabled, excluded.quiet_hours_start, excluded.quiet_hours_end)
            """, logger: logger
        ).collect()
    }
}

extension PostgresStore: SeedSink {
    package func hasUsers() async throws(JobError) -> Bool {
        try await count("looking for users", "SELECT count(*) FROM (SELECT 1 FROM users LIMIT 1) AS any_user") > 0
    }

    /// A batch of generated users in one transaction and four statements.
    package func insertSeed(_ users: [SeedUser], now: Int64) async throws(JobError) {
        struct DeviceRow: Encodable {
            let user_id, token, provider, platform, token_kind: String
            let apns_environment, app_version: String?
        }
        struct EntryRow: Encodable { let user_id: String, at: Int64 }
        let profiles = Self.json(users.map(\.profile))
        let devices = Self.json(
            users.flatMap { user in
                user.devices.map {
                    DeviceRow(
                        user_id: $0.userID, token: $0.token, provider: $0.provider.rawValue,
                        platform: $0.platform.rawValue, token_kind: $0.kind.rawValue,
                        apns_environment: $0.apnsEnvironment?.rawValue, app_version: $0.appVersion)
                }
            })
        let entries = Self.json(
            users.flatMap { user in user.entries.map { EntryRow(user_id: user.profile.id, at: $0) } })
        let logger = self.logger
        try await transaction("seeding users") { connection in
            try await Self.upsertProfiles(profiles, now: now, connection: connection, logger: logger)
            _ = try await connection.query(
                """
                INSERT INTO user_devices
                    (user_id, token, provider, platform, apns_environment, token_kind, is_active, last_seen, app_version,
                     created_at, updated_at)
                SELECT r.user_id, r.token, r.provider, r.platform, r.apns_environment, r.token_kind, true, to_timestamp(\(now)),
                       r.app_version, to_timestamp(\(now)), to_timestamp(\(now))
                FROM jsonb_to_recordset(\(devices)::jsonb) AS r(user_id text, token text, provider text, platform text,
                     token_kind text, apns_environment text, app_version text)
                ON CONFLICT (token) DO NOTHING
                """, logger: logger
            ).collect()
            _ = try await connection.query(
                """
                INSERT INTO diary_entries (user_id, created_at)
                SELECT r.user_id, to_timestamp(r.at) FROM jsonb_to_recordset(\(entries)::jsonb) AS r(user_id text, at int8)
                """, logger: logger
            ).collect()
        }
    }
}

extension PostgresStore: CredentialStore {
    package func cachedCredential(key: String) async throws(JobError) -> CachedCredential? {
        try await rows(
            "reading a provider credential",
            """
            SELECT token, \(unescaped: Self.epoch("issued_at")), \(unescaped: Self.epoch("expires_at"))
            FROM provider_credentials WHERE credential_key = \(key) AND token IS NOT NULL
            """
        ).first.map { row throws(JobError) in
            let (token, issuedAt, expiresAt) = try decode(row, (String, Int64, Int64).self)
            return CachedCredential(token: token, issuedAt: issuedAt, expiresAt: expiresAt)
        }
    }

    /// The credential's row is locked (`FOR UPDATE`) while the decision is made, so of a fleet of runners
    /// exactly one takes the mint lease; the others use the fresh token or wait for it.
    package func beginMint(
        key: String, holder: String, now: Int64, leaseSeconds: Int64,
        isFresh: @escaping @Sendable (CachedCredential) -> Bool
    ) async throws(JobError) -> MintDecision {
        let logger = self.logger
        return try await transaction("leasing a provider credential") { connection in
            _ = try await connection.query(
                """
                INSERT INTO provider_credentials (credential_key, updated_at) VALUES (\(key), to_timestamp(\(now)))
                ON CONFLICT (credential_key) DO NOTHING
                """, logger: logger
            ).collect()
            guard
                let row = try await connection.query(
                    """
                    SELECT token, \(unescaped: Self.epoch("issued_at")), \(unescaped: Self.epoch("expires_at")), minting_by,
                           \(unescaped: Self.epoch("minting_until"))
                    FROM provider_credentials WHERE credential_key = \(key) FOR UPDATE
                    """, logger: logger
                ).collect().first
            else {
                throw JobError.software("leasing a provider credential: the row vanished")
            }
            let (token, issuedAt, expiresAt, by, until) = try row.decode(
                (String?, Int64?, Int64?, String?, Int64?).self)
            if let token, let issuedAt, let expiresAt {
                let credential = CachedCredential(token: token, issuedAt: issuedAt, expiresAt: expiresAt)
                if isFresh(credential) { return MintDecision.use(credential) }
            }
            if let by, by != holder, let until, until > now {
                return MintDecision.wait
            }
            _ = try await connection.query(
                """
                UPDATE provider_credentials SET minting_by = \(holder), minting_until = to_timestamp(\(now + leaseSeconds)),
                       updated_at = to_timestamp(\(now))
                WHERE credential_key = \(key)
                """, logger: logger
            ).collect()
            return MintDecision.mint
        }
    }

    package func finishMint(key: String, holder: String, credential: CachedCredential) async throws(JobError) {
        _ = try await write(
            "storing a provider credential",
            """
            UPDATE provider_credentials
            SET token = \(credential.token), issued_at = to_timestamp(\(credential.issuedAt)),
                expires_at = to_timestamp(\(credential.expiresAt)), minting_by = NULL, minting_until = NULL,
                updated_at = to_timestamp(\(credential.issuedAt))
            WHERE credential_key = \(key)
            """)
    }

    package func abandonMint(key: String, holder: String) async throws(JobError) {
        _ = try await write(
            "releasing a provider credential lease",
            """
            UPDATE provider_credentials SET minting_by = NULL, minting_until = NULL
            WHERE credential_key = \(key) AND minting_by = \(holder)
            """)
    }
}

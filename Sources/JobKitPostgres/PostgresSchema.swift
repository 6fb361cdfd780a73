import Foundation

/// The versioned schema of the PostgreSQL store: the same migrations (same identifiers, same tables,
/// rules and indexes) as the SQLite store, in PostgreSQL's types: `timestamptz` for instants, `boolean`
/// for flags, `jsonb` for JSON, identity columns for ids. Keys compared by range (ids, zones, period keys)
/// use the "C" collation, so ordering is by bytes, as in SQLite, whatever the database's locale.
/// `docs/SCHEMA.md` documents both.
enum PostgresSchema {
    struct Migration {
        let id: String
        let sql: String
    }

    /// Serializes migrations between processes (`pg_advisory_xact_lock`).
    static let migrationLockKey: Int64 = 0x6469_6172_7970_7573 // "diarypus"

    /// A migration's statements, one by one (the extended protocol takes one per message): split at a `;`
    /// ending a line, except inside a `$$` function body.
    static func statements(_ sql: String) -> [String] {
        var statements: [String] = []
        var current: [Substring] = []
        var inBody = false
        for line in sql.split(separator: "\n", omittingEmptySubsequences: false) {
            current.append(line)
            if line.components(separatedBy: "$$").count % 2 == 0 { inBody.toggle() }
            if !inBody && line.trimmingCharacters(in: .whitespaces).hasSuffix(";") {
                statements.append(current.joined(separator: "\n"))
                current = []
            }
        }
        let rest = current.joined(separator: "\n").trimmingCharacters(in: .whitespacesAndNewlines)
        if !rest.isEmpty { statements.append(rest) }
        return statements
    }

    static let migrations: [Migration] = [
        Migration(id: "001_initial", sql: v1),
        Migration(id: "002_provider_credentials", sql: v2),
        Migration(id: "003_quiet_hours_and_deferred", sql: v3),
        Migration(id: "004_janitor_indexes", sql: v4),
        Migration(id: "005_drop_unused_status_index", sql: v5),
    ]

    static let v1 = #"""
    CREATE TABLE users (
        id         text COLLATE "C" PRIMARY KEY CHECK (length(id) BETWEEN 1 AND 128),
        timezone   text COLLATE "C" NOT NULL,                         -- IANA name, e.g. Asia/Tokyo
        locale     text NOT NULL DEFAULT 'en' CHECK (locale <> ''),   -- BCP 47, e.g. ja, pt-BR
        plan       text NOT NULL DEFAULT 'free' CHECK (plan <> ''),
        created_at timestamptz NOT NULL DEFAULT now(),
        updated_at timestamptz NOT NULL DEFAULT now()
    );

    CREATE TABLE notification_settings (
        user_id                        text COLLATE "C" PRIMARY KEY REFERENCES users(id) ON DELETE CASCADE,
        diary_reminder_enabled         boolean NOT NULL DEFAULT true,
        reminder_time                  text NOT NULL DEFAULT '21:00',  -- local HH:MM
        content_limit_warnings_enabled boolean NOT NULL DEFAULT true,
        updated_at                     timestamptz NOT NULL DEFAULT now(),
        -- Maintained by the database (triggers below): a copy of users.timezone, so that one index
        -- answers "whose reminder time has come in this zone".
        timezone                       text COLLATE "C" NOT NULL DEFAULT '',
        reminder_minute                integer GENERATED ALWAYS AS (
            CASE WHEN reminder_time ~ '^([01][0-9]|2[0-3]):[0-5][0-9]$'
                 THEN substr(reminder_time, 1, 2)::integer * 60 + substr(reminder_time, 4, 2)::integer
            END) STORED
    );

    CREATE INDEX notification_settings_due
        ON notification_settings (timezone, reminder_minute, user_id) WHERE diary_reminder_enabled;

    CREATE FUNCTION notification_settings_copy_timezone() RETURNS trigger LANGUAGE plpgsql AS $$
    BEGIN
        NEW.timezone := coalesce((SELECT timezone FROM users WHERE id = NEW.user_id), '');
        RETURN NEW;
    END
    $$;
    CREATE TRIGGER notification_settings_timezone BEFORE INSERT OR UPDATE ON notification_settings
        FOR EACH ROW EXECUTE FUNCTION notification_settings_copy_timezone();

    CREATE FUNCTION users_timezone_to_settings() RETURNS trigger LANGUAGE plpgsql AS $$
    BEGIN
        UPDATE notification_settings SET timezone = NEW.timezone WHERE user_id = NEW.id;
        RETURN NULL;
    END
    $$;
    CREATE TRIGGER users_timezone_to_settings AFTER UPDATE OF timezone ON users
        FOR EACH ROW WHEN (OLD.timezone IS DISTINCT FROM NEW.timezone) EXECUTE FUNCTION users_timezone_to_settings();

    CREATE TABLE user_devices (
        id                  bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
        user_id             text COLLATE "C" NOT NULL REFERENCES users(id) ON DELETE CASCADE,
        -- 2,000 rather than SQLite's 4,096: a B-tree entry must stay under about 2.7 kB. Real tokens are
        -- 64 (APNs) to about 200 (FCM) characters.
        token               text NOT NULL UNIQUE CHECK (length(token) BETWEEN 1 AND 2000),
        provider            text NOT NULL CHECK (provider IN ('apns', 'fcm')),
        platform            text NOT NULL CHECK (platform IN ('ios', 'android')),
        apns_environment    text CHECK (apns_environment IN ('production', 'sandbox')),
        is_active           boolean NOT NULL DEFAULT true,
        last_seen           timestamptz NOT NULL,
        app_version         text,
        created_at          timestamptz NOT NULL DEFAULT now(),
        updated_at          timestamptz NOT NULL DEFAULT now(),
        deactivated_at      timestamptz,
        deactivation_reason text,
        CHECK (provider <> 'apns' OR (platform = 'ios' AND apns_environment IS NOT NULL)),
        CHECK ((is_active AND deactivated_at IS NULL) OR (NOT is_active AND deactivated_at IS NOT NULL))
    );
    CREATE INDEX user_devices_active_by_user ON user_devices (user_id) WHERE is_active;

    CREATE TABLE diary_entries (
        id         bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
        user_id    text COLLATE "C" NOT NULL REFERENCES users(id) ON DELETE CASCADE,
        created_at timestamptz NOT NULL
    );
    CREATE INDEX diary_entries_by_user_time ON diary_entries (user_id, created_at);

    CREATE TABLE notification_logs (
        id                bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
        user_id           text COLLATE "C" NOT NULL REFERENCES users(id) ON DELETE CASCADE,
        notification_type text COLLATE "C" NOT NULL
                          CHECK (notification_type IN ('diary_reminder', 'content_limit_90', 'content_limit_100')),
        period_key        text COLLATE "C" NOT NULL CHECK (length(period_key) BETWEEN 4 AND 10),
        status            text NOT NULL
                          CHECK (status IN ('claimed', 'sent', 'partial', 'failed', 'retry', 'deferred', 'superseded')),
        message_index     integer,
        locale            text,
        run_id            text NOT NULL,
        attempts          integer NOT NULL DEFAULT 1 CHECK (attempts >= 1),
        claimed_at        timestamptz NOT NULL,
        finished_at       timestamptz,
        updated_at        timestamptz NOT NULL,
        detail            text,
        UNIQUE (user_id, notification_type, period_key)
    );
    CREATE INDEX notification_logs_by_status ON notification_logs (status, claimed_at);
    CREATE INDEX notification_logs_by_claimed_at ON notification_logs (claimed_at);

    CREATE TABLE notification_deliveries (
        id                  bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
        log_id              bigint NOT NULL REFERENCES notification_logs(id) ON DELETE CASCADE,
        device_id           bigint REFERENCES user_devices(id) ON DELETE SET NULL,
        provider            text NOT NULL CHECK (provider IN ('apns', 'fcm', 'outbox')),
        outcome             text NOT NULL
                            CHECK (outcome IN ('delivered', 'token_dead', 'retry_later', 'credentials', 'rejected')),
        reason              text,
        provider_message_id text,
        attempts            integer NOT NULL DEFAULT 1 CHECK (attempts >= 1),
        latency_ms          integer,
        run_id              text NOT NULL,
        created_at          timestamptz NOT NULL
    );
    CREATE INDEX notification_deliveries_by_log ON notification_deliveries (log_id);
    CREATE INDEX notification_deliveries_by_created_at ON notification_deliveries (created_at);
    CREATE INDEX notification_deliveries_by_device ON notification_deliveries (device_id);

    CREATE TABLE job_runs (
        id          text PRIMARY KEY,
        job         text COLLATE "C" NOT NULL,
        run_at      timestamptz NOT NULL,           -- the instant the run evaluated (--now)
        duration_ms integer,
        outcome     text NOT NULL CHECK (outcome IN ('running', 'ok', 'failed')),
        summary     jsonb                           -- the run's JSON summary
    );
    CREATE INDEX job_runs_by_job ON job_runs (job, run_at);
    """#

    static let v2 = """
    CREATE TABLE provider_credentials (
        credential_key text PRIMARY KEY,   -- apns:<team>:<key id>, fcm:<client email>
        token          text,               -- secret: never logged
        issued_at      timestamptz,
        expires_at     timestamptz,
        minting_by     text,
        minting_until  timestamptz,
        updated_at     timestamptz NOT NULL
    );
    """

    static let v3 = """
    ALTER TABLE notification_settings ADD COLUMN quiet_hours_start text;
    ALTER TABLE notification_settings ADD COLUMN quiet_hours_end text;
    ALTER TABLE notification_logs ADD COLUMN deliver_after timestamptz;
    ALTER TABLE notification_logs ADD COLUMN params jsonb;
    CREATE INDEX notification_logs_pending_warnings ON notification_logs (claimed_at)
        WHERE notification_type <> 'diary_reminder' AND status IN ('deferred', 'retry', 'claimed');
    """

    static let v4 = """
    CREATE INDEX user_devices_active_by_last_seen ON user_devices (last_seen) WHERE is_active;
    CREATE INDEX user_devices_inactive_by_time ON user_devices (deactivated_at) WHERE NOT is_active;
    """

    static let v5 = """
    DROP INDEX IF EXISTS notification_logs_by_status;
    """
}

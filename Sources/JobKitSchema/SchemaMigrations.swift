/// Every schema migration of both stores, in order: an identifier and its SQLite and PostgreSQL forms side by
/// side, so that the two schemas move together. SQLite keeps instants as whole Unix seconds (INTEGER, UTC), flags as
/// 0/1 and JSON as text; PostgreSQL uses `timestamptz`, `boolean`, `jsonb` and identity columns, and the "C"
/// collation for keys compared by range (ids, zones, period keys), so that ordering is by bytes as in SQLite. A
/// migration one store does not need has an empty form there and is still recorded as applied: both stores
/// reach the same version. `docs/SCHEMA.md` documents every table; keep the two in step.
package struct SchemaMigration: Sendable {
    package let id: String
    package let sqlite: String
    package let postgres: String
}

package enum SchemaMigrations {
    package static let all: [SchemaMigration] = [
        m001, m002, m003, m004, m005, m006, m007, m008, m009, m010, m011, m012, m013, m014, m015, m016, m017, m018,
        m019, m020,
    ]

    /// Columns that one store has and the other has not (`table.column`, by store): each is explained at its
    /// migration. Apart from these, both stores have the same tables and columns at every version.
    package static let storeSpecificColumns: [String: Set<String>] = [
        "sqlite": ["notification_settings.due_minute"],
        "postgres": [],
    ]

    /// Timestamps are whole Unix seconds (INTEGER, UTC), e.g. `unixepoch()`.
    static let m001 = SchemaMigration(
        id: "001_initial",
        sqlite: """
            CREATE TABLE users (
                id         TEXT PRIMARY KEY NOT NULL CHECK (length(id) BETWEEN 1 AND 128),
                timezone   TEXT NOT NULL,                                   -- IANA name, e.g. Asia/Tokyo
                locale     TEXT NOT NULL DEFAULT 'en' CHECK (locale <> ''), -- BCP 47, e.g. ja, pt-BR
                plan       TEXT NOT NULL DEFAULT 'free' CHECK (plan <> ''),
                created_at INTEGER NOT NULL DEFAULT (unixepoch()),
                updated_at INTEGER NOT NULL DEFAULT (unixepoch())
            ) WITHOUT ROWID;

            CREATE TABLE notification_settings (
                user_id                        TEXT PRIMARY KEY NOT NULL REFERENCES users(id) ON DELETE CASCADE,
                diary_reminder_enabled         INTEGER NOT NULL DEFAULT 1 CHECK (diary_reminder_enabled IN (0, 1)),
                reminder_time                  TEXT NOT NULL DEFAULT '21:00',  -- local HH:MM
                content_limit_warnings_enabled INTEGER NOT NULL DEFAULT 1 CHECK (content_limit_warnings_enabled IN (0, 1)),
                updated_at                     INTEGER NOT NULL DEFAULT (unixepoch()),
                -- Maintained by the database (triggers below): a copy of users.timezone, so that one index
                -- answers "whose reminder time has come in this zone".
                timezone                       TEXT NOT NULL DEFAULT '',
                reminder_minute                INTEGER GENERATED ALWAYS AS (
                    CASE WHEN reminder_time GLOB '[0-2][0-9]:[0-5][0-9]' AND substr(reminder_time, 1, 2) <= '23'
                         THEN CAST(substr(reminder_time, 1, 2) AS INTEGER) * 60 + CAST(substr(reminder_time, 4, 2) AS INTEGER)
                    END) VIRTUAL
            ) WITHOUT ROWID;

            CREATE INDEX notification_settings_due
                ON notification_settings (timezone, reminder_minute, user_id) WHERE diary_reminder_enabled = 1;

            CREATE TRIGGER notification_settings_timezone_on_insert AFTER INSERT ON notification_settings
            BEGIN
                UPDATE notification_settings SET timezone = (SELECT timezone FROM users WHERE id = NEW.user_id)
                WHERE user_id = NEW.user_id;
            END;

            CREATE TRIGGER notification_settings_timezone_guard AFTER UPDATE OF timezone, user_id ON notification_settings
            WHEN NEW.timezone IS NOT (SELECT timezone FROM users WHERE id = NEW.user_id)
            BEGIN
                UPDATE notification_settings SET timezone = (SELECT timezone FROM users WHERE id = NEW.user_id)
                WHERE user_id = NEW.user_id;
            END;

            CREATE TRIGGER users_timezone_to_settings AFTER UPDATE OF timezone ON users
            BEGIN
                UPDATE notification_settings SET timezone = NEW.timezone WHERE user_id = NEW.id;
            END;

            CREATE TABLE user_devices (
                id                  INTEGER PRIMARY KEY,
                user_id             TEXT NOT NULL REFERENCES users(id) ON DELETE CASCADE,
                token               TEXT NOT NULL UNIQUE CHECK (length(token) BETWEEN 1 AND 4096),
                provider            TEXT NOT NULL CHECK (provider IN ('apns', 'fcm')),
                platform            TEXT NOT NULL CHECK (platform IN ('ios', 'android')),
                apns_environment    TEXT CHECK (apns_environment IN ('production', 'sandbox')),
                is_active           INTEGER NOT NULL DEFAULT 1 CHECK (is_active IN (0, 1)),
                last_seen           INTEGER NOT NULL,
                app_version         TEXT,
                created_at          INTEGER NOT NULL,
                updated_at          INTEGER NOT NULL,
                deactivated_at      INTEGER,
                deactivation_reason TEXT,
                CHECK (provider <> 'apns' OR (platform = 'ios' AND apns_environment IS NOT NULL)),
                CHECK ((is_active = 1 AND deactivated_at IS NULL) OR (is_active = 0 AND deactivated_at IS NOT NULL))
            );
            CREATE INDEX user_devices_active_by_user ON user_devices (user_id) WHERE is_active = 1;

            CREATE TABLE diary_entries (
                id         INTEGER PRIMARY KEY,
                user_id    TEXT NOT NULL REFERENCES users(id) ON DELETE CASCADE,
                created_at INTEGER NOT NULL CHECK (typeof(created_at) = 'integer')   -- UTC Unix seconds
            );
            CREATE INDEX diary_entries_by_user_time ON diary_entries (user_id, created_at);

            CREATE TABLE notification_logs (
                id                INTEGER PRIMARY KEY,
                user_id           TEXT NOT NULL REFERENCES users(id) ON DELETE CASCADE,
                notification_type TEXT NOT NULL CHECK (notification_type IN ('diary_reminder', 'content_limit_90', 'content_limit_100')),
                period_key        TEXT NOT NULL CHECK (length(period_key) BETWEEN 4 AND 10),
                status            TEXT NOT NULL CHECK (status IN ('claimed', 'sent', 'partial', 'failed', 'retry', 'deferred', 'superseded')),
                message_index     INTEGER,
                locale            TEXT,
                run_id            TEXT NOT NULL,
                attempts          INTEGER NOT NULL DEFAULT 1 CHECK (attempts >= 1),
                claimed_at        INTEGER NOT NULL,
                finished_at       INTEGER,
                updated_at        INTEGER NOT NULL,
                detail            TEXT,
                UNIQUE (user_id, notification_type, period_key)
            );
            CREATE INDEX notification_logs_by_status ON notification_logs (status, claimed_at);
            CREATE INDEX notification_logs_by_claimed_at ON notification_logs (claimed_at);

            CREATE TABLE notification_deliveries (
                id                  INTEGER PRIMARY KEY,
                log_id              INTEGER NOT NULL REFERENCES notification_logs(id) ON DELETE CASCADE,
                device_id           INTEGER REFERENCES user_devices(id) ON DELETE SET NULL,
                provider            TEXT NOT NULL CHECK (provider IN ('apns', 'fcm', 'outbox')),
                outcome             TEXT NOT NULL CHECK (outcome IN ('delivered', 'token_dead', 'retry_later', 'credentials', 'rejected')),
                reason              TEXT,
                provider_message_id TEXT,
                attempts            INTEGER NOT NULL DEFAULT 1 CHECK (attempts >= 1),
                latency_ms          INTEGER,
                run_id              TEXT NOT NULL,
                created_at          INTEGER NOT NULL
            );
            CREATE INDEX notification_deliveries_by_log ON notification_deliveries (log_id);
            CREATE INDEX notification_deliveries_by_created_at ON notification_deliveries (created_at);

            CREATE TABLE job_runs (
                id          TEXT PRIMARY KEY NOT NULL,
                job         TEXT NOT NULL,
                run_at      INTEGER NOT NULL,             -- the instant the run evaluated (--now)
                duration_ms INTEGER,
                outcome     TEXT NOT NULL CHECK (outcome IN ('running', 'ok', 'failed')),
                summary     TEXT                          -- the run's JSON summary
            ) WITHOUT ROWID;
            CREATE INDEX job_runs_by_job ON job_runs (job, run_at);
            """,
        postgres: #"""
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
            """#)

    /// Provider credentials shared by every run: the current APNs provider JWT and FCM access token, and
    /// the lease that lets exactly one run mint a new one.
    static let m002 = SchemaMigration(
        id: "002_provider_credentials",
        sqlite: """
            CREATE TABLE provider_credentials (
                credential_key TEXT PRIMARY KEY NOT NULL,   -- apns:<team>:<key id>, fcm:<client email>
                token          TEXT,                        -- secret: never logged
                issued_at      INTEGER,
                expires_at     INTEGER,
                minting_by     TEXT,
                minting_until  INTEGER,
                updated_at     INTEGER NOT NULL
            ) WITHOUT ROWID;
            """,
        postgres: """
            CREATE TABLE provider_credentials (
                credential_key text PRIMARY KEY,   -- apns:<team>:<key id>, fcm:<client email>
                token          text,               -- secret: never logged
                issued_at      timestamptz,
                expires_at     timestamptz,
                minting_by     text,
                minting_until  timestamptz,
                updated_at     timestamptz NOT NULL
            );
            """)

    /// Quiet hours (local `HH:MM`, may span midnight) and deferred notifications: a quota warning that comes
    /// due inside quiet hours is stored `deferred` with `deliver_after`, and a diary-reminder run delivers it.
    /// `params` keeps the numbers a message shows ("27 of 30") as a JSON object of strings.
    static let m003 = SchemaMigration(
        id: "003_quiet_hours_and_deferred",
        sqlite: """
            ALTER TABLE notification_settings ADD COLUMN quiet_hours_start TEXT;
            ALTER TABLE notification_settings ADD COLUMN quiet_hours_end TEXT;
            ALTER TABLE notification_logs ADD COLUMN deliver_after INTEGER;
            ALTER TABLE notification_logs ADD COLUMN params TEXT;
            -- Quota warnings still to deliver: deferred past quiet hours, left for retry, or claimed by a hook that died.
            CREATE INDEX notification_logs_pending_warnings ON notification_logs (claimed_at)
                WHERE notification_type <> 'diary_reminder' AND status IN ('deferred', 'retry', 'claimed');
            """,
        postgres: """
            ALTER TABLE notification_settings ADD COLUMN quiet_hours_start text;
            ALTER TABLE notification_settings ADD COLUMN quiet_hours_end text;
            ALTER TABLE notification_logs ADD COLUMN deliver_after timestamptz;
            ALTER TABLE notification_logs ADD COLUMN params jsonb;
            CREATE INDEX notification_logs_pending_warnings ON notification_logs (claimed_at)
                WHERE notification_type <> 'diary_reminder' AND status IN ('deferred', 'retry', 'claimed');
            """)

    /// The janitor's batches are range scans: stale active devices by last_seen, inactive ones by when.
    static let m004 = SchemaMigration(
        id: "004_janitor_indexes",
        sqlite: """
            CREATE INDEX user_devices_active_by_last_seen ON user_devices (last_seen) WHERE is_active = 1;
            CREATE INDEX user_devices_inactive_by_time ON user_devices (deactivated_at) WHERE is_active = 0;
            """,
        postgres: """
            CREATE INDEX user_devices_active_by_last_seen ON user_devices (last_seen) WHERE is_active;
            CREATE INDEX user_devices_inactive_by_time ON user_devices (deactivated_at) WHERE NOT is_active;
            """)

    /// `notification_logs (status, claimed_at)` answered no query (the janitor and the report go by
    /// `claimed_at`, pending warnings have their own partial index, claims go by the unique key), yet every
    /// claim inserted into it and every resolution moved an entry: a third of the index work of a reminder
    /// run's writes.
    static let m005 = SchemaMigration(
        id: "005_drop_unused_status_index",
        sqlite: """
            DROP INDEX IF EXISTS notification_logs_by_status;
            """,
        postgres: """
            DROP INDEX IF EXISTS notification_logs_by_status;
            """)

    /// Makes `notification_settings_due` a covering index, so that reading a run's due ids touches the index
    /// alone. SQLite (3.40) looked up the settings row of every index entry: it takes a query that names a
    /// generated column to use every column of the table, and it needs the partial index's condition column in
    /// the index. So `due_minute` is a plain copy of `reminder_minute`, kept by triggers like the zone copy,
    /// and the index holds it and `diary_reminder_enabled`. Reading 100,000 due ids of a 1M-user file went from
    /// ~73,000 page reads to ~730 (BENCHMARKS.md#the-due-index-and-the-log-look-up).
    /// PostgreSQL needs nothing here: its due index is on the stored generated column `reminder_minute`, and it
    /// has no such limitation around generated columns, so `due_minute` exists in SQLite only.
    static let m006 = SchemaMigration(
        id: "006_covering_due_index",
        sqlite: """
            ALTER TABLE notification_settings ADD COLUMN due_minute INTEGER;
            UPDATE notification_settings SET due_minute = reminder_minute;
            DROP INDEX notification_settings_due;
            CREATE INDEX notification_settings_due
                ON notification_settings (timezone, due_minute, user_id, diary_reminder_enabled) WHERE diary_reminder_enabled = 1;

            -- A new row gets both copies in one update.
            DROP TRIGGER notification_settings_timezone_on_insert;
            CREATE TRIGGER notification_settings_copies_on_insert AFTER INSERT ON notification_settings
            BEGIN
                UPDATE notification_settings
                SET timezone = (SELECT timezone FROM users WHERE id = NEW.user_id), due_minute = NEW.reminder_minute
                WHERE user_id = NEW.user_id;
            END;

            -- A new reminder time moves the copy; a direct write to the copy is put back.
            CREATE TRIGGER notification_settings_due_minute_guard AFTER UPDATE OF reminder_time, due_minute ON notification_settings
            WHEN NEW.due_minute IS NOT NEW.reminder_minute
            BEGIN
                UPDATE notification_settings SET due_minute = NEW.reminder_minute WHERE user_id = NEW.user_id;
            END;
            """,
        postgres: "")

    /// ``DeviceToken``'s rule over `NEW.token` and `NEW.provider`, for SQLite's triggers.
    static let sqliteTokenShape = """
        (NEW.provider = 'apns' AND length(NEW.token) % 2 = 0 AND length(NEW.token) BETWEEN 2 AND 200
         AND NEW.token NOT GLOB '*[^0-9a-f]*')
        OR (NEW.provider = 'fcm' AND length(NEW.token) BETWEEN 1 AND 2000 AND NEW.token NOT GLOB '*[^A-Za-z0-9_:-]*')
        """

    /// Device tokens of the shape ``DeviceToken`` states (the one rule; this is its SQL form, and
    /// `DeviceTokenShapeTests` checks the two agree on both stores): APNs lower-case hex of even length up to 200
    /// digits, FCM 1–2,000 of `A-Z a-z 0-9 - _ :`. Checked on every insert and on every change of the token or
    /// provider. Rows already stored are left as they are (SQLite triggers check new writes; PostgreSQL's
    /// constraint is `NOT VALID`): the jobs never send such a row and deactivate it (`invalid_token`).
    static let m007 = SchemaMigration(
        id: "007_device_token_shape",
        sqlite: """
            CREATE TRIGGER user_devices_token_shape_on_insert BEFORE INSERT ON user_devices
            WHEN NOT (\(sqliteTokenShape))
            BEGIN
                SELECT RAISE(ABORT, 'user_devices.token: not a valid device token for its provider');
            END;
            CREATE TRIGGER user_devices_token_shape_on_update BEFORE UPDATE OF token, provider ON user_devices
            WHEN NOT (\(sqliteTokenShape))
            BEGIN
                SELECT RAISE(ABORT, 'user_devices.token: not a valid device token for its provider');
            END;
            """,
        postgres: """
            ALTER TABLE user_devices ADD CONSTRAINT user_devices_token_shape CHECK (
                (provider = 'apns' AND length(token) % 2 = 0 AND length(token) BETWEEN 2 AND 200 AND token ~ '^[0-9a-f]+$')
                OR (provider = 'fcm' AND length(token) BETWEEN 1 AND 2000 AND token ~ '^[A-Za-z0-9_:-]+$')
            ) NOT VALID;
            """)

    /// PostgreSQL: the history's three foreign keys (a log row's user, a delivery row's log row and device)
    /// become statement-level triggers that do what their `ON DELETE` actions did (a deleted user takes their
    /// log rows with them, a deleted log row its delivery rows; a deleted device leaves its delivery rows with
    /// `device_id` NULL), once per deleting statement instead of one lookup per inserted row. A reminder run
    /// writes a log row per user and a delivery row per device, and those lookups were 57 % of the time of the
    /// delivery inserts (10 of 20 ms for 1,000 rows, `EXPLAIN ANALYZE` at 1,000,000 users) and 6 % of the whole
    /// run (BENCHMARKS.md#postgresqls-page-statements). The jobs write history rows only for users, log rows and devices they have just
    /// read; a row written while its user's account is being deleted is left to the janitor's retention (with a
    /// foreign key, that claim would have failed its whole page).
    /// SQLite keeps its foreign keys: they are checked in the job's own process, at a fraction of the cost.
    static let m008 = SchemaMigration(
        id: "008_history_references_by_trigger",
        sqlite: "",
        postgres: """
            ALTER TABLE notification_logs DROP CONSTRAINT IF EXISTS notification_logs_user_id_fkey;
            ALTER TABLE notification_deliveries
                DROP CONSTRAINT IF EXISTS notification_deliveries_log_id_fkey,
                DROP CONSTRAINT IF EXISTS notification_deliveries_device_id_fkey;

            CREATE FUNCTION notification_logs_of_deleted_users() RETURNS trigger LANGUAGE plpgsql AS $$
            BEGIN
                DELETE FROM notification_logs l USING deleted_users o WHERE l.user_id = o.id;
                RETURN NULL;
            END $$;
            CREATE TRIGGER users_delete_notification_logs AFTER DELETE ON users
                REFERENCING OLD TABLE AS deleted_users FOR EACH STATEMENT
                EXECUTE FUNCTION notification_logs_of_deleted_users();

            CREATE FUNCTION notification_deliveries_of_deleted_logs() RETURNS trigger LANGUAGE plpgsql AS $$
            BEGIN
                DELETE FROM notification_deliveries d USING deleted_logs o WHERE d.log_id = o.id;
                RETURN NULL;
            END $$;
            CREATE TRIGGER notification_logs_delete_deliveries AFTER DELETE ON notification_logs
                REFERENCING OLD TABLE AS deleted_logs FOR EACH STATEMENT
                EXECUTE FUNCTION notification_deliveries_of_deleted_logs();

            CREATE FUNCTION notification_deliveries_of_deleted_devices() RETURNS trigger LANGUAGE plpgsql AS $$
            BEGIN
                UPDATE notification_deliveries d SET device_id = NULL FROM deleted_devices o WHERE d.device_id = o.id;
                RETURN NULL;
            END $$;
            CREATE TRIGGER user_devices_delete_delivery_references AFTER DELETE ON user_devices
                REFERENCING OLD TABLE AS deleted_devices FOR EACH STATEMENT
                EXECUTE FUNCTION notification_deliveries_of_deleted_devices();
            """)

    /// PostgreSQL: the history tables become partitioned (``HistoryPartition``), so that the janitor retires a
    /// month of history by dropping its partition instead of deleting its rows one batch at a time
    /// (BENCHMARKS.md#retention-by-partition). `notification_logs` by period key, `notification_deliveries` by UTC month of
    /// `created_at`; ids come from sequences (PostgreSQL 15 has no identity column on a partitioned table), the
    /// primary keys include the partition key, and the dedup key is unchanged (it contains the partition key).
    /// Existing rows are copied into the default partitions here; the first job or `pushctl migrate` to open
    /// the database then moves them into monthly partitions (`prepareHistory`). Converting a large history
    /// copies it twice: run `pushctl migrate` before the jobs, in a quiet hour (docs/DEPLOYMENT.md).
    /// SQLite keeps one table each.
    static let m009 = SchemaMigration(
        id: "009_partitioned_history",
        sqlite: "",
        postgres: """
            CREATE SEQUENCE notification_log_ids AS bigint;
            SELECT setval('notification_log_ids', coalesce((SELECT max(id) FROM notification_logs), 0) + 1, false);
            CREATE TABLE notification_logs_partitioned (
                id                bigint NOT NULL DEFAULT nextval('notification_log_ids'),
                user_id           text COLLATE "C" NOT NULL,
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
                deliver_after     timestamptz,
                params            jsonb
            ) PARTITION BY RANGE (period_key);
            CREATE TABLE notification_logs_default PARTITION OF notification_logs_partitioned DEFAULT;
            INSERT INTO notification_logs_partitioned
                (id, user_id, notification_type, period_key, status, message_index, locale, run_id, attempts,
                 claimed_at, finished_at, updated_at, detail, deliver_after, params)
            SELECT id, user_id, notification_type, period_key, status, message_index, locale, run_id, attempts,
                   claimed_at, finished_at, updated_at, detail, deliver_after, params
            FROM notification_logs;
            DROP TABLE notification_logs;
            ALTER TABLE notification_logs_partitioned RENAME TO notification_logs;
            ALTER SEQUENCE notification_log_ids OWNED BY notification_logs.id;
            ALTER TABLE notification_logs ADD CONSTRAINT notification_logs_pkey PRIMARY KEY (id, period_key);
            ALTER TABLE notification_logs ADD CONSTRAINT notification_logs_user_id_notification_type_period_key_key
                UNIQUE (user_id, notification_type, period_key);
            CREATE INDEX notification_logs_by_claimed_at ON notification_logs (claimed_at);
            CREATE INDEX notification_logs_pending_warnings ON notification_logs (claimed_at)
                WHERE notification_type <> 'diary_reminder' AND status IN ('deferred', 'retry', 'claimed');
            CREATE TRIGGER notification_logs_delete_deliveries AFTER DELETE ON notification_logs
                REFERENCING OLD TABLE AS deleted_logs FOR EACH STATEMENT
                EXECUTE FUNCTION notification_deliveries_of_deleted_logs();

            CREATE SEQUENCE notification_delivery_ids AS bigint;
            SELECT setval('notification_delivery_ids', coalesce((SELECT max(id) FROM notification_deliveries), 0) + 1, false);
            CREATE TABLE notification_deliveries_partitioned (
                id                  bigint NOT NULL DEFAULT nextval('notification_delivery_ids'),
                log_id              bigint NOT NULL,
                device_id           bigint,
                provider            text NOT NULL CHECK (provider IN ('apns', 'fcm', 'outbox')),
                outcome             text NOT NULL
                                    CHECK (outcome IN ('delivered', 'token_dead', 'retry_later', 'credentials', 'rejected')),
                reason              text,
                provider_message_id text,
                attempts            integer NOT NULL DEFAULT 1 CHECK (attempts >= 1),
                latency_ms          integer,
                run_id              text NOT NULL,
                created_at          timestamptz NOT NULL
            ) PARTITION BY RANGE (created_at);
            CREATE TABLE notification_deliveries_default PARTITION OF notification_deliveries_partitioned DEFAULT;
            INSERT INTO notification_deliveries_partitioned
                (id, log_id, device_id, provider, outcome, reason, provider_message_id, attempts, latency_ms, run_id,
                 created_at)
            SELECT id, log_id, device_id, provider, outcome, reason, provider_message_id, attempts, latency_ms, run_id,
                   created_at
            FROM notification_deliveries;
            DROP TABLE notification_deliveries;
            ALTER TABLE notification_deliveries_partitioned RENAME TO notification_deliveries;
            ALTER SEQUENCE notification_delivery_ids OWNED BY notification_deliveries.id;
            ALTER TABLE notification_deliveries ADD CONSTRAINT notification_deliveries_pkey PRIMARY KEY (id, created_at);
            CREATE INDEX notification_deliveries_by_log ON notification_deliveries (log_id);
            CREATE INDEX notification_deliveries_by_created_at ON notification_deliveries (created_at);
            CREATE INDEX notification_deliveries_by_device ON notification_deliveries (device_id);
            """)

    /// Leases on buckets of a run's due set (``DueSetBuckets``): runners started at the same minute without
    /// `--shard` split the slot between them instead of racing for every user. One row per (run, bucket): who
    /// holds it until when, and when it was finished. Rows older than a day are deleted by the runs themselves.
    static let m010 = SchemaMigration(
        id: "010_due_set_leases",
        sqlite: """
            CREATE TABLE due_set_leases (
                run_key     TEXT NOT NULL,
                bucket      INTEGER NOT NULL CHECK (bucket >= 0),
                holder      TEXT,
                expires_at  INTEGER NOT NULL,
                finished_at INTEGER,
                PRIMARY KEY (run_key, bucket)
            ) WITHOUT ROWID;
            CREATE INDEX due_set_leases_by_expiry ON due_set_leases (expires_at);
            """,
        postgres: """
            CREATE TABLE due_set_leases (
                run_key     text COLLATE "C" NOT NULL,
                bucket      integer NOT NULL CHECK (bucket >= 0),
                holder      text,
                expires_at  timestamptz NOT NULL,
                finished_at timestamptz,
                PRIMARY KEY (run_key, bucket)
            );
            CREATE INDEX due_set_leases_by_expiry ON due_set_leases (expires_at);
            """)

    /// Recording a reminder's outcome becomes a heap-only (HOT) update on PostgreSQL: no index mentions a column
    /// the resolution changes, and the log's partitions keep half of each page free for the new versions
    /// (BENCHMARKS.md#postgresqls-page-statements). The pending-warnings index no longer names `status`
    /// (the query still filters on it; warnings of one day are few). New partitions get the fillfactor from
    /// `prepareHistory`; existing ones get it here, for the pages they add from now on.
    static let m011 = SchemaMigration(
        id: "011_heap_only_resolutions",
        sqlite: "",
        postgres: """
            DROP INDEX notification_logs_pending_warnings;
            CREATE INDEX notification_logs_pending_warnings ON notification_logs (claimed_at)
                WHERE notification_type <> 'diary_reminder';
            DO $$
            DECLARE partition regclass;
            BEGIN
                FOR partition IN SELECT inhrelid::regclass FROM pg_inherits
                                 WHERE inhparent = 'notification_logs'::regclass LOOP
                    EXECUTE format('ALTER TABLE %s SET (fillfactor = 50)', partition);
                END LOOP;
            END $$;
            """)

    /// PostgreSQL: each trigger function runs with the `search_path` of the schema the tables are in, so that a
    /// backend writing to them by qualified name from another `search_path` (the tables in a schema of their own,
    /// beside an app's) sets off triggers that act on these tables, not on whatever its path names first.
    static let m012 = SchemaMigration(
        id: "012_trigger_functions_in_their_schema",
        sqlite: "",
        postgres: """
            DO $$
            DECLARE function_name text;
            BEGIN
                FOREACH function_name IN ARRAY ARRAY[
                    'notification_settings_copy_timezone', 'users_timezone_to_settings',
                    'notification_logs_of_deleted_users', 'notification_deliveries_of_deleted_logs',
                    'notification_deliveries_of_deleted_devices'
                ] LOOP
                    EXECUTE format('ALTER FUNCTION %I.%I() SET search_path = %I',
                                   current_schema(), function_name, current_schema());
                END LOOP;
            END $$;
            """)

    /// A FCM installation id (FID) of `NEW.token`, for SQLite's triggers: ``DeviceToken/isFIDShaped(_:)``.
    static let sqliteFIDShape = """
        (length(NEW.token) = 22 AND substr(NEW.token, 1, 1) IN ('c', 'd', 'e', 'f')
         AND NEW.token NOT GLOB '*[^A-Za-z0-9_-]*')
        """

    /// ``DeviceToken``'s rule over `NEW.token`, `NEW.provider` and `NEW.token_kind`, for SQLite's triggers.
    static let sqliteTokenAndKindShape = """
        (NEW.token_kind = 'token' AND NOT (NEW.provider = 'fcm' AND \(sqliteFIDShape)) AND (\(sqliteTokenShape)))
        OR (NEW.token_kind = 'fid' AND NEW.provider = 'fcm' AND \(sqliteFIDShape))
        """

    /// Firebase Installation IDs (FIDs), the successor of FCM registration tokens: `token_kind` says whether
    /// `token` holds a token (`'token'`: APNs device tokens, FCM registration tokens; every row before) or a FID
    /// (`'fid'`, FCM only), which FCM takes in `message.fid`. Rows of FCM whose token already has a FID's shape
    /// (an app that turned FIDs on registered them as tokens; no registration token has that shape) become FIDs,
    /// so that they are sent as such. The shape check learns the kind: a FID is 22 characters, the first one of
    /// `c d e f`, then `A-Z a-z 0-9 - _`; a FID-shaped value stored as a token is refused.
    static let m013 = SchemaMigration(
        id: "013_device_token_kind",
        sqlite: """
            ALTER TABLE user_devices ADD COLUMN token_kind TEXT NOT NULL DEFAULT 'token'
                CHECK (token_kind IN ('token', 'fid'));
            UPDATE user_devices SET token_kind = 'fid'
            WHERE provider = 'fcm' AND length(token) = 22 AND substr(token, 1, 1) IN ('c', 'd', 'e', 'f')
              AND token NOT GLOB '*[^A-Za-z0-9_-]*';
            DROP TRIGGER user_devices_token_shape_on_insert;
            DROP TRIGGER user_devices_token_shape_on_update;
            CREATE TRIGGER user_devices_token_shape_on_insert BEFORE INSERT ON user_devices
            WHEN NOT (\(sqliteTokenAndKindShape))
            BEGIN
                SELECT RAISE(ABORT, 'user_devices.token: not a valid device token for its provider and token_kind (a FCM installation id is stored with token_kind = ''fid'')');
            END;
            CREATE TRIGGER user_devices_token_shape_on_update BEFORE UPDATE OF token, provider, token_kind ON user_devices
            WHEN NOT (\(sqliteTokenAndKindShape))
            BEGIN
                SELECT RAISE(ABORT, 'user_devices.token: not a valid device token for its provider and token_kind (a FCM installation id is stored with token_kind = ''fid'')');
            END;
            """,
        postgres: """
            ALTER TABLE user_devices ADD COLUMN token_kind text NOT NULL DEFAULT 'token'
                CONSTRAINT user_devices_token_kind CHECK (token_kind IN ('token', 'fid'));
            UPDATE user_devices SET token_kind = 'fid' WHERE provider = 'fcm' AND token ~ '^[c-f][A-Za-z0-9_-]{21}$';
            ALTER TABLE user_devices DROP CONSTRAINT user_devices_token_shape;
            ALTER TABLE user_devices ADD CONSTRAINT user_devices_token_shape CHECK (
                (token_kind = 'token' AND (
                    (provider = 'apns' AND length(token) % 2 = 0 AND length(token) BETWEEN 2 AND 200 AND token ~ '^[0-9a-f]+$')
                    OR (provider = 'fcm' AND length(token) BETWEEN 1 AND 2000 AND token ~ '^[A-Za-z0-9_:-]+$'
                        AND token !~ '^[c-f][A-Za-z0-9_-]{21}$')))
                OR (token_kind = 'fid' AND provider = 'fcm' AND token ~ '^[c-f][A-Za-z0-9_-]{21}$')
            ) NOT VALID;
            """)

    /// Unix seconds from 2000-01-01 up to the end of 2199: what ``Timestamps`` accepts, and what no millisecond
    /// value of this era fits.
    static let secondsRange = (lowest: 946_684_800, highest: 7_258_118_399)

    /// The contract holds whatever a backend's connection does (docs/SCHEMA.md, "Tested as written"):
    /// - SQLite's foreign keys are a per-connection setting, off by default: a backend that never turns them on
    ///   deleted a user and left their settings and devices behind, and could write a device for a user who does
    ///   not exist. Triggers now do both whatever the setting: a user's rows go before the user does, and a row
    ///   naming no user is refused with a message that says so (before a misleading `NOT NULL constraint failed:
    ///   notification_settings.timezone`). PostgreSQL's foreign keys are always on.
    /// - `INSERT OR REPLACE INTO users` (a delete and an insert) left `notification_settings.timezone` stale: the
    ///   copy was made on update only. It is now made on insert too.
    /// - Instants in milliseconds (JavaScript's `Date.now()`) passed as seconds: an entry written today counted
    ///   as none. Entries' `created_at` must be whole seconds between 2000 and 2199, and devices' instants before
    ///   2200, each refused with "seconds, not milliseconds". Rows already stored are left as they are.
    static let m014 = SchemaMigration(
        id: "014_contract_guards",
        sqlite: """
            CREATE TRIGGER users_delete_their_rows BEFORE DELETE ON users
            BEGIN
                DELETE FROM notification_deliveries WHERE log_id IN (SELECT id FROM notification_logs WHERE user_id = OLD.id);
                DELETE FROM notification_logs WHERE user_id = OLD.id;
                DELETE FROM diary_entries WHERE user_id = OLD.id;
                DELETE FROM user_devices WHERE user_id = OLD.id;
                DELETE FROM notification_settings WHERE user_id = OLD.id;
            END;
            CREATE TRIGGER users_timezone_to_settings_on_insert AFTER INSERT ON users
            BEGIN
                UPDATE notification_settings SET timezone = NEW.timezone
                WHERE user_id = NEW.id AND timezone IS NOT NEW.timezone;
            END;
            CREATE TRIGGER notification_settings_user_exists BEFORE INSERT ON notification_settings
            WHEN NOT EXISTS (SELECT 1 FROM users WHERE id = NEW.user_id)
            BEGIN
                SELECT RAISE(ABORT, 'notification_settings.user_id: no such user (write the users row first)');
            END;
            CREATE TRIGGER user_devices_user_exists BEFORE INSERT ON user_devices
            WHEN NOT EXISTS (SELECT 1 FROM users WHERE id = NEW.user_id)
            BEGIN
                SELECT RAISE(ABORT, 'user_devices.user_id: no such user (write the users row first)');
            END;
            CREATE TRIGGER user_devices_user_exists_on_update BEFORE UPDATE OF user_id ON user_devices
            WHEN NOT EXISTS (SELECT 1 FROM users WHERE id = NEW.user_id)
            BEGIN
                SELECT RAISE(ABORT, 'user_devices.user_id: no such user (write the users row first)');
            END;
            CREATE TRIGGER diary_entries_user_exists BEFORE INSERT ON diary_entries
            WHEN NOT EXISTS (SELECT 1 FROM users WHERE id = NEW.user_id)
            BEGIN
                SELECT RAISE(ABORT, 'diary_entries.user_id: no such user (write the users row first)');
            END;
            CREATE TRIGGER diary_entries_created_at_in_seconds BEFORE INSERT ON diary_entries
            WHEN typeof(NEW.created_at) <> 'integer'
              OR NEW.created_at NOT BETWEEN \(secondsRange.lowest) AND \(secondsRange.highest)
            BEGIN
                SELECT RAISE(ABORT, 'diary_entries.created_at: whole Unix seconds from 2000 to 2199 (seconds, not milliseconds)');
            END;
            CREATE TRIGGER diary_entries_created_at_in_seconds_on_update BEFORE UPDATE OF created_at ON diary_entries
            WHEN typeof(NEW.created_at) <> 'integer'
              OR NEW.created_at NOT BETWEEN \(secondsRange.lowest) AND \(secondsRange.highest)
            BEGIN
                SELECT RAISE(ABORT, 'diary_entries.created_at: whole Unix seconds from 2000 to 2199 (seconds, not milliseconds)');
            END;
            CREATE TRIGGER user_devices_instants_in_seconds BEFORE INSERT ON user_devices
            WHEN typeof(NEW.last_seen) <> 'integer' OR NEW.last_seen > \(secondsRange.highest)
              OR NEW.created_at > \(secondsRange.highest) OR NEW.updated_at > \(secondsRange.highest)
            BEGIN
                SELECT RAISE(ABORT, 'user_devices: last_seen, created_at and updated_at are whole Unix seconds (seconds, not milliseconds)');
            END;
            CREATE TRIGGER user_devices_instants_in_seconds_on_update BEFORE UPDATE OF last_seen, created_at, updated_at ON user_devices
            WHEN typeof(NEW.last_seen) <> 'integer' OR NEW.last_seen > \(secondsRange.highest)
              OR NEW.created_at > \(secondsRange.highest) OR NEW.updated_at > \(secondsRange.highest)
            BEGIN
                SELECT RAISE(ABORT, 'user_devices: last_seen, created_at and updated_at are whole Unix seconds (seconds, not milliseconds)');
            END;
            """,
        postgres: """
            CREATE FUNCTION refuse_milliseconds() RETURNS trigger LANGUAGE plpgsql AS $$
            BEGIN
                RAISE EXCEPTION '%: an instant from 2000 to 2199 (seconds, not milliseconds: to_timestamp(seconds))',
                    TG_TABLE_NAME USING ERRCODE = 'check_violation';
            END
            $$;
            ALTER FUNCTION refuse_milliseconds() SET search_path FROM CURRENT;
            CREATE TRIGGER diary_entries_created_at_in_seconds BEFORE INSERT OR UPDATE OF created_at ON diary_entries
                FOR EACH ROW WHEN (NEW.created_at < '2000-01-01 00:00:00+00' OR NEW.created_at >= '2200-01-01 00:00:00+00')
                EXECUTE FUNCTION refuse_milliseconds();
            CREATE TRIGGER user_devices_instants_in_seconds BEFORE INSERT OR UPDATE OF last_seen, created_at, updated_at
                ON user_devices FOR EACH ROW
                WHEN (NEW.last_seen >= '2200-01-01 00:00:00+00' OR NEW.created_at >= '2200-01-01 00:00:00+00'
                      OR NEW.updated_at >= '2200-01-01 00:00:00+00')
                EXECUTE FUNCTION refuse_milliseconds();
            """)

    /// The HTTP API's keys (`pushctl api-key`): each stored as the SHA-256 of its secret, never the secret; a
    /// revoked key keeps its row (who had access when) and is refused. And its `Idempotency-Key`s: a `POST` retried
    /// with the same key gets the first answer (kept 24 hours), never a second effect; `status` 0 marks a request
    /// still being answered.
    static let m015 = SchemaMigration(
        id: "015_http_api",
        sqlite: """
            CREATE TABLE api_keys (
                id         TEXT PRIMARY KEY NOT NULL CHECK (length(id) BETWEEN 1 AND 64),
                name       TEXT NOT NULL DEFAULT '',
                scope      TEXT NOT NULL CHECK (scope IN ('admin', 'hook', 'devices', 'webhook')),
                secret_sha256 TEXT NOT NULL CHECK (length(secret_sha256) = 64),
                created_at INTEGER NOT NULL,
                revoked_at INTEGER
            ) WITHOUT ROWID;
            CREATE TABLE api_idempotency (
                caller         TEXT NOT NULL,
                key            TEXT NOT NULL CHECK (length(key) BETWEEN 1 AND 255),
                request_sha256 TEXT NOT NULL,
                status         INTEGER NOT NULL DEFAULT 0,
                response       TEXT,
                created_at     INTEGER NOT NULL,
                PRIMARY KEY (caller, key)
            ) WITHOUT ROWID;
            CREATE INDEX api_idempotency_by_age ON api_idempotency (created_at);
            """,
        postgres: """
            CREATE TABLE api_keys (
                id         text COLLATE "C" PRIMARY KEY CHECK (length(id) BETWEEN 1 AND 64),
                name       text NOT NULL DEFAULT '',
                scope      text NOT NULL CHECK (scope IN ('admin', 'hook', 'devices', 'webhook')),
                secret_sha256 text NOT NULL CHECK (length(secret_sha256) = 64),
                created_at timestamptz NOT NULL,
                revoked_at timestamptz
            );
            CREATE TABLE api_idempotency (
                caller         text COLLATE "C" NOT NULL,
                key            text COLLATE "C" NOT NULL CHECK (length(key) BETWEEN 1 AND 255),
                request_sha256 text NOT NULL,
                status         integer NOT NULL DEFAULT 0,
                response       text,
                created_at     timestamptz NOT NULL,
                PRIMARY KEY (caller, key)
            );
            CREATE INDEX api_idempotency_by_age ON api_idempotency (created_at);
            """)

    /// 016: reminders that pause. `reminder_pauses` holds each user's latest pause (``ReminderPause``): the period
    /// of the last reminder, when it was claimed, and the ignored reminders that led to it. Written with that
    /// claim, in its transaction; an entry or a settings change after `paused_at` ends it (the row stays, for the
    /// health report's "came back").
    static let m016 = SchemaMigration(
        id: "016_reminder_pauses",
        sqlite: """
            CREATE TABLE reminder_pauses (
                user_id    TEXT PRIMARY KEY NOT NULL REFERENCES users(id) ON DELETE CASCADE,
                period_key TEXT NOT NULL CHECK (length(period_key) = 10),
                paused_at  INTEGER NOT NULL,
                ignored    INTEGER NOT NULL CHECK (ignored >= 0)
            ) WITHOUT ROWID;
            CREATE INDEX reminder_pauses_by_time ON reminder_pauses (paused_at);
            """,
        postgres: """
            CREATE TABLE reminder_pauses (
                user_id    text COLLATE "C" PRIMARY KEY REFERENCES users(id) ON DELETE CASCADE,
                period_key text COLLATE "C" NOT NULL CHECK (length(period_key) = 10),
                paused_at  timestamptz NOT NULL,
                ignored    integer NOT NULL CHECK (ignored >= 0)
            );
            CREATE INDEX reminder_pauses_by_time ON reminder_pauses (paused_at);
            """)

    /// 017: words that learn (``CopyLearning``). `copy_outcomes` holds, per UTC day, locale and message, the
    /// reminders that reached a device and how many of their users wrote within 3 hours; `copy_outcome_days` marks
    /// the days counted. Written by the runs once a day is final; read instead of the history.
    static let m017 = SchemaMigration(
        id: "017_copy_outcomes",
        sqlite: """
            CREATE TABLE copy_outcomes (
                day           TEXT NOT NULL CHECK (length(day) = 10),
                locale        TEXT NOT NULL,
                message_index INTEGER NOT NULL CHECK (message_index >= 0),
                sent          INTEGER NOT NULL CHECK (sent >= 0),
                wrote         INTEGER NOT NULL CHECK (wrote BETWEEN 0 AND sent),
                PRIMARY KEY (day, locale, message_index)
            ) WITHOUT ROWID;
            CREATE TABLE copy_outcome_days (
                day        TEXT PRIMARY KEY NOT NULL CHECK (length(day) = 10),
                counted_at INTEGER NOT NULL
            ) WITHOUT ROWID;
            """,
        postgres: """
            CREATE TABLE copy_outcomes (
                day           text COLLATE "C" NOT NULL CHECK (length(day) = 10),
                locale        text COLLATE "C" NOT NULL,
                message_index integer NOT NULL CHECK (message_index >= 0),
                sent          integer NOT NULL CHECK (sent >= 0),
                wrote         integer NOT NULL CHECK (wrote BETWEEN 0 AND sent),
                PRIMARY KEY (day, locale, message_index)
            );
            CREATE TABLE copy_outcome_days (
                day        text COLLATE "C" PRIMARY KEY CHECK (length(day) = 10),
                counted_at timestamptz NOT NULL
            );
            """)

    /// 018: devices held (``DeadTokenGuard``): a provider called them dead for a reason that also means this sender is
    /// set up wrong, in a run where too many of its answers said so to believe it. They stay active; the mark says
    /// why (explain, the report), and the first run whose answers from that provider are healthy removes it.
    static let m018 = SchemaMigration(
        id: "018_device_holds",
        sqlite: """
            CREATE TABLE device_holds (
                device_id INTEGER PRIMARY KEY NOT NULL REFERENCES user_devices(id) ON DELETE CASCADE,
                provider  TEXT NOT NULL CHECK (provider IN ('apns', 'fcm')),
                reason    TEXT NOT NULL,
                held_at   INTEGER NOT NULL,
                run_id    TEXT NOT NULL
            );
            CREATE INDEX device_holds_by_provider ON device_holds (provider);
            """,
        postgres: """
            CREATE TABLE device_holds (
                device_id bigint PRIMARY KEY REFERENCES user_devices(id) ON DELETE CASCADE,
                provider  text NOT NULL CHECK (provider IN ('apns', 'fcm')),
                reason    text NOT NULL,
                held_at   timestamptz NOT NULL,
                run_id    text NOT NULL
            );
            CREATE INDEX device_holds_by_provider ON device_holds (provider);
            """)

    /// 019: devices mirrored from the app's own device table (`pushctl integrate postgres`, database webhooks). The
    /// app decides whether such a device is active: the janitor's age rules (stale, FCM's expiry) leave it alone,
    /// and only a provider's answer or the app's own row deactivates it. And a device a webhook brings before its
    /// user is a push user (a profile without a time zone yet) waits, as the SQL mirror's rows wait in the app's
    /// table: it is registered when the user becomes one (``WaitingDevices``). Such a profile, and the user's latest
    /// entry meanwhile, wait too (`waiting_users`): `--explain` says why the user is none yet, and an entry written
    /// that day still skips the day's reminder once they are one.
    static let m019 = SchemaMigration(
        id: "019_mirrored_devices",
        sqlite: """
            ALTER TABLE user_devices ADD COLUMN mirrored INTEGER NOT NULL DEFAULT 0 CHECK (mirrored IN (0, 1));
            CREATE TABLE waiting_devices (
                token        TEXT PRIMARY KEY NOT NULL,
                user_id      TEXT NOT NULL,
                registration TEXT NOT NULL,
                received_at  INTEGER NOT NULL
            );
            CREATE INDEX waiting_devices_by_user ON waiting_devices (user_id);
            CREATE TABLE waiting_users (
                user_id    TEXT PRIMARY KEY NOT NULL,
                profile_at INTEGER,
                entry_at   INTEGER
            );
            """,
        postgres: """
            ALTER TABLE user_devices ADD COLUMN mirrored boolean NOT NULL DEFAULT false;
            CREATE TABLE waiting_devices (
                token        text PRIMARY KEY,
                user_id      text NOT NULL,
                registration text NOT NULL,
                received_at  timestamptz NOT NULL
            );
            CREATE INDEX waiting_devices_by_user ON waiting_devices (user_id);
            CREATE TABLE waiting_users (
                user_id    text PRIMARY KEY,
                profile_at timestamptz,
                entry_at   timestamptz
            );
            """)

    /// 020: the HTTP API's read-only key scope `support` (explain), beside 015's. SQLite cannot change a CHECK in
    /// place: the table is made again with its rows.
    static let m020 = SchemaMigration(
        id: "020_support_key_scope",
        sqlite: """
            CREATE TABLE api_keys_020 (
                id         TEXT PRIMARY KEY NOT NULL CHECK (length(id) BETWEEN 1 AND 64),
                name       TEXT NOT NULL DEFAULT '',
                scope      TEXT NOT NULL CHECK (scope IN ('admin', 'hook', 'devices', 'webhook', 'support')),
                secret_sha256 TEXT NOT NULL CHECK (length(secret_sha256) = 64),
                created_at INTEGER NOT NULL,
                revoked_at INTEGER
            ) WITHOUT ROWID;
            INSERT INTO api_keys_020 (id, name, scope, secret_sha256, created_at, revoked_at)
                SELECT id, name, scope, secret_sha256, created_at, revoked_at FROM api_keys;
            DROP TABLE api_keys;
            ALTER TABLE api_keys_020 RENAME TO api_keys;
            """,
        postgres: """
            ALTER TABLE api_keys DROP CONSTRAINT api_keys_scope_check;
            ALTER TABLE api_keys ADD CONSTRAINT api_keys_scope_check
                CHECK (scope IN ('admin', 'hook', 'devices', 'webhook', 'support'));
            """)
}

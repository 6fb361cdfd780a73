import JobKit

/// The SQL that makes an app's own PostgreSQL tables the source of truth (`pushctl integrate postgres`): triggers
/// that mirror the app's rows into the push schema in the same transaction, a trigger that writes the jobs'
/// deactivations back to the app's device table, a resumable backfill and a drift report, all from an
/// ``AppTableMapping``. The rules are the database webhook's (``AppTableMapping/appChange(for:)``), spelled in SQL:
///
/// | app table | insert, update | delete |
/// | --- | --- | --- |
/// | users | set the mapped settings (null keeps the stored value; null quiet hours: none); a user without a time zone is not mirrored (yet); a new push user brings the app's devices of that user | the user goes, with everything of theirs |
/// | devices | an active row registers (a changed token retires the old one, `replaced`); `active` false logs out | logs out |
/// | entries | read in place: `diary_entries` becomes a view over the app's table and the push schema's own | the same |
///
/// A row that cannot be mirrored (a token of a shape the push schema refuses, say) never fails the app's write:
/// it is recorded in `integration_rejects` and raised as a WARNING, and `pushctl integrate check` reports it.
/// Every function is `SECURITY DEFINER` with a fixed `search_path` (`pg_catalog, pg_temp`; every name qualified),
/// so that the app's roles (Supabase's `anon`, `authenticated`) need no right on the push schema, and RLS on the
/// app's tables does not hide rows from the mirror. The text is idempotent: run it again after changing the
/// mapping.
package struct IntegrationSQL: Sendable {
    package let mapping: AppTableMapping
    /// The schema of the jobs' tables (`push`).
    package let pushSchema: String
    /// The role that owns the functions: the least rights they need are granted to it (nil: whoever runs it).
    package let owner: String?

    package init(mapping: AppTableMapping, pushSchema: String = "push", owner: String? = nil) throws(JobError) {
        guard AppTableMapping.isIdentifier(pushSchema) else {
            throw .usage("--push-schema: not an identifier: \(pushSchema)")
        }
        if let owner, !AppTableMapping.isIdentifier(owner) { throw .usage("--owner: not an identifier: \(owner)") }
        if let entries = mapping.tables[.entries],
            entries.columns["user_id"]?.path.isEmpty != true || entries.columns["at"]?.path.isEmpty != true
        {
            throw .dataError(
                "mapping: entries need \"user_id\" and \"at\" as plain columns (a timestamp): they are read in place, through an index on both"
            )
        }
        self.mapping = mapping
        self.pushSchema = pushSchema
        self.owner = owner
    }

    // MARK: Names

    private var p: String { quote(pushSchema) }
    private func quote(_ identifier: String) -> String {
        "\"\(identifier.replacingOccurrences(of: "\"", with: "\"\""))\""
    }
    /// A string literal (an app's names may hold a quote).
    private func literal(_ text: String) -> String { "'\(text.replacingOccurrences(of: "'", with: "''"))'" }
    private func table(_ table: AppTableMapping.Table) -> String { "\(quote(table.schema)).\(quote(table.name))" }
    private func function(_ kind: AppTableMapping.Kind, _ role: String) -> String {
        "\(p).\(quote("integration_\(kind.rawValue)_\(role)"))"
    }
    private static let triggerName = "\"diary_push_mirror\""
    private static let updateTriggerName = "\"diary_push_mirror_update\""
    private static let writeBackTrigger = "\"diary_push_write_back\""
    private static let readPolicy = "\"diary_push_read\""
    private static let writeBackPolicy = "\"diary_push_write_back\""
    /// `integration-base.sql` (a resource), without its header comment: the tables and helpers every mapping uses.
    private static let base: String = {
        let text = String(decoding: PackageResources.integration_base_sql, as: UTF8.self)
        let lines = text.split(separator: "\n").drop { !$0.hasPrefix("-- diary-push:") }
        return lines.joined(separator: "\n")
    }()
    /// The functions that read any row without raising (the drift report, a reject's key).
    private static let helpers = ["integration_jsonb(text)", "integration_flag(text)", "integration_mask(text)"]

    // MARK: Values

    /// The SQL value of `field` in row `row` (`NEW`, `OLD`, `r`), as text; NULL when not mapped. `safe`: a JSON
    /// column that holds no JSON reads as NULL instead of raising (the drift report and a reject's key read every
    /// row, the bad ones too; the mirror refuses a bad row, and records why).
    private func text(_ table: AppTableMapping.Table, _ field: String, _ row: String, safe: Bool = false) -> String {
        if let fixed = table.fixed[field] { return "\(literal(fixed))::text" }
        guard let column = table.columns[field] else { return "NULL::text" }
        let base = "\(row).\(quote(column.name))"
        if column.path.isEmpty { return "(\(base))::text" }
        let json = safe ? "\(p).integration_jsonb((\(base))::text)" : "(\(base))::jsonb"
        return "(\(json) #>> ARRAY[\(column.path.map(literal).joined(separator: ", "))]::text[])"
    }

    /// A boolean field; `safe`: a value that is not one (`"sometimes"`) reads as NULL instead of raising.
    private func flag(_ table: AppTableMapping.Table, _ field: String, _ row: String, safe: Bool = false) -> String {
        guard let column = table.columns[field] else { return "NULL::boolean" }
        if safe { return "\(p).integration_flag(\(text(table, field, row, safe: true)))" }
        if column.path.isEmpty { return "(\(row).\(quote(column.name)))::boolean" }
        return "(\(text(table, field, row)))::boolean"
    }

    /// How a reject names its row: the user's id, and for a device its token masked as the logs mask it. Never
    /// raises (a reject's key is read from a row that may be the bad one).
    private func rowKey(_ table: AppTableMapping.Table, _ row: String) -> String {
        let user = text(table, table.kind == .users ? "id" : "user_id", row, safe: true)
        guard table.kind == .devices else { return user }
        let token = "coalesce(\(text(table, "fid", row, safe: true)), \(text(table, "token", row, safe: true)))"
        return "coalesce(\(user), '?') || ' ' || coalesce(\(p).integration_mask(\(token)), '(no token)')"
    }

    /// The token the push schema keeps for an app's device row: its FID, else its token (APNs ones in lower case).
    private func pushToken(_ devices: AppTableMapping.Table, _ row: String) -> String {
        let fid = text(devices, "fid", row, safe: true)
        let token = text(devices, "token", row, safe: true)
        return "CASE WHEN \(fid) IS NOT NULL THEN \(fid) WHEN \(providerExpression(devices, row, safe: true)) IN "
            + "(\(Provider.sqlList(\.storesLowerCase))) THEN lower(\(token)) ELSE \(token) END"
    }

    /// A device row's provider: FCM's for a FID; else the mapped column's (lower case), or, with `fixed.provider`
    /// `by_shape`, the one its token's shape names (``Provider/byShape(_:)``).
    private func providerExpression(_ devices: AppTableMapping.Table, _ row: String, safe: Bool = false) -> String {
        let fid = text(devices, "fid", row, safe: safe)
        let ofFIDs = "'\(Provider.ofInstallationIDs.rawValue)'"
        guard devices.fixed["provider"] == AppTableMapping.providerByShape else {
            return
                "CASE WHEN \(fid) IS NOT NULL THEN \(ofFIDs) ELSE lower(\(text(devices, "provider", row, safe: safe))) END"
        }
        return "CASE WHEN \(fid) IS NOT NULL THEN \(ofFIDs) ELSE "
            + Provider.sqlByShape(text(devices, "token", row, safe: safe)) + " END"
    }

    /// The PL/pgSQL that refuses a token of another provider's shape (``ProviderDescriptor/foreignShape``).
    private static var foreignTokenChecks: String {
        Provider.allCases.compactMap { provider -> String? in
            guard let shape = provider.descriptor.foreignShape else { return nil }
            return """
                    IF v_provider = '\(provider.rawValue)' AND v_fid IS NULL AND v_token ~ '\(shape.pattern)' THEN
                        RAISE EXCEPTION '\(shape.problem.replacingOccurrences(of: "'", with: "''"))';
                    END IF;
                """
        }.joined(separator: "\n")
    }

    /// Whether a row's "takes it out" field (a device's `revoked`, an entry's `deleted`) is set, as
    /// ``AppTableMapping/isSet(_:)`` reads it; nil when not mapped. Inline, not a function: the entries' view runs
    /// with its reader's right to call functions.
    private func isSet(_ table: AppTableMapping.Table, _ field: String, _ row: String, safe: Bool = false) -> String? {
        guard table.columns[field] != nil else { return nil }
        let value = text(table, field, row, safe: safe)
        return "(\(value) IS NOT NULL AND lower(\(value)) NOT IN ('', 'false', 'f', '0', 'no', 'off'))"
    }

    /// Whether a device row is active: its `active` flag (true when not mapped or null), and not `revoked`.
    private func activeCondition(_ devices: AppTableMapping.Table, _ row: String, safe: Bool = false) -> String {
        let flagged =
            isMapped(devices, "active") ? "coalesce(\(flag(devices, "active", row, safe: safe)), true)" : "true"
        guard let revoked = isSet(devices, "revoked", row, safe: safe) else { return flagged }
        return "(\(flagged) AND NOT \(revoked))"
    }

    private func isMapped(_ table: AppTableMapping.Table, _ field: String) -> Bool {
        table.columns[field] != nil || table.fixed[field] != nil
    }

    // MARK: The text

    /// The migration: tables for rejects and backfill progress, the functions, the triggers, the grants.
    package var install: String {
        var parts: [String] = [
            Self.base.replacingOccurrences(of: "@push_schema@", with: p)
        ]
        if let users = mapping.tables[.users] {
            parts.append(usersSQL(users))
            parts.append(userRowSQL(users))
        }
        if let devices = mapping.tables[.devices] {
            parts.append(devicesSQL(devices))
            parts.append(mirroredSQL(devices))
        }
        if let entries = mapping.tables[.entries] { parts.append(entriesSQL(entries)) }
        parts.append(backfillSQL)
        parts.append(driftSQL)
        parts.append(grantsSQL)
        parts.append("COMMIT;")
        return parts.joined(separator: "\n\n") + "\n"
    }

    /// Removes what ``install`` made (the push schema's data stays).
    package var drop: String {
        var lines = [
            "-- diary-push: removes the mirror of the app's tables (pushctl integrate postgres --drop).", "BEGIN;",
        ]
        for table in mapping.tables.values.sorted(by: { $0.kind.rawValue < $1.kind.rawValue }) {
            lines.append("DROP TRIGGER IF EXISTS \(Self.triggerName) ON \(self.table(table));")
            lines.append("DROP TRIGGER IF EXISTS \(Self.updateTriggerName) ON \(self.table(table));")
            lines.append("DROP POLICY IF EXISTS \(Self.readPolicy) ON \(self.table(table));")
            lines.append("DROP POLICY IF EXISTS \(Self.writeBackPolicy) ON \(self.table(table));")
        }
        lines.append("DROP TRIGGER IF EXISTS \(Self.writeBackTrigger) ON \(p).user_devices;")
        if let entries = mapping.tables[.entries] {
            lines.append(
                """
                DO $do$ BEGIN
                    IF (SELECT c.relkind FROM pg_catalog.pg_class c WHERE c.oid = to_regclass('\(p).diary_entries')) = 'v' THEN
                        DROP VIEW \(p).diary_entries;
                        ALTER TABLE \(p).diary_entries_native RENAME TO diary_entries;
                    END IF;
                END $do$;
                DROP INDEX IF EXISTS \(quote(entries.schema)).\(quote("diary_push_\(entries.name)_by_user_time"));
                DROP FUNCTION IF EXISTS \(p).integration_entries_insert() CASCADE;
                """)
        }
        for kind in AppTableMapping.Kind.allCases {
            for role in ["trigger", "apply"] {
                lines.append("DROP FUNCTION IF EXISTS \(function(kind, role)) CASCADE;")
            }
        }
        lines.append("DROP FUNCTION IF EXISTS \(p).integration_write_back() CASCADE;")
        lines.append("DROP FUNCTION IF EXISTS \(p).integration_backfill(text, integer) CASCADE;")
        lines.append("DROP FUNCTION IF EXISTS \(p).integration_drift(integer) CASCADE;")
        lines.append("DROP FUNCTION IF EXISTS \(p).integration_user_row(text) CASCADE;")
        for helper in Self.helpers { lines.append("DROP FUNCTION IF EXISTS \(p).\(helper) CASCADE;") }
        lines.append("DROP TABLE IF EXISTS \(p).integration_progress, \(p).integration_rejects;")
        lines.append("COMMIT;")
        return lines.joined(separator: "\n") + "\n"
    }

    /// A trigger function around `apply`: the row mirrored, or recorded as a reject (never failing the app's write).
    /// An update fires it only when a mapped value changed (the trigger's `WHEN`, evaluated without calling the
    /// function): the app's other writes to the row (a last-seen time, a display name) cost nothing.
    private func triggerFunction(_ table: AppTableMapping.Table, body: String) -> String {
        // The mapped columns whole (a JSON column's any key), as text: comparing them never fails, as a JSON path of
        // a text column that holds no JSON would (or `json`, which has no equality), and the write is the app's.
        let columns = Set(table.columns.values.map(\.name)).sorted().map(quote)
        let changed =
            "ROW(\(columns.map { "OLD.\($0)::text" }.joined(separator: ", "))) IS DISTINCT FROM "
            + "ROW(\(columns.map { "NEW.\($0)::text" }.joined(separator: ", ")))"
        return """
            CREATE OR REPLACE FUNCTION \(function(table.kind, "trigger")) () RETURNS trigger
                LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $fn$
            BEGIN
                BEGIN
            \(body)
                EXCEPTION WHEN OTHERS THEN
                    INSERT INTO \(p).integration_rejects (app_table, operation, error, row_key)
                    VALUES (TG_TABLE_SCHEMA || '.' || TG_TABLE_NAME, TG_OP, SQLERRM,
                            CASE WHEN TG_OP = 'DELETE' THEN \(rowKey(table, "OLD")) ELSE \(rowKey(table, "NEW")) END);
                    RAISE WARNING 'diary-push: % of %.% not mirrored: %', TG_OP, TG_TABLE_SCHEMA, TG_TABLE_NAME, SQLERRM;
                END;
                RETURN NULL;
            END
            $fn$;
            DROP TRIGGER IF EXISTS \(Self.triggerName) ON \(self.table(table));
            CREATE TRIGGER \(Self.triggerName) AFTER INSERT OR DELETE ON \(self.table(table))
                FOR EACH ROW EXECUTE FUNCTION \(function(table.kind, "trigger"))();
            DROP TRIGGER IF EXISTS \(Self.updateTriggerName) ON \(self.table(table));
            CREATE TRIGGER \(Self.updateTriggerName) AFTER UPDATE ON \(self.table(table))
                FOR EACH ROW WHEN (\(changed)) EXECUTE FUNCTION \(function(table.kind, "trigger"))();
            """
    }

    private func usersSQL(_ users: AppTableMapping.Table) -> String {
        let id = text(users, "id", "r")
        let timezone = text(users, "timezone", "r")
        let quiet = text(users, "quiet_hours", "r")
        let quietMapped = isMapped(users, "quiet_hours")
        // A new push user brings the app's devices of that user, found by the app's own index on its user column:
        // the id is converted to that column's type (`%TYPE`), not the column to text.
        var pullDeclare = ""
        var pullDevices = ""
        if let devices = mapping.tables[.devices] {
            var predicate = "\(text(devices, "user_id", "d")) = v_id"
            var convert = ""
            if let column = devices.columns["user_id"], column.path.isEmpty {
                pullDeclare = "    k_user \(table(devices)).\(quote(column.name))%TYPE;\n"
                convert = "k_user := v_id;\n            "
                predicate = "d.\(quote(column.name)) = k_user"
            }
            pullDevices = """
                    IF created THEN
                        \(convert)PERFORM \(function(.devices, "apply"))(d, NULL) FROM \(table(devices)) d WHERE \(predicate);
                    END IF;
                """
        }
        func keep(_ field: String, _ value: String, _ column: String) -> String {
            isMapped(users, field) ? "coalesce(\(value), s.\(column))" : "s.\(column)"
        }
        let reminders = flag(users, "reminders", "r")
        let reminderTime = "left(\(text(users, "reminder_time", "r")), 5)"
        let warnings = flag(users, "limit_warnings", "r")
        let quietStart =
            quietMapped
            ? "CASE WHEN v_quiet IS NULL OR v_quiet = 'off' THEN NULL ELSE split_part(v_quiet, '-', 1) END" : "NULL"
        let quietEnd =
            quietMapped
            ? "CASE WHEN v_quiet IS NULL OR v_quiet = 'off' THEN NULL ELSE split_part(v_quiet, '-', 2) END" : "NULL"
        return """
            CREATE OR REPLACE FUNCTION \(function(.users, "apply")) (r \(table(users))) RETURNS void
                LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $fn$
            DECLARE
                v_id text := \(id);
                v_timezone text := \(timezone);
                v_quiet text := \(quiet);
                created boolean;
            \(pullDeclare)BEGIN
                IF v_id IS NULL THEN RETURN; END IF;
                SELECT NOT EXISTS (SELECT 1 FROM \(p).users WHERE id = v_id) INTO created;
                IF created AND v_timezone IS NULL THEN RETURN; END IF;  -- not a push user until it has a time zone
                IF v_timezone IS NULL THEN  -- null keeps the stored zone
                    SELECT u.timezone INTO v_timezone FROM \(p).users u WHERE u.id = v_id;
                END IF;
                INSERT INTO \(p).users AS u (id, timezone, locale, plan)
                VALUES (v_id, v_timezone, coalesce(\(text(users, "locale", "r")), 'en'), coalesce(\(text(users, "plan", "r")), 'free'))
                ON CONFLICT (id) DO UPDATE SET
                    timezone = coalesce(excluded.timezone, u.timezone),
                    locale = coalesce(\(text(users, "locale", "r")), u.locale),
                    plan = coalesce(\(text(users, "plan", "r")), u.plan),
                    updated_at = now()
                WHERE (u.timezone, u.locale, u.plan) IS DISTINCT FROM
                      (coalesce(excluded.timezone, u.timezone), coalesce(\(text(users, "locale", "r")), u.locale),
                       coalesce(\(text(users, "plan", "r")), u.plan));
                INSERT INTO \(p).notification_settings AS s
                    (user_id, diary_reminder_enabled, reminder_time, content_limit_warnings_enabled,
                     quiet_hours_start, quiet_hours_end)
                VALUES (v_id, coalesce(\(reminders), true), coalesce(\(reminderTime), '21:00'), coalesce(\(warnings), true),
                        \(quietStart), \(quietEnd))
                ON CONFLICT (user_id) DO UPDATE SET
                    diary_reminder_enabled = \(keep("reminders", reminders, "diary_reminder_enabled")),
                    reminder_time = \(keep("reminder_time", reminderTime, "reminder_time")),
                    content_limit_warnings_enabled = \(keep("limit_warnings", warnings, "content_limit_warnings_enabled")),
                    quiet_hours_start = \(quietMapped ? "excluded.quiet_hours_start" : "s.quiet_hours_start"),
                    quiet_hours_end = \(quietMapped ? "excluded.quiet_hours_end" : "s.quiet_hours_end"),
                    updated_at = now()
                WHERE (s.diary_reminder_enabled, s.reminder_time, s.content_limit_warnings_enabled, s.quiet_hours_start,
                       s.quiet_hours_end) IS DISTINCT FROM
                      (\(keep("reminders", reminders, "diary_reminder_enabled")), \(keep("reminder_time", reminderTime, "reminder_time")),
                       \(keep("limit_warnings", warnings, "content_limit_warnings_enabled")),
                       \(quietMapped ? "excluded.quiet_hours_start" : "s.quiet_hours_start"),
                       \(quietMapped ? "excluded.quiet_hours_end" : "s.quiet_hours_end"));
            \(pullDevices)
            END
            $fn$;
            """ + "\n"
                + triggerFunction(
                    users,
                    body: """
                                IF TG_OP = 'DELETE' THEN
                                    DELETE FROM \(p).users WHERE id = \(text(users, "id", "OLD"));
                                ELSE
                                    IF TG_OP = 'UPDATE' AND \(text(users, "id", "OLD")) IS DISTINCT FROM \(text(users, "id", "NEW")) THEN
                                        DELETE FROM \(p).users WHERE id = \(text(users, "id", "OLD"));
                                    END IF;
                                    PERFORM \(function(.users, "apply"))(NEW);
                                END IF;
                        """)
    }

    /// `integration_user_row(id)`: the time zone of the app's users row with that id (`''`: none, not a push user
    /// yet), NULL when there is no such row. `--explain` asks it about a user the push schema does not know. The id
    /// is converted to the id column's type (its index serves), and an id that converts to none is no row.
    private func userRowSQL(_ users: AppTableMapping.Table) -> String {
        var declare = ""
        var convert = ""
        var predicate = "\(text(users, "id", "r", safe: true)) = v_id"
        if let column = users.columns["id"], column.path.isEmpty {
            declare = "    k_id \(table(users)).\(quote(column.name))%TYPE;\n"
            convert = "BEGIN k_id := v_id; EXCEPTION WHEN OTHERS THEN RETURN NULL; END;\n    "
            predicate = "r.\(quote(column.name)) = k_id"
        }
        return """
            CREATE OR REPLACE FUNCTION \(p).integration_user_row(v_id text) RETURNS text
                LANGUAGE plpgsql STABLE SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $fn$
            DECLARE
                v_zone text;
            \(declare)BEGIN
                \(convert)SELECT coalesce(\(text(users, "timezone", "r", safe: true)), '') INTO v_zone
                FROM \(table(users)) r WHERE \(predicate) LIMIT 1;
                RETURN v_zone;
            END
            $fn$;
            """
    }

    private func devicesSQL(_ devices: AppTableMapping.Table) -> String {
        let fid = text(devices, "fid", "r")
        let token = text(devices, "token", "r")
        let active = activeCondition(devices, "r")
        // The app's own "seen", when it has one: the push schema's follows it (an unreadable value keeps the stored
        // one). In whole seconds, as the jobs write it: APNs' "invalid since" (whole seconds too) is compared with
        // it, and a device registered in the same second as its token died must not outlive the answer. Without it, the mirror's last write is the last sighting; either way the janitor's age rules leave
        // a mirrored device alone (migration 019): the app decides whether it is active.
        let seenMapped = isMapped(devices, "last_seen")
        let readSeen =
            seenMapped
            ? """
                BEGIN
                    v_seen := date_trunc('second', (\(text(devices, "last_seen", "r", safe: true)))::timestamptz);
                EXCEPTION WHEN OTHERS THEN
                    v_seen := NULL;
                END;

            """ : ""
        let seenUpdate =
            seenMapped
            ? "CASE WHEN v_seen IS NULL THEN d.last_seen ELSE v_seen END"
            : DeviceRegistration.lastSeenSQL(.postgres, row: "d", given: false)
        var sql = """
            CREATE OR REPLACE FUNCTION \(function(.devices, "apply")) (r \(table(devices)), old_token text) RETURNS void
                LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $fn$
            DECLARE
                v_user text := \(text(devices, "user_id", "r"));
                v_fid text := \(fid);
                v_token text := coalesce(\(fid), \(token));
                v_provider text := \(providerExpression(devices, "r"));
                v_platform text := lower(\(text(devices, "platform", "r")));
                v_environment text := lower(\(text(devices, "environment", "r")));
                v_seen timestamptz;
            BEGIN
                IF v_user IS NULL OR v_token IS NULL THEN RETURN; END IF;
            \(readSeen)
                IF v_provider IN (\(Provider.sqlList(\.storesLowerCase))) THEN v_token := lower(v_token); END IF;
            \(Self.foreignTokenChecks)
                IF NOT \(active) THEN
                    UPDATE \(p).user_devices SET is_active = false, deactivated_at = now(), deactivation_reason = 'logout',
                           updated_at = now()
                    WHERE token = v_token AND user_id = v_user AND is_active;
                    RETURN;
                END IF;
                IF NOT EXISTS (SELECT 1 FROM \(p).users WHERE id = v_user) THEN RETURN; END IF;  -- brought with the user
                INSERT INTO \(p).user_devices AS d
                    (user_id, token, provider, platform, apns_environment, token_kind, is_active, last_seen, app_version,
                     mirrored)
                VALUES (v_user, v_token, v_provider, v_platform,
                        \(Provider.sqlEnvironment(provider: "v_provider", "v_environment")),
                        CASE WHEN v_fid IS NOT NULL THEN 'fid' ELSE 'token' END, true, coalesce(v_seen, date_trunc('second', now())),
                        \(text(devices, "app_version", "r")), true)
                ON CONFLICT (token) DO UPDATE SET
                    \(DeviceRegistration.reRegisterSetSQL(
                        .postgres, row: "d", lastSeen: seenUpdate, mirrored: "true", updatedAt: "now()"))
                WHERE (d.user_id, d.provider, d.platform, d.apns_environment, d.token_kind, d.is_active, d.mirrored\(seenMapped ? ", d.last_seen" : ""))
                      IS DISTINCT FROM (excluded.user_id, excluded.provider, excluded.platform, excluded.apns_environment,
                                        excluded.token_kind, true, true\(seenMapped ? ", \(seenUpdate)" : ""));
                IF old_token IS NOT NULL AND old_token <> v_token THEN
                    UPDATE \(p).user_devices SET is_active = false, deactivated_at = now(), deactivation_reason = 'replaced',
                           updated_at = now()
                    WHERE token IN (old_token, lower(old_token)) AND user_id = v_user AND is_active;
                END IF;
            END
            $fn$;
            """ + "\n"
        sql += triggerFunction(
            devices,
            body: """
                        IF TG_OP = 'DELETE' THEN
                            UPDATE \(p).user_devices SET is_active = false, deactivated_at = now(), deactivation_reason = 'logout',
                                   updated_at = now()
                            WHERE token IN (coalesce(\(text(devices, "fid", "OLD")), \(text(devices, "token", "OLD"))),
                                            lower(coalesce(\(text(devices, "fid", "OLD")), \(text(devices, "token", "OLD")))))
                              AND user_id = \(text(devices, "user_id", "OLD")) AND is_active;
                        ELSIF TG_OP = 'UPDATE' THEN
                            PERFORM \(function(.devices, "apply"))(NEW, coalesce(\(text(devices, "fid", "OLD")), \(text(devices, "token", "OLD"))));
                        ELSE
                            PERFORM \(function(.devices, "apply"))(NEW, NULL);
                        END IF;
                """)
        // The jobs' deactivations (a provider said the token is dead) go back to the app's table, when its active
        // flag is a plain column. Never one for age (`stale`, `fcm_expired`): a device the app holds active is the
        // app's to retire. The mirror trigger then finds the push row
        // inactive already and changes nothing: no loop.
        if hasWriteBack, let active = devices.columns["active"], let user = devices.columns["user_id"] {
            let keys = [("fid", devices.columns["fid"]), ("token", devices.columns["token"])].compactMap {
                name, column in
                column.flatMap { $0.path.isEmpty ? (name, $0) : nil }
            }
            if !keys.isEmpty {
                // Compared in the app's column types (`%TYPE`), so that its own index on them answers.
                // The push schema keeps APNs tokens in lower case; the app's row may hold the upper-case form
                // (iOS apps that hex-encode with %02X): both are matched, each through the app's own index.
                let declarations =
                    (keys.map { name, column in
                        "    k_\(name) \(table(devices)).\(quote(column.name))%TYPE;"
                    } + [
                        "    k_upper \(table(devices)).\(quote((keys.first { $0.0 == "token" } ?? keys[0]).1.name))%TYPE;",
                        "    k_user \(table(devices)).\(quote(user.name))%TYPE;",
                    ]).joined(separator: "\n")
                let assignments =
                    (keys.map { name, _ in "k_\(name) := NEW.token;" } + [
                        "k_upper := CASE WHEN NEW.provider IN (\(Provider.sqlList(\.storesLowerCase))) THEN upper(NEW.token) ELSE NEW.token END;",
                        "k_user := NEW.user_id;",
                    ]).joined(separator: " ")
                let match = keys.map { name, column in
                    name == "token"
                        ? "\(quote(column.name)) IN (k_\(name), k_upper)" : "\(quote(column.name)) = k_\(name)"
                }.joined(separator: " OR ")
                sql += """

                    CREATE OR REPLACE FUNCTION \(p).integration_write_back() RETURNS trigger
                        LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $fn$
                    DECLARE
                    \(declarations)
                    BEGIN
                        BEGIN
                            \(assignments)
                            UPDATE \(table(devices)) SET \(quote(active.name)) = false
                            WHERE (\(match)) AND \(quote(user.name)) = k_user AND \(quote(active.name)) IS DISTINCT FROM false;
                        EXCEPTION WHEN OTHERS THEN
                            -- Never fails the jobs' own write: recorded, and reported by integrate check.
                            INSERT INTO \(p).integration_rejects (app_table, operation, error)
                            VALUES (\(literal(devices.qualifiedName)), 'WRITE BACK', SQLERRM);
                            RAISE WARNING 'diary-push: deactivation of a device not written back: %', SQLERRM;
                        END;
                        RETURN NULL;
                    END
                    $fn$;
                    DROP TRIGGER IF EXISTS \(Self.writeBackTrigger) ON \(p).user_devices;
                    CREATE TRIGGER \(Self.writeBackTrigger) AFTER UPDATE OF is_active ON \(p).user_devices
                        FOR EACH ROW WHEN (OLD.is_active AND NOT NEW.is_active
                                           AND NEW.deactivation_reason NOT IN ('logout', 'stale', 'fcm_expired'))
                        EXECUTE FUNCTION \(p).integration_write_back();
                    """
            }
        }
        return sql
    }

    /// The devices mirrored before migration 019 marked them (so that the janitor's age rules leave them alone),
    /// and those it deactivated for age while the app still holds them active, back: the app decides.
    private func mirroredSQL(_ devices: AppTableMapping.Table) -> String {
        let active =
            activeCondition(devices, "r", safe: true)
        return """
            UPDATE \(p).user_devices d SET mirrored = true
            FROM \(table(devices)) r WHERE NOT d.mirrored AND d.token = \(pushToken(devices, "r"));
            UPDATE \(p).user_devices d SET is_active = true, deactivated_at = NULL, deactivation_reason = NULL, updated_at = now()
            FROM \(table(devices)) r
            WHERE d.mirrored AND NOT d.is_active AND d.deactivation_reason IN ('stale', 'fcm_expired')
              AND d.token = \(pushToken(devices, "r")) AND d.user_id = \(text(devices, "user_id", "r", safe: true)) AND \(active);
            """
    }

    /// The app's entries read in place: `diary_entries` becomes a view, the union of the push schema's own entries
    /// (the table, renamed `diary_entries_native`, which `recordEntry` still writes through the view) and the app's,
    /// with an index on the app's table by (user id as "C" text, instant), so that "wrote today?" stays one index
    /// probe per user. No trigger on the app's busiest table: mirroring each entry made the app's writes 1.6×
    /// slower (BENCHMARKS.md#the-apps-own-tables-integrated). A `timestamp` without zone is read as UTC.
    private func entriesSQL(_ entries: AppTableMapping.Table) -> String {
        let user = entries.columns["user_id"]!.name
        let at = entries.columns["at"]!.name
        let index = quote("diary_push_\(entries.name)_by_user_time")
        let userExpression = "((\(quote(user)))::text COLLATE \"C\")"
        // A soft-deleted entry is no write: the view leaves it out.
        let kept = isSet(entries, "deleted", "e").map { " WHERE NOT \($0)" } ?? ""
        func branch(_ atExpression: String) -> String {
            """
                    CREATE INDEX IF NOT EXISTS \(index) ON \(table(entries)) (\(userExpression), (\(atExpression)));
                    CREATE OR REPLACE VIEW \(p).diary_entries AS
                        SELECT n.id, n.user_id, n.created_at FROM \(p).diary_entries_native n
                        UNION ALL
                        SELECT NULL::bigint, \(userExpression), (\(atExpression)) FROM \(table(entries)) e\(kept);
            """
        }
        return """
            DO $do$
            DECLARE
                v_type text := (SELECT format_type(a.atttypid, a.atttypmod) FROM pg_catalog.pg_attribute a
                                WHERE a.attrelid = \(literal(table(entries)))::regclass AND a.attname = \(literal(at)) AND NOT a.attisdropped);
                g record;
            BEGIN
                -- Once: the push schema's own entries keep their table (and its grants) under another name.
                IF (SELECT c.relkind FROM pg_catalog.pg_class c WHERE c.oid = '\(p).diary_entries'::regclass) = 'r' THEN
                    ALTER TABLE \(p).diary_entries RENAME TO diary_entries_native;
                END IF;
                IF v_type = 'timestamp with time zone' THEN
            \(branch(quote(at)))
                ELSIF v_type = 'timestamp without time zone' THEN
            \(branch("\(quote(at)) AT TIME ZONE 'UTC'"))
                ELSE
                    RAISE EXCEPTION 'entries: column % of % is %, not a timestamp', \(literal(at)), \(literal(entries.qualifiedName)), coalesce(v_type, 'missing');
                END IF;
                -- Whoever could read or write the table may read or write the view: its owner too, whose rights a
                -- table never granted on is an ACL that is still NULL (the default), hence acldefault.
                FOR g IN SELECT x.grantee::regrole::text AS role, x.privilege_type AS privilege
                         FROM pg_catalog.pg_class c, aclexplode(coalesce(c.relacl, acldefault('r', c.relowner))) x
                         WHERE c.oid = '\(p).diary_entries_native'::regclass AND x.grantee <> 0
                           AND x.privilege_type IN ('SELECT', 'INSERT') LOOP
                    EXECUTE format('GRANT %s ON \(p).diary_entries TO %s', g.privilege, g.role);
                END LOOP;
            END
            $do$;
            CREATE OR REPLACE FUNCTION \(p).integration_entries_insert() RETURNS trigger
                LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $fn$
            BEGIN
                INSERT INTO \(p).diary_entries_native (user_id, created_at) VALUES (NEW.user_id, NEW.created_at)
                    RETURNING id INTO NEW.id;
                RETURN NEW;
            END
            $fn$;
            DROP TRIGGER IF EXISTS \(Self.triggerName) ON \(p).diary_entries;
            CREATE TRIGGER \(Self.triggerName) INSTEAD OF INSERT ON \(p).diary_entries
                FOR EACH ROW EXECUTE FUNCTION \(p).integration_entries_insert();
            """
    }

    /// `integration_backfill(kind, blocks)`: the next `blocks` pages of the app's table brought in through the same
    /// apply function as the trigger; resumable (the next page is kept in `integration_progress`).
    private var backfillSQL: String {
        var cases: [String] = []
        var declarations = ""
        for kind in AppTableMapping.Kind.mirrored {
            guard let table = mapping.tables[kind] else { continue }
            let row = "r_\(kind.rawValue)"
            declarations += "    \(row) \(self.table(table))%ROWTYPE;\n"
            let call =
                kind == .devices ? "\(function(.devices, "apply"))(\(row), NULL)" : "\(function(kind, "apply"))(\(row))"
            // Row by row, each in its own subtransaction: a row the push schema refuses is recorded, as the
            // trigger records it, and the backfill goes on.
            cases.append(
                """
                    IF kind = '\(kind.rawValue)' THEN
                        total := pg_relation_size(\(literal(self.table(table)))::regclass) / current_setting('block_size')::bigint;
                        FOR \(row) IN SELECT * FROM \(self.table(table)) r
                            WHERE r.ctid >= format('(%s,0)', first)::tid AND r.ctid < format('(%s,0)', first + blocks)::tid LOOP
                            BEGIN
                                PERFORM \(call);
                            EXCEPTION WHEN OTHERS THEN
                                INSERT INTO \(p).integration_rejects (app_table, operation, error, row_key)
                                VALUES (\(literal(table.qualifiedName)), 'BACKFILL', SQLERRM, \(rowKey(table, row)));
                            END;
                            n := n + 1;
                        END LOOP;
                    END IF;
                """)
        }
        return """
            CREATE OR REPLACE FUNCTION \(p).integration_backfill(kind text, blocks integer)
                RETURNS TABLE (next_block bigint, total_blocks bigint, rows_done bigint, done boolean)
                LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $fn$
            DECLARE
                first bigint;
                total bigint := 0;
                n bigint := 0;
            \(declarations)BEGIN
                INSERT INTO \(p).integration_progress (kind) VALUES (kind) ON CONFLICT DO NOTHING;
                SELECT p.next_block INTO first FROM \(p).integration_progress p WHERE p.kind = integration_backfill.kind FOR UPDATE;
            \(cases.joined(separator: "\n"))
                UPDATE \(p).integration_progress p SET next_block = first + blocks, rows = p.rows + n,
                       done = first + blocks >= total
                WHERE p.kind = integration_backfill.kind;
                RETURN QUERY SELECT p.next_block, total, p.rows, p.done FROM \(p).integration_progress p
                    WHERE p.kind = integration_backfill.kind;
            END
            $fn$;
            """
    }

    /// `integration_drift(max)`: what differs between the app's tables and the push schema, each difference a row
    /// (kind, key, what), at most `max` of each kind, then the counts (key `count`).
    private var driftSQL: String {
        var checks: [String] = []
        // Every value read safely: a row the mirror refused (a flag that is no boolean) is no reason to stop the
        // report; it shows among the rejects, with its key.
        if let users = mapping.tables[.users] {
            let id = text(users, "id", "r", safe: true)
            let timezone = text(users, "timezone", "r", safe: true)
            checks.append(
                """
                    RETURN QUERY SELECT 'users'::text, x.id, 'in the app, not in the push schema'::text FROM (
                        SELECT \(id) AS id FROM \(table(users)) r WHERE \(timezone) IS NOT NULL
                        EXCEPT SELECT u.id FROM \(p).users u) x ORDER BY 2 LIMIT max;
                    RETURN QUERY SELECT 'users'::text, x.id, 'in the push schema, not in the app'::text FROM (
                        SELECT u.id FROM \(p).users u EXCEPT SELECT \(id) FROM \(table(users)) r) x ORDER BY 2 LIMIT max;
                \(valueChecks(users))
                    RETURN QUERY SELECT 'users'::text, 'count'::text,
                        (SELECT count(*) FROM \(table(users)) r WHERE \(timezone) IS NOT NULL)::text || ' in the app, '
                        || (SELECT count(*) FROM \(p).users)::text || ' in the push schema';
                """)
        }
        if let devices = mapping.tables[.devices], mapping.tables[.users] != nil {
            let token = pushToken(devices, "r")
            let active =
                activeCondition(devices, "r", safe: true)
            let user = text(devices, "user_id", "r", safe: true)
            // Keyed by user and masked token: enough to find the row, never the credential itself.
            checks.append(
                """
                    RETURN QUERY SELECT 'devices'::text, x.user_id || ' ' || \(p).integration_mask(x.token),
                        'active in the app, not in the push schema'::text FROM (
                        SELECT \(user) AS user_id, \(token) AS token
                        FROM \(table(devices)) r WHERE \(active) AND \(token) IS NOT NULL
                          AND EXISTS (SELECT 1 FROM \(p).users u WHERE u.id = \(user))
                        EXCEPT SELECT d.user_id, d.token FROM \(p).user_devices d WHERE d.is_active) x ORDER BY 2 LIMIT max;
                    RETURN QUERY SELECT 'devices'::text, x.user_id || ' ' || \(p).integration_mask(x.token),
                        'active in the push schema, not in the app'::text FROM (
                        SELECT d.user_id, d.token FROM \(p).user_devices d WHERE d.is_active
                        EXCEPT SELECT \(user), \(token) FROM \(table(devices)) r WHERE \(active)) x ORDER BY 2 LIMIT max;
                """)
        }
        checks.append(
            """
                RETURN QUERY SELECT 'rejects'::text, j.app_table || ' ' || j.operation || coalesce(' ' || j.row_key, ''), j.error
                    FROM \(p).integration_rejects j ORDER BY j.id DESC LIMIT max;
            """)
        return """
            CREATE OR REPLACE FUNCTION \(p).integration_drift(max integer)
                RETURNS TABLE (kind text, key text, what text)
                LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $fn$
            BEGIN
            \(checks.joined(separator: "\n"))
            END
            $fn$;
            """
    }

    /// For each mapped setting: the users whose value in the app (where it is not null: null keeps the stored one)
    /// differs from the push schema's.
    private func valueChecks(_ users: AppTableMapping.Table) -> String {
        let fields: [(String, String, String)] = [
            ("timezone", "u.timezone", "text"), ("locale", "u.locale", "text"), ("plan", "u.plan", "text"),
            ("reminder_time", "s.reminder_time", "clock"), ("reminders", "s.diary_reminder_enabled", "flag"),
            ("limit_warnings", "s.content_limit_warnings_enabled", "flag"),
        ]
        return fields.filter { users.columns[$0.0] != nil }.map { field, pushColumn, type in
            let value =
                switch type {
                case "clock": "left(\(text(users, field, "r", safe: true)), 5)"
                case "flag": flag(users, field, "r", safe: true)
                default: text(users, field, "r", safe: true)
                }
            return """
                    RETURN QUERY SELECT 'users'::text, x.id, '\(field) differs'::text FROM (
                        SELECT \(text(users, "id", "r", safe: true)) AS id, \(value) AS v FROM \(table(users)) r
                        WHERE \(value) IS NOT NULL AND \(text(users, "timezone", "r", safe: true)) IS NOT NULL
                        EXCEPT SELECT u.id, \(pushColumn) FROM \(p).users u
                        JOIN \(p).notification_settings s ON s.user_id = u.id) x
                    WHERE EXISTS (SELECT 1 FROM \(p).users u WHERE u.id = x.id) ORDER BY 2 LIMIT max;
                """
        }.joined(separator: "\n")
    }

    /// Whether the deactivations are written back: the device table's active flag, user and token (or FID) are
    /// plain columns.
    private var hasWriteBack: Bool {
        guard let devices = mapping.tables[.devices], devices.columns["active"]?.path.isEmpty == true,
            devices.columns["user_id"]?.path.isEmpty == true
        else { return false }
        return [devices.columns["fid"], devices.columns["token"]].compactMap { $0 }.contains { $0.path.isEmpty }
    }

    /// No role of the app's reaches the push schema; the owner, when named, gets what the functions need.
    private var grantsSQL: String {
        var lines = [
            "REVOKE ALL ON SCHEMA \(p) FROM PUBLIC;",
            """
            DO $do$
            DECLARE r text;
            BEGIN
                -- Supabase's API roles: the push schema is not theirs (PostgREST exposes only what they may use).
                FOREACH r IN ARRAY ARRAY['anon', 'authenticated'] LOOP
                    IF EXISTS (SELECT 1 FROM pg_roles WHERE rolname = r) THEN
                        EXECUTE format('REVOKE ALL ON SCHEMA %I FROM %I', '\(pushSchema)', r);
                        EXECUTE format('REVOKE ALL ON ALL TABLES IN SCHEMA %I FROM %I', '\(pushSchema)', r);
                    END IF;
                END LOOP;
            END
            $do$;
            """,
        ]
        var functions: [String] = []
        for kind in AppTableMapping.Kind.mirrored where mapping.tables[kind] != nil {
            let table = mapping.tables[kind]!
            let arguments = kind == .devices ? "\(self.table(table)), text" : self.table(table)
            functions.append("\(function(kind, "apply"))(\(arguments))")
            functions.append("\(function(kind, "trigger"))()")
        }
        if mapping.tables[.entries] != nil { functions.append("\(p).integration_entries_insert()") }
        functions.append("\(p).integration_backfill(text, integer)")
        functions.append("\(p).integration_drift(integer)")
        if mapping.tables[.users] != nil { functions.append("\(p).integration_user_row(text)") }
        functions += Self.helpers.map { "\(p).\($0)" }
        let writeBack = hasWriteBack
        if writeBack { functions.append("\(p).integration_write_back()") }
        for function in functions {
            lines.append("REVOKE ALL ON FUNCTION \(function) FROM PUBLIC;")
        }
        if let owner {
            let role = quote(owner)
            lines.append(
                """
                DO $do$ BEGIN
                    CREATE ROLE \(role) NOLOGIN;
                EXCEPTION WHEN duplicate_object OR unique_violation THEN NULL;  -- made meanwhile, by another database's apply
                END $do$;
                -- Who applies this hands the functions and the view to that role: a role that is no superuser (Supabase's
                -- postgres, the owner of the app's tables) must be a member of it to do so. CREATEROLE may grant that.
                DO $do$ BEGIN
                    IF NOT pg_has_role(CURRENT_USER, '\(owner)', 'MEMBER') THEN
                        GRANT \(role) TO CURRENT_USER;
                    END IF;
                END $do$;
                -- CREATE only while the functions and the view are handed over (a new owner must be allowed to create
                -- them there); revoked below.
                GRANT USAGE, CREATE ON SCHEMA \(p) TO \(role);
                GRANT SELECT, INSERT, UPDATE, DELETE ON \(p).users, \(p).notification_settings, \(p).user_devices,
                    \(p).diary_entries, \(p).integration_rejects, \(p).integration_progress TO \(role);
                -- A user's deletion removes their history through the push schema's statement triggers.
                GRANT SELECT, DELETE ON \(p).notification_logs TO \(role);
                GRANT SELECT, UPDATE, DELETE ON \(p).notification_deliveries TO \(role);
                """)
            if mapping.tables[.entries] != nil {
                // The view reads the app's entries with its owner's rights (and under RLS, its policies): the
                // owner's, then, who has a read policy; whoever applies this keeps reading and writing through it.
                lines.append(
                    """
                    GRANT SELECT, INSERT ON \(p).diary_entries_native TO \(role);
                    GRANT SELECT, INSERT ON \(p).diary_entries TO CURRENT_USER;
                    ALTER VIEW \(p).diary_entries OWNER TO \(role);
                    """)
            }
            // Row-level security on the app's tables (Supabase's way) would hide their rows from the owner: a
            // policy of its own lets it read them (the backfill, a new user's devices) and, for the write-back,
            // update the device table.
            for table in mapping.tables.values.sorted(by: { $0.kind.rawValue < $1.kind.rawValue }) {
                lines.append("GRANT USAGE ON SCHEMA \(quote(table.schema)) TO \(role);")
                lines.append("GRANT SELECT ON \(self.table(table)) TO \(role);")
                lines.append("DROP POLICY IF EXISTS \(Self.readPolicy) ON \(self.table(table));")
                lines.append(
                    "CREATE POLICY \(Self.readPolicy) ON \(self.table(table)) FOR SELECT TO \(role) USING (true);")
            }
            if writeBack, let devices = mapping.tables[.devices], let active = devices.columns["active"] {
                lines.append("GRANT UPDATE (\(quote(active.name))) ON \(table(devices)) TO \(role);")
                lines.append("DROP POLICY IF EXISTS \(Self.writeBackPolicy) ON \(table(devices));")
                lines.append(
                    "CREATE POLICY \(Self.writeBackPolicy) ON \(table(devices)) FOR UPDATE TO \(role) USING (true) WITH CHECK (true);"
                )
            }
            for function in functions { lines.append("ALTER FUNCTION \(function) OWNER TO \(role);") }
            lines.append("REVOKE CREATE ON SCHEMA \(p) FROM \(role);")
        }
        // The jobs' role (the one `pushctl migrate` ran as, which owns the push schema's tables) runs `integrate
        // backfill` and `integrate check`, and `--explain` reads a user's row in the app's table: it may call those
        // functions, and nothing else of the mirror's.
        let jobsFunctions =
            ["\(p).integration_backfill(text, integer)", "\(p).integration_drift(integer)"]
            + (mapping.tables[.users] != nil ? ["\(p).integration_user_row(text)"] : [])
        lines.append(
            """
            DO $do$
            DECLARE jobs text := (SELECT c.relowner::regrole::text FROM pg_catalog.pg_class c
                                  WHERE c.oid = '\(p).users'::regclass);
            BEGIN
                EXECUTE format('GRANT EXECUTE ON FUNCTION \(jobsFunctions.joined(separator: ", ")) TO %s', jobs);
            END
            $do$;
            """)
        return lines.joined(separator: "\n")
    }
}

/// One row change of an app's table, as a database webhook reports it (Supabase's Database Webhooks: `type`,
/// `table`, `schema`, `record`, `old_record`).
package struct DatabaseChange: Sendable {
    package enum Kind: String, Sendable, CaseIterable {
        case insert = "INSERT"
        case update = "UPDATE"
        case delete = "DELETE"
        /// A table emptied: Supabase sends it with no rows, so it is refused (``AppTableMapping/appChange(for:)``).
        case truncate = "TRUNCATE"
    }

    package let kind: Kind
    package let schema: String
    package let table: String
    /// The row after the change (nil for a delete).
    package let record: JSONValue?
    /// The row before the change (nil for an insert; Supabase sends it for updates and deletes).
    package let oldRecord: JSONValue?

    package init(kind: Kind, schema: String, table: String, record: JSONValue?, oldRecord: JSONValue?) {
        self.kind = kind
        self.schema = schema
        self.table = table
        self.record = record
        self.oldRecord = oldRecord
    }
}

/// What a change of an app's table means for the jobs: one of their own operations, each checked exactly as
/// the API and `pushctl` check it, or nothing (with why).
package enum AppChange: Sendable {
    case setUser(UserEdit)
    case deleteUser(id: String)
    case register(DeviceRegistration)
    case unregister(token: String, userID: String)
    case recordEntry(userID: String, at: Int64?)
    case nothing(reason: String)
}

extension AppTableMapping {
    /// The operation `change` stands for. Users: inserts and updates set the mapped settings (a mapped JSON field
    /// that is null keeps the stored value, except quiet hours, where null means none), deletes delete the user.
    /// Devices: an active row registers (an update that changed the token replaces the old one), an inactive or
    /// deleted one logs out. Entries: an insert is a write (at the mapped instant, or now); updates and deletes
    /// change nothing, as a deleted entry does not unwrite a day. A change of a table the mapping does not name,
    /// or a row whose values do not pass the checks, is a ``JobError/usage(_:)`` naming the column.
    package func appChange(for change: DatabaseChange) throws(JobError) -> AppChange {
        guard let table = table(schema: change.schema, name: change.table) else {
            let mapped = tables.values.map(\.qualifiedName).sorted().joined(separator: ", ")
            throw .usage("table \(change.schema).\(change.table) is not in the mapping (it maps \(mapped))")
        }
        guard change.kind != .truncate else {
            // No row to act on, and emptying the push schema's users or devices from one call is no webhook's to do.
            throw .usage(
                "a TRUNCATE of \(table.qualifiedName) carries no rows, so nothing was changed: remove the push schema's \(table.kind == .users ? "users" : table.kind == .devices ? "devices" : "entries") yourself (DELETE /v1/users/{id}, pushctl) or send each row's DELETE"
            )
        }
        let row = change.kind == .delete ? change.oldRecord : change.record
        guard let row, row.isObject else {
            let which = change.kind == .delete ? "old_record" : "record"
            throw .usage("\(which): a \(change.kind.rawValue) of \(table.qualifiedName) needs the row as an object")
        }
        let values = RowValues(table: table, row: row)
        switch table.kind {
        case .users:
            let id = try values.id("id")
            if change.kind == .delete { return .deleteUser(id: id) }
            return .setUser(
                try UserEdit.checked(
                    id: id, timezone: try values.text("timezone"), locale: try values.text("locale"),
                    plan: try values.text("plan"), reminderTime: try values.clockTime("reminder_time"),
                    reminders: try values.flag("reminders"), limitWarnings: try values.flag("limit_warnings"),
                    quietHours: try values.quietHours(), name: { values.name(of: $0.rawValue) }))
        case .devices:
            let userID = try values.id("user_id")
            let fid = try values.text("fid")
            let token: String? = if let fid { fid } else { try values.text("token") }
            guard let token else {
                throw .usage("\(values.name(of: "token")): a device row without a token")
            }
            let active = try values.flag("active")
            let revoked = AppTableMapping.isSet(try values.value("revoked"))
            if change.kind == .delete || active == false || revoked {
                return .unregister(token: token, userID: userID)
            }
            var replaces: String?
            if change.kind == .update, let old = change.oldRecord, old.isObject {
                let before = RowValues(table: table, row: old)
                let oldFID = try before.text("fid")
                let oldToken: String? = if let oldFID { oldFID } else { try before.text("token") }
                if let oldToken, oldToken != token { replaces = oldToken }
            }
            return .register(
                try values.registration(userID: userID, token: token, isFID: fid != nil, replaces: replaces))
        case .entries:
            guard change.kind == .insert else {
                return .nothing(
                    reason: "an entry \(change.kind == .update ? "updated" : "deleted") does not unwrite a day")
            }
            if AppTableMapping.isSet(try values.value("deleted")) {
                return .nothing(reason: "a deleted entry (\(values.name(of: "deleted")) set) is no write")
            }
            return .recordEntry(userID: try values.id("user_id"), at: try values.instant("at"))
        }
    }
}

/// A row's values read through a table's mapping.
private struct RowValues {
    let table: AppTableMapping.Table
    let row: JSONValue

    /// How a message names a field: `profiles.preferences.reminder_time`.
    func name(of field: String) -> String {
        "\(table.name).\(table.columns[field]?.description ?? field)"
    }

    /// The mapped value: the column, or the field inside a JSON column; nil when not mapped or absent. A JSON
    /// column may arrive as an object or as its text.
    func value(_ field: String) throws(JobError) -> JSONValue? {
        if let fixed = table.fixed[field] { return .string(fixed) }
        guard let column = table.columns[field] else { return nil }
        var value = row[column.name]
        for key in column.path {
            if case .string(let text)? = value, let parsed = try? JSONValue(parsing: text) { value = parsed }
            guard let current = value, !current.isNull else { return nil }
            guard current.isObject else { throw .usage("\(name(of: field)): \(column.name) is not a JSON object") }
            value = current[key]
        }
        return value
    }

    func text(_ field: String) throws(JobError) -> String? {
        switch try value(field) {
        case nil, .null?: return nil
        case .string(let text)?: return text
        case .number(let text)?: return text
        default: throw .usage("\(name(of: field)): not text")
        }
    }

    /// An id: text or a whole number (a bigint key), required.
    func id(_ field: String) throws(JobError) -> String {
        guard let text = try text(field) else { throw .usage("\(name(of: field)): missing") }
        return text
    }

    func flag(_ field: String) throws(JobError) -> Bool? {
        switch try value(field) {
        case nil, .null?: return nil
        case .bool(let flag)?: return flag
        default: throw .usage("\(name(of: field)): not true or false")
        }
    }

    /// `HH:MM`, or a PostgreSQL `time` as JSON writes it (`21:00:00`, whole minutes only).
    func clockTime(_ field: String) throws(JobError) -> String? {
        guard let text = try text(field) else { return nil }
        if text.utf8.count == 8, text.hasSuffix(":00") { return String(text.prefix(5)) }
        return text
    }

    /// Mapped and null: no quiet hours (`off`).
    func quietHours() throws(JobError) -> String? {
        guard table.columns["quiet_hours"] != nil else { return nil }
        return try text("quiet_hours") ?? "off"
    }

    /// An instant: RFC 3339, or a PostgreSQL `timestamp` without a zone as JSON writes it, taken as UTC.
    func instant(_ field: String) throws(JobError) -> Int64? {
        guard let text = try text(field) else { return nil }
        guard let instant = Timestamps.parse(text) ?? Timestamps.parse(text + "Z"),
            Timestamps.supportedRange.contains(instant)
        else {
            throw .usage("\(name(of: field)): not an ISO 8601 instant (e.g. 2026-11-21T20:00:00+00:00): \(text)")
        }
        return instant
    }

    func registration(userID: String, token: String, isFID: Bool, replaces: String?) throws(JobError)
        -> DeviceRegistration
    {
        func choice<T>(_ field: String, _ make: (String) -> T?, _ allowed: [String]) throws(JobError) -> T? {
            guard let text = try text(field) else { return nil }
            guard let value = make(text.lowercased()) else {
                throw .usage("\(name(of: field)): \(text) is not one of \(allowed.joined(separator: ", "))")
            }
            return value
        }
        guard let platform = try choice("platform", Platform.init(rawValue:), Platform.allCases.map(\.rawValue)) else {
            throw .usage("\(name(of: "platform")): missing")
        }
        let provider: Provider? =
            if isFID {
                .ofInstallationIDs
            } else if table.fixed["provider"] == AppTableMapping.providerByShape {
                Provider.byShape(token)
            } else {
                try choice("provider", Provider.init(rawValue:), Provider.all.map(\.rawValue))
            }
        guard let provider else { throw .usage("\(name(of: "provider")): missing") }
        var registration: DeviceRegistration
        do {
            registration = try DeviceRegistration(
                userID: userID, token: token, provider: provider, platform: platform,
                apnsEnvironment: try choice(
                    "environment", APNsEnvironment.init(rawValue:), APNsEnvironment.allCases.map(\.rawValue)),
                appVersion: try text("app_version"), kind: isFID ? .fid : .token, replaces: replaces)
        } catch {
            throw .usage(error.message)
        }
        registration.mirrored = true
        // An unreadable sighting keeps the stored one, as the SQL mirror does: it is no reason to refuse the device.
        registration.lastSeen = (try? instant("last_seen")) ?? nil
        return registration
    }
}

import Foundation

/// Where an app keeps its users, devices and entries in its own tables: which table, and which column (or which
/// field of a JSON column) holds each of our fields. Read from a short JSON file (`PUSH_API_WEBHOOK_MAPPING`), so
/// that a database webhook of the app's tables (``DatabaseChange``) can be turned into the jobs' own operations.
///
/// ```json
/// {
///   "users":   { "table": "public.profiles",
///                "columns": { "id": "id", "timezone": "timezone", "reminder_time": "preferences.reminder_time" } },
///   "devices": { "table": "public.user_devices",
///                "columns": { "user_id": "user_id", "token": "fcm_token", "platform": "platform",
///                             "active": "is_active" },
///                "fixed": { "provider": "fcm" } },
///   "entries": { "table": "public.entries", "columns": { "user_id": "user_id", "at": "created_at" } }
/// }
/// ```
///
/// A column is an identifier; `column.key.key` names a field inside a JSON column; a name with other characters
/// goes in double quotes (`"\"Posted At\""`), and every name is matched as spelled (case kept). `fixed` gives a value every row
/// of the table has (a table of FCM tokens has provider `fcm`). Each table is optional; a table's required fields
/// are in ``Kind/required``. A device's `last_seen` (a timestamp, or ISO 8601 text) is the app's own "seen": the
/// push schema's follows it. A device's `revoked` and an entry's `deleted` take the row out when set (a timestamp
/// such as `revoked_at`, or a flag that is true): a revoked device is inactive whatever `active` says, a
/// soft-deleted entry is no write. `fixed.provider` `by_shape` reads each token's provider from its shape.
package struct AppTableMapping: Sendable, Hashable {
    /// The three kinds of table the jobs read.
    package enum Kind: String, Sendable, CaseIterable {
        case users, devices, entries

        /// The kinds `pushctl integrate postgres` mirrors into the push schema (entries are read in place).
        package static let mirrored: [Kind] = [.users, .devices]

        /// The fields a table of this kind may map, each to a column or a fixed value.
        package var fields: [String] {
            switch self {
            case .users: UserEdit.Field.allCases.map(\.rawValue)
            case .devices:
                [
                    "user_id", "token", "fid", "provider", "platform", "environment", "app_version", "active",
                    "revoked", "last_seen",
                ]
            case .entries: ["user_id", "at", "deleted"]
            }
        }

        /// The fields without which a row means nothing (`token` or `fid` for devices, `provider` unless only
        /// `fid`, checked apart).
        package var required: [String] {
            switch self {
            case .users: ["id"]
            case .devices: ["user_id", "platform"]
            case .entries: ["user_id"]
            }
        }
    }

    /// A column, or a field inside a JSON column (`preferences.reminder_time`: path `["reminder_time"]`).
    package struct Column: Sendable, Hashable, CustomStringConvertible {
        package let name: String
        package let path: [String]
        package var description: String { ([name] + path).joined(separator: ".") }
    }

    /// One app table and where our fields are in it.
    package struct Table: Sendable, Hashable {
        package let kind: Kind
        package let schema: String
        package let name: String
        package let columns: [String: Column]
        package let fixed: [String: String]
        package var qualifiedName: String { "\(schema).\(name)" }
    }

    package let tables: [Kind: Table]

    /// The table a change names, by schema and name.
    package func table(schema: String, name: String) -> Table? {
        tables.values.first { $0.schema == schema && $0.name == name }
    }

    /// Reads and checks the mapping at `path`; a file that cannot be read is ``JobError/noInput(_:)``, one that is
    /// not a mapping ``JobError/config(_:)`` naming the setting, the file and what is wrong.
    package static func load(path: String, setting: String) throws(JobError) -> AppTableMapping {
        // Through a file handle, so that a pipe (`--mapping /dev/stdin`, `<(…)`) reads as a file does.
        guard let handle = FileHandle(forReadingAtPath: path) else { throw .noInput("\(setting): cannot read \(path)") }
        defer { try? handle.close() }
        guard let data = try? FileDescriptorRead.toEnd(handle.fileDescriptor),
            let text = String(data: data, encoding: .utf8)
        else {
            throw .noInput("\(setting): cannot read \(path)")
        }
        do throws(MappingError) {
            return try AppTableMapping(json: text)
        } catch {
            throw .config("\(setting): \(path): \(error.reason)")
        }
    }

    package struct MappingError: Error, Sendable {
        package let reason: String
        init(_ reason: String) { self.reason = reason }
    }

    /// Parses a mapping document (strict JSON), refusing unknown tables or fields, names that are neither plain
    /// SQL identifiers nor quoted (``names(_:)``), and a table without its required fields.
    package init(json: String) throws(MappingError) {
        let document: JSONValue
        do { document = try JSONValue(parsing: json) } catch { throw MappingError("\(error)") }
        guard let members = document.members else { throw MappingError("not a JSON object") }
        var tables: [Kind: Table] = [:]
        for (key, value) in members {
            guard let kind = Kind(rawValue: key) else {
                throw MappingError("unknown table kind \"\(key)\" (the kinds are users, devices, entries)")
            }
            guard tables[kind] == nil else { throw MappingError("\(key): given twice") }
            tables[kind] = try Self.table(kind, value)
        }
        guard !tables.isEmpty else { throw MappingError("no table: map at least one of users, devices, entries") }
        let names = tables.values.map(\.qualifiedName)
        guard Set(names).count == names.count else { throw MappingError("two kinds map the same table") }
        self.tables = tables
    }

    private static func table(_ kind: Kind, _ value: JSONValue) throws(MappingError) -> Table {
        let what = kind.rawValue
        guard let members = value.members else { throw MappingError("\(what): not an object") }
        var table: String?
        var columns: [String: Column] = [:]
        var fixed: [String: String] = [:]
        for (key, member) in members {
            switch key {
            case "table":
                guard let text = member.string else { throw MappingError("\(what).table: not a string") }
                table = text
            case "columns", "fixed":
                guard let fields = member.members else { throw MappingError("\(what).\(key): not an object") }
                for (field, spelled) in fields {
                    guard kind.fields.contains(field) else {
                        throw MappingError(
                            "\(what).\(key): unknown field \"\(field)\" (\(what) has \(kind.fields.joined(separator: ", ")))"
                        )
                    }
                    guard columns[field] == nil, fixed[field] == nil else {
                        throw MappingError("\(what): \(field) given twice")
                    }
                    guard let text = spelled.string else {
                        throw MappingError("\(what).\(key).\(field): not a string")
                    }
                    if key == "fixed" {
                        fixed[field] = text
                    } else {
                        guard let parts = names(text) else {
                            throw MappingError(
                                "\(what).columns.\(field): \"\(text)\" is not a column or column.json_field (letters, digits, _; any other name in double quotes)"
                            )
                        }
                        columns[field] = Column(name: parts[0], path: Array(parts.dropFirst()))
                    }
                }
            default:
                throw MappingError("\(what): unknown key \"\(key)\" (a table has table, columns, fixed)")
            }
        }
        guard let table else { throw MappingError("\(what): no table") }
        guard let parts = names(table), (1...2).contains(parts.count) else {
            throw MappingError(
                "\(what).table: \"\(table)\" is not table or schema.table (any name other than letters, digits, _ in double quotes)"
            )
        }
        for field in kind.required where columns[field] == nil && fixed[field] == nil {
            throw MappingError("\(what): \(field) is not mapped")
        }
        for field in ["id", "user_id", "token", "fid", "at", "active", "revoked", "last_seen", "deleted"]
        where fixed[field] != nil {
            throw MappingError("\(what).fixed.\(field): a row's own value, not one for every row (map a column)")
        }
        if kind == .devices {
            guard columns["token"] != nil || columns["fid"] != nil else {
                throw MappingError("devices: map token, fid or both")
            }
            if columns["token"] != nil, columns["provider"] == nil, fixed["provider"] == nil {
                throw MappingError(
                    "devices: map provider (a column, or fixed apns, fcm or \(Self.providerByShape)) for token")
            }
            if let provider = fixed["provider"], provider != Self.providerByShape, Provider(rawValue: provider) == nil {
                throw MappingError(
                    "devices.fixed.provider: \"\(provider)\" is not apns, fcm or \(Self.providerByShape) (each token by its shape)"
                )
            }
        }
        return Table(
            kind: kind, schema: parts.count == 2 ? parts[0] : "public", name: parts.last!, columns: columns,
            fixed: fixed)
    }

    /// The fixed provider that reads each token's provider from its shape: an APNs device token (hexadecimal,
    /// ``DeviceToken/isAPNsShaped(_:)``) is APNs, any other token FCM. For a table that holds an iOS app's raw APNs
    /// tokens beside FCM ones, with no column saying which.
    package static let providerByShape = "by_shape"

    /// Whether a row's value of a "takes the row out" field (`revoked`, `deleted`) is set: present, not null, and
    /// not false (a timestamp like `revoked_at`, or a flag like `is_deleted`).
    package static func isSet(_ value: JSONValue?) -> Bool {
        switch value {
        case nil, .null?, .bool(false)?: false
        case .string(let text)?: !["", "false", "f", "0", "no", "off"].contains(text.lowercased())
        default: true
        }
    }

    /// The names of a dotted mapping name (`schema.table`, `column.json_field`), each as the database spells it:
    /// a plain identifier as written (case kept: `UserDevices` is the table created as `"UserDevices"`), or one in
    /// double quotes for any other name (`"Diary Posts"`, `"a.b"`; `""` is a quote inside). Nil when a part is
    /// neither, or is empty or longer than PostgreSQL's 63 bytes.
    package static func names(_ text: String) -> [String]? {
        var parts: [String] = []
        var rest = Substring(text)
        while true {
            var part = ""
            if rest.first == "\"" {
                rest.removeFirst()
                while true {
                    guard let character = rest.popFirst() else { return nil }  // no closing quote
                    if character == "\"" {
                        guard rest.first == "\"" else { break }
                        rest.removeFirst()
                    }
                    part.append(character)
                }
                guard !part.isEmpty, part.utf8.count <= 63, !part.unicodeScalars.contains("\0") else { return nil }
            } else {
                part = String(rest.prefix { $0 != "." })
                rest = rest.dropFirst(part.count)
                guard isIdentifier(part) else { return nil }
            }
            parts.append(part)
            guard let separator = rest.popFirst() else { return parts }
            guard separator == ".", !rest.isEmpty else { return nil }
        }
    }

    /// A plain SQL identifier, as the generated SQL may write it unquoted: a letter or `_`, then letters, digits,
    /// `_`; at most 63 bytes (PostgreSQL's limit).
    package static func isIdentifier(_ text: String) -> Bool {
        guard let first = text.unicodeScalars.first, text.utf8.count <= 63 else { return false }
        func letter(_ scalar: Unicode.Scalar) -> Bool {
            ("a"..."z").contains(scalar) || ("A"..."Z").contains(scalar) || scalar == "_"
        }
        return letter(first) && text.unicodeScalars.allSatisfy { letter($0) || ("0"..."9").contains($0) }
    }
}

/// What the integration's SQL functions answer, for `pushctl integrate backfill` and `check` (PostgreSQL only).
package protocol IntegrationStore: Sendable {
    /// One step of the backfill of `kind` (`users`, `devices`, `entries`): the next `blocks` pages of the app's
    /// table, through the trigger's own apply function. Resumable: the next page is kept in the database.
    func integrationBackfill(kind: AppTableMapping.Kind, blocks: Int) async throws(JobError) -> BackfillProgress
    /// Differences between the app's tables and the push schema (at most `max` of each kind), the counts (key
    /// `count`), and the rows the mirror could not take (kind `rejects`).
    func integrationDrift(max: Int) async throws(JobError) -> [DriftRow]
    /// The kinds of table the SQL mirror makes the app's own (users, devices): those whose mirror functions are
    /// installed in the push schema. Empty without an integration.
    func integratedKinds() async throws(JobError) -> Set<AppTableMapping.Kind>
}

package struct BackfillProgress: Sendable, Hashable {
    package let nextBlock: Int64
    package let totalBlocks: Int64
    package let rows: Int64
    package let done: Bool
    package init(nextBlock: Int64, totalBlocks: Int64, rows: Int64, done: Bool) {
        self.nextBlock = nextBlock
        self.totalBlocks = totalBlocks
        self.rows = rows
        self.done = done
    }
}

package struct DriftRow: Sendable, Hashable {
    package let kind: String
    package let key: String
    package let what: String
    package init(kind: String, key: String, what: String) {
        self.kind = kind
        self.key = key
        self.what = what
    }
    /// A count line, not a difference.
    package var isCount: Bool { key == "count" }
}

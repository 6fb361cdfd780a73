import Testing

@testable import JobKit

/// Issue 66: the mapping of an app's own tables (`PUSH_API_WEBHOOK_MAPPING`) and what a row change of them means.
@Suite struct AppTableMappingTests {
    static let mapping = """
        {
          "users": { "table": "profiles",
                     "columns": { "id": "id", "timezone": "tz", "reminder_time": "prefs.reminder.time",
                                  "reminders": "prefs.on", "quiet_hours": "quiet" } },
          "devices": { "table": "app.phones",
                       "columns": { "user_id": "owner", "token": "token", "fid": "fid", "provider": "kind",
                                    "platform": "os" } },
          "entries": { "table": "notes", "columns": { "user_id": "author" } }
        }
        """

    static func change(
        _ kind: DatabaseChange.Kind, _ table: String, schema: String = "public", _ record: String?,
        old: String? = nil
    ) throws -> DatabaseChange {
        DatabaseChange(
            kind: kind, schema: schema, table: table, record: try record.map { try JSONValue(parsing: $0) },
            oldRecord: try old.map { try JSONValue(parsing: $0) })
    }

    @Test func aMappingNamesTablesColumnsAndFieldsOfJSONColumns() throws {
        let mapping = try AppTableMapping(json: Self.mapping)
        let users = try #require(mapping.tables[.users])
        #expect(users.qualifiedName == "public.profiles")
        #expect(users.columns["reminder_time"] == .init(name: "prefs", path: ["reminder", "time"]))
        #expect(mapping.table(schema: "app", name: "phones")?.kind == .devices)
        #expect(mapping.table(schema: "public", name: "phones") == nil)
    }

    @Test(arguments: [
        (#"{"orders":{"table":"o","columns":{}}}"#, "unknown table kind \"orders\""),
        (#"{}"#, "no table"),
        (#"{"entries":{"columns":{"user_id":"a"}}}"#, "entries: no table"),
        (#"{"entries":{"table":"e","columns":{}}}"#, "entries: user_id is not mapped"),
        (#"{"entries":{"table":"e","columns":{"user_id":"a","mood":"m"}}}"#, "unknown field \"mood\""),
        (#"{"entries":{"table":"e","columns":{"user_id":"a; DROP TABLE x"}}}"#, "is not a column"),
        (#"{"entries":{"table":"a.b.c","columns":{"user_id":"a"}}}"#, "is not table or schema.table"),
        (#"{"entries":{"table":"e","columns":{"user_id":"a"},"fixed":{"user_id":"u"}}}"#, "given twice"),
        (#"{"entries":{"table":"e","fixed":{"user_id":"u"}}}"#, "a row's own value"),
        (#"{"devices":{"table":"d","columns":{"user_id":"u","platform":"p"}}}"#, "map token, fid or both"),
        (#"{"devices":{"table":"d","columns":{"user_id":"u","platform":"p","token":"t"}}}"#, "map provider"),
        (
            #"{"entries":{"table":"e","columns":{"user_id":"a"}},"users":{"table":"e","columns":{"id":"i"}}}"#,
            "the same table"
        ),
        (#"{"entries":{"table":"e","columns":{"user_id":"a"}},}"#, "invalid JSON"),
    ])
    func aMappingThatIsNotOneSaysWhereAndWhy(_ json: String, _ problem: String) {
        #expect {
            _ = try AppTableMapping(json: json)
        } throws: { error in
            (error as? AppTableMapping.MappingError)?.reason.contains(problem) == true
        }
    }

    @Test func userRowsSetTheMappedSettingsConverted() throws {
        let mapping = try AppTableMapping(json: Self.mapping)
        // The JSON column as an object or as its text; a PostgreSQL time; quiet hours null: none.
        for prefs in [
            #"{"reminder":{"time":"07:30:00"},"on":false}"#, #""{\"reminder\":{\"time\":\"07:30\"},\"on\":false}""#,
        ] {
            let change = try Self.change(
                .insert, "profiles", #"{"id":42,"tz":"Asia/Tokyo","prefs":\#(prefs),"quiet":null}"#)
            guard case .setUser(let edit) = try mapping.appChange(for: change) else {
                Issue.record("not a user edit")
                return
            }
            #expect(edit.id == "42" && edit.timezone == "Asia/Tokyo" && edit.reminderTime == "07:30")
            #expect(edit.diaryReminderEnabled == false && edit.quietHours == .off && edit.locale == nil)
        }
        let deleted = try mapping.appChange(for: try Self.change(.delete, "profiles", nil, old: #"{"id":"u1"}"#))
        guard case .deleteUser(let id) = deleted else {
            Issue.record("not a deletion")
            return
        }
        #expect(id == "u1")
        #expect {
            _ = try mapping.appChange(
                for: try Self.change(
                    .update, "profiles", #"{"id":"u1","tz":"UTC","prefs":{"reminder":{"time":"7pm"}}}"#))
        } throws: { error in
            (error as? JobError)?.message.contains("profiles.prefs.reminder.time: not HH:MM") == true
        }
    }

    @Test func deviceRowsRegisterReplaceAndLogOut() throws {
        let mapping = try AppTableMapping(json: Self.mapping)
        let token = String(repeating: "ab", count: 32)
        let row = #"{"owner":"u1","token":"\#(token)","kind":"APNS","os":"ios"}"#
        guard
            case .register(let first) = try mapping.appChange(
                for: try Self.change(.insert, "phones", schema: "app", row))
        else {
            Issue.record("not a registration")
            return
        }
        #expect(first.provider == .apns && first.platform == .ios && first.replaces == nil)
        // An update that changed the token replaces the old one; a FID, when the row has one, is the device.
        let fid = "c" + String(repeating: "F", count: 21)
        let updated = #"{"owner":"u1","token":"\#(token)","fid":"\#(fid)","kind":"fcm","os":"ios"}"#
        guard
            case .register(let second) = try mapping.appChange(
                for: try Self.change(.update, "phones", schema: "app", updated, old: row))
        else {
            Issue.record("not a registration")
            return
        }
        #expect(second.kind == .fid && second.token == fid && second.replaces == token)
        guard
            case .unregister(let gone, let user) = try mapping.appChange(
                for: try Self.change(.delete, "phones", schema: "app", nil, old: row))
        else {
            Issue.record("not a logout")
            return
        }
        #expect(gone == token && user == "u1")
        #expect {
            _ = try mapping.appChange(
                for: try Self.change(
                    .insert, "phones", schema: "app", #"{"owner":"u1","token":"t","kind":"hms","os":"ios"}"#))
        } throws: { error in
            (error as? JobError)?.message.contains("phones.kind: hms is not one of apns, fcm") == true
        }
    }

    @Test func anEntryInsertedIsAWriteAndNothingElseIs() throws {
        let mapping = try AppTableMapping(json: Self.mapping)
        guard
            case .recordEntry(let user, let at) = try mapping.appChange(
                for: try Self.change(.insert, "notes", #"{"author":"u1"}"#))
        else {
            Issue.record("not an entry")
            return
        }
        #expect(user == "u1" && at == nil)
        guard
            case .nothing = try mapping.appChange(for: try Self.change(.delete, "notes", nil, old: #"{"author":"u1"}"#))
        else {
            Issue.record("a deleted entry did something")
            return
        }
        #expect {
            _ = try mapping.appChange(for: try Self.change(.insert, "orders", #"{}"#))
        } throws: { error in
            (error as? JobError)?.message.contains("public.orders is not in the mapping") == true
        }
        #expect {
            _ = try mapping.appChange(for: try Self.change(.insert, "notes", nil))
        } throws: { error in
            (error as? JobError)?.message.contains("record:") == true
        }
    }

    @Test func aTimestampWithoutAZoneIsUTC() throws {
        let mapping = try AppTableMapping(
            json: #"{"entries":{"table":"e","columns":{"user_id":"u","at":"created_at"}}}"#)
        for text in ["2026-11-21T19:30:00.5", "2026-11-21T20:30:00+01:00", "2026-11-21 19:30:00.123456+00:00"] {
            guard
                case .recordEntry(_, let at) = try mapping.appChange(
                    for: try Self.change(.insert, "e", #"{"u":"x","created_at":"\#(text)"}"#))
            else {
                Issue.record("not an entry")
                return
            }
            #expect(at == Timestamps.parse("2026-11-21T19:30:00Z"), "\(text)")
        }
    }
}

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
                                    "platform": "os", "last_seen": "seen" } },
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

    /// Issue 78, item 10: a name that needs quoting (a space, a dot, a quote) goes in double quotes, as in SQL; any
    /// name is matched as the database spells it.
    @Test func namesThatNeedQuotingAreQuotedAsInSQL() throws {
        #expect(AppTableMapping.names("app.UserDevices") == ["app", "UserDevices"])
        #expect(AppTableMapping.names(#""My App"."Diary Posts""#) == ["My App", "Diary Posts"])
        #expect(AppTableMapping.names(#"prefs."reminder.time""#) == ["prefs", "reminder.time"])
        #expect(AppTableMapping.names(#""say ""hi""""#) == [#"say "hi""#])
        for bad in [
            #""open"#, #""""#, "a..b", "a.", ".a", #""a"b"#, "a b", "1a", #"a."b"c"#,
            "\"" + String(repeating: "x", count: 64) + "\"",
        ] {
            #expect(AppTableMapping.names(bad) == nil, "\(bad)")
        }
        let mapping = try AppTableMapping(
            json: #"""
                {"entries": {"table": "\"My App\".\"Diary Posts\"",
                             "columns": {"user_id": "\"Author Id\"", "at": "meta.\"posted.at\""}}}
                """#)
        let entries = try #require(mapping.tables[.entries])
        #expect(entries.schema == "My App" && entries.name == "Diary Posts")
        #expect(entries.columns["at"] == .init(name: "meta", path: ["posted.at"]))
        #expect(mapping.table(schema: "My App", name: "Diary Posts")?.kind == .entries)
        // The webhook's record carries the column under its own name.
        let change = try Self.change(
            .insert, "Diary Posts", schema: "My App",
            #"{"Author Id": "u1", "meta": {"posted.at": "2026-11-21T10:00:00Z"}}"#)
        guard case .recordEntry(let user, let at) = try mapping.appChange(for: change) else {
            Issue.record("not an entry")
            return
        }
        #expect(user == "u1" && at == 1_795_255_200)
    }

    @Test(arguments: [
        (#"{"entries":{"table":"e","columns":{"user_id":"a b"}}}"#, "any other name in double quotes"),
        (#"{"entries":{"table":"\"open","columns":{"user_id":"a"}}}"#, "is not table or schema.table"),
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
        // The app's table is the source of truth: the device is mirrored, seen when the app says (issue 78); a
        // sighting that is no instant keeps the stored one rather than refusing the device.
        #expect(first.mirrored && first.lastSeen == nil)
        guard
            case .register(let seen) = try mapping.appChange(
                for: try Self.change(
                    .insert, "phones", schema: "app",
                    #"{"owner":"u1","token":"\#(token)","kind":"apns","os":"ios","seen":"2026-08-01T12:00:00.123456+00:00"}"#
                )),
            case .register(let unreadable) = try mapping.appChange(
                for: try Self.change(
                    .insert, "phones", schema: "app",
                    #"{"owner":"u1","token":"\#(token)","kind":"apns","os":"ios","seen":"yesterday"}"#))
        else {
            Issue.record("not registrations")
            return
        }
        #expect(seen.lastSeen == Timestamps.parse("2026-08-01T12:00:00Z") && unreadable.lastSeen == nil)
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

    /// Issue 78: a table of an iOS app's raw APNs tokens beside FCM ones, with no column saying which (`fixed`
    /// provider `by_shape`); a revoked device logs out whatever its active flag; a soft-deleted entry is no write.
    @Test func theProviderByShapeRevokedDevicesAndDeletedEntries() throws {
        let mapping = try AppTableMapping(
            json: """
                { "devices": { "table": "phones", "columns": { "user_id": "owner", "token": "token", "platform": "os",
                               "active": "on", "revoked": "revoked_at" }, "fixed": { "provider": "by_shape" } },
                  "entries": { "table": "notes", "columns": { "user_id": "author", "deleted": "gone" } } }
                """)
        let apns = String(repeating: "AB", count: 32)
        for (token, os, provider) in [(apns, "ios", Provider.apns), ("fcm-token:APA91b", "ios", .fcm)] {
            guard
                case .register(let registration) = try mapping.appChange(
                    for: try Self.change(
                        .insert, "phones", #"{"owner":"u1","token":"\#(token)","os":"\#(os)","on":true}"#))
            else {
                Issue.record("not a registration")
                continue
            }
            #expect(
                registration.provider == provider
                    && registration.token == (provider == .apns ? token.lowercased() : token))
        }
        guard
            case .unregister = try mapping.appChange(
                for: try Self.change(
                    .update, "phones",
                    #"{"owner":"u1","token":"t:APA91b","os":"android","on":true,"revoked_at":"2026-11-21T10:00:00+00:00"}"#
                ))
        else {
            Issue.record("a revoked device is not logged out")
            return
        }
        for (gone, wrote) in [("true", false), ("\"2026-11-21T10:00:00Z\"", false), ("false", true), ("null", true)] {
            let change = try mapping.appChange(
                for: try Self.change(.insert, "notes", #"{"author":"u1","gone":\#(gone)}"#))
            if case .recordEntry = change { #expect(wrote, "\(gone)") } else { #expect(!wrote, "\(gone)") }
        }
        #expect(throws: AppTableMapping.MappingError.self) {
            try AppTableMapping(
                json:
                    #"{ "devices": { "table": "p", "columns": { "user_id": "u", "token": "t", "platform": "o" }, "fixed": { "provider": "guess" } } }"#
            )
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

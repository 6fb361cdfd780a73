import Crypto
import Foundation
import JWTKit
import JobKitTestSupport
import LambdaRuntimeSimulator
import Logging
import NIOConcurrencyHelpers
import NIOHTTP1
import PushSimulator
import Testing

@testable import JobKit
@testable import JobKitDelivery
@testable import PushAPI

/// Issue 66: the HTTP API (`push-api`), started as a process on each store, called as a backend and an app call
/// it: the same rules as the CLI behind every operation, credentials checked, every error problem+json.
@Suite struct HTTPAPITests {
    /// A running `push-api` on a temporary database, its clock fixed at `now`, warnings going to an outbox.
    struct Server {
        let db: TemporaryDatabase
        let started: Executables.Started
        let port: Int
        let outbox: String
        /// Everything the server wrote to stderr (its log), read on a thread of its own.
        let log: NIOLockedValueBox<String>

        static func start(
            _ backend: Backend, now: String = "2026-11-21T20:00:00Z", arguments: [String] = [],
            environment: [String: String] = [:]
        ) async throws -> Server {
            let db = try await TemporaryDatabase(backend)
            let outbox = db.directory.appendingPathComponent("outbox.jsonl").path
            let started = try Executables.start(
                "push-api", ["--database", db.path, "--port", "0", "--now", now] + arguments,
                environment: environment.merging(["PUSH_OUTBOX": outbox]) { $1 })
            let log = NIOLockedValueBox("")
            let handle = started.stderr.fileHandleForReading
            Thread.detachNewThread {
                while true {
                    guard let data = try? FileDescriptorRead.some(handle.fileDescriptor), !data.isEmpty else { return }
                    log.withLockedValue { $0 += String(decoding: data, as: UTF8.self) }
                }
            }
            for _ in 0..<600 {
                let text = log.withLockedValue { $0 }
                if let line = text.split(separator: "\n").first(where: { $0.hasPrefix("push-api: listening on ") }),
                    let port = line.split(separator: ":").last.flatMap({ Int($0) })
                {
                    return Server(db: db, started: started, port: port, outbox: outbox, log: log)
                }
                if !started.process.isRunning { break }
                try await Task.sleep(for: .milliseconds(50))
            }
            started.process.terminate()
            throw ServerFailed(log: log.withLockedValue { $0 })
        }

        struct ServerFailed: Error, CustomStringConvertible {
            let log: String
            var description: String { "push-api did not start: \(log)" }
        }

        /// One request; the answer's status, content type and body.
        func call(
            _ method: HTTPMethod, _ path: String, key: String? = nil, json: String? = nil,
            contentType: String = "application/json", headers: [(String, String)] = []
        ) async throws -> (status: Int, type: String, body: String, allow: String) {
            var all = headers
            if let key { all.append(("Authorization", "Bearer \(key)")) }
            if json != nil { all.append(("Content-Type", contentType)) }
            let response = try await HTTP1OneShot.exchange(
                host: "127.0.0.1", port: port, method: method, path: path, headers: all, body: json,
                timeout: .seconds(30))
            return (
                Int(response.status.code), response.headers["content-type"].first ?? "",
                String(decoding: response.body, as: UTF8.self), response.headers["allow"].first ?? ""
            )
        }

        /// A new key of `scope`, made with `pushctl api-key create` as an operator makes one.
        func key(_ scope: String) async throws -> String {
            let result = try await Executables.run(
                "pushctl", ["api-key", "create", "--database", db.path, "--scope", scope, "--name", "tests"])
            #expect(result.status == 0, "\(result.stderr)")
            return result.stdout.trimmingCharacters(in: .whitespacesAndNewlines)
        }

        /// User `id` in UTC with one APNs device, written over the API.
        func userWithDevice(_ id: String, key: String) async throws {
            let user = try await call(.PUT, "/v1/users/\(id)", key: key, json: #"{"timezone":"UTC"}"#)
            let device = try await call(
                .POST, "/v1/users/\(id)/devices", key: key,
                json: #"{"token":"\#(HTTPAPITests.apnsToken)","provider":"apns","platform":"ios"}"#)
            #expect(user.status == 200 && device.status == 200, "\(user.body) \(device.body)")
        }

        /// Sends SIGTERM and waits for the exit.
        func stop() async -> Executables.Result {
            started.process.terminate()
            return await Executables.finish(started, limit: .seconds(30))
        }
    }

    static let apnsToken = String(repeating: "ab", count: 32)

    /// The JSON object an answer's body holds.
    static func object(_ body: String) -> [String: Any] {
        (try? JSONSerialization.jsonObject(with: Data(body.utf8))) as? [String: Any] ?? [:]
    }

    /// Users, devices and entries written over HTTP are reminded exactly as the rules say: the run reminds the
    /// user whose local reminder time is now, and skips the one who wrote that local day.
    @Test(arguments: Backend.allCases) func whatABackendWritesOverHTTPIsRemindedByTheRun(_ backend: Backend)
        async throws
    {
        let server = try await Server.start(backend)
        let admin = try await server.key("admin")
        let devices = try await server.key("devices")
        let hook = try await server.key("hook")
        // 20:00 UTC is 21:00 in Lagos (UTC+1), the default reminder time.
        for user in ["wrote", "due"] {
            let put = try await server.call(
                .PUT, "/v1/users/\(user)", key: devices, json: #"{"timezone":"Africa/Lagos"}"#)
            #expect(put.status == 200, "\(put.body)")
            #expect(Self.object(put.body)["created"] as? Bool == true, "\(put.body)")
            let registered = try await server.call(
                .POST, "/v1/users/\(user)/devices", key: devices,
                json: #"{"fid":"c\#(String(repeating: user == "due" ? "d" : "w", count: 21))","platform":"android"}"#)
            #expect(registered.status == 200, "\(registered.body)")
        }
        let again = try await server.call(.PUT, "/v1/users/due", key: devices, json: #"{"timezone":"Africa/Lagos"}"#)
        #expect(again.status == 200 && Self.object(again.body)["created"] as? Bool == false, "\(again.body)")
        let entry = try await server.call(
            .POST, "/v1/users/wrote/entries", key: hook, json: #"{"at":"2026-11-21T19:30:00Z"}"#)
        #expect(entry.status == 204, "\(entry.body)")
        // The body is optional: the README's call sends none (as `curl -X POST` with no -d does), or an empty one with
        // its content type, as a generated client's call with no fields may. Each records an entry now (issue 78).
        let bare = try await server.call(.POST, "/v1/users/wrote/entries", key: hook)
        #expect(bare.status == 204, "\(bare.body)")
        let empty = try await server.call(.POST, "/v1/users/wrote/entries", key: hook, json: "")
        #expect(empty.status == 204, "\(empty.body)")
        // And with an Idempotency-Key, as the README writes it (answered 400 "not valid JSON" before): once, then
        // the same answer replayed.
        for _ in 0..<2 {
            let keyed = try await server.call(
                .POST, "/v1/users/wrote/entries", key: hook, headers: [("Idempotency-Key", "entry-8812")])
            #expect(keyed.status == 204, "\(keyed.body)")
        }
        #expect(try await server.db.count("SELECT count(*) FROM diary_entries WHERE user_id = 'wrote'") == 4)
        // A body that is required is still required.
        let noEvent = try await server.call(.POST, "/v1/hooks/content-limit", key: hook, json: "")
        #expect(noEvent.status == 400, "\(noEvent.body)")
        let explained = try await server.call(.GET, "/v1/users/due/explain", key: admin)
        #expect(explained.status == 200 && Self.object(explained.body)["due"] as? Bool == true, "\(explained.body)")
        // Support's key (issue 78) reads the same explanation, and may change nothing: 403 for every write.
        let support = try await server.key("support")
        let asSupport = try await server.call(.GET, "/v1/users/due/explain", key: support)
        #expect(asSupport.status == 200 && Self.object(asSupport.body)["due"] as? Bool == true, "\(asSupport.body)")
        for (method, path, body) in [
            (HTTPMethod.PUT, "/v1/users/due", #"{"plan":"pro"}"#), (.DELETE, "/v1/users/due", nil),
            (.POST, "/v1/users/due/entries", nil), (.POST, "/v1/hooks/content-limit", #"{"user_id":"due","used":1}"#),
            (.POST, "/v1/users/due/devices", #"{"fid":"c\#(String(repeating: "s", count: 21))","platform":"android"}"#),
        ] {
            let refused = try await server.call(method, path, key: support, json: body)
            #expect(refused.status == 403, "\(method) \(path): \(refused.body)")
        }
        // And the delivery-health report, as `token-janitor report --format json` gives it; a hook's key may not.
        let report = try await server.call(.GET, "/v1/report?days=7&now=2026-11-21T20:00:00Z", key: support)
        #expect(
            report.status == 200 && Self.object(report.body)["to"] as? String == "2026-11-21T20:00:00Z"
                && Self.object(report.body)["days"] as? Int == 7, "\(report.body)")
        let cliReport = try await Executables.run(
            "token-janitor",
            [
                "report", "--database", server.db.path, "--now", "2026-11-21T20:00:00Z", "--days", "7", "--format",
                "json",
            ])
        #expect(
            cliReport.status == 0
                && NSDictionary(dictionary: Self.object(cliReport.stdout))
                    == NSDictionary(dictionary: Self.object(report.body)),
            "\(cliReport)")
        #expect(try await server.call(.GET, "/v1/report?days=0", key: support).status == 400)
        #expect(try await server.call(.GET, "/v1/report", key: hook).status == 403)
        // "Why no reminder that day?" needs no instant worked out: that local date's slot (issue 78). 21:00 in Lagos
        // on 20 November is 20:00 UTC; over HTTP and on the command line alike.
        let day = try await server.call(.GET, "/v1/users/due/explain?local_date=2026-11-20", key: admin)
        #expect(
            day.status == 200 && Self.object(day.body)["now"] as? String == "2026-11-20T20:00:00Z"
                && day.body.contains("that day's slot"), "\(day.body)")
        let both = try await server.call(
            .GET, "/v1/users/due/explain?local_date=2026-11-20&at=2026-11-20T20%3A00%3A00Z", key: admin)
        #expect(both.status == 400, "\(both.body)")
        let cli = try await Executables.run(
            "diary-reminder", ["--database", server.db.path, "--explain", "due", "--local-date", "2026-11-20"])
        #expect(cli.status == 0 && cli.stdout.contains("explain due at 2026-11-20T20:00:00Z"), "\(cli)")
        for arguments in [["--local-date", "2026-11-20"], ["--explain", "due", "--local-date", "20/11/2026"]] {
            let refused = try await Executables.run("diary-reminder", ["--database", server.db.path] + arguments)
            #expect(refused.status == 64 && refused.stderr.contains("--local-date"), "\(refused)")
        }

        let outbox = server.db.directory.appendingPathComponent("reminders.jsonl").path
        let run = try await Executables.run(
            "diary-reminder", ["--database", server.db.path, "--now", "2026-11-21T20:00:00Z", "--outbox", outbox])
        #expect(run.status == 0, "\(run.stderr)")
        let lines = try String(contentsOfFile: outbox, encoding: .utf8).split(separator: "\n")
        #expect(lines.count == 1 && lines[0].contains(#""user_id":"due""#), "\(lines)")

        let deleted = try await server.call(.DELETE, "/v1/users/due", key: admin)
        #expect(deleted.status == 204)
        #expect(try await server.db.count("SELECT count(*) FROM users WHERE id = 'due'") == 0)
        let stopped = await server.stop()
        #expect(stopped.status == 0, "\(stopped.stderr)")
    }

    /// The hook over HTTP decides as `content-limit-hook` does: 90 % sends once, a replay sends nothing.
    @Test(arguments: Backend.allCases) func theHookAnswersWhatItDid(_ backend: Backend) async throws {
        let server = try await Server.start(backend)
        let hook = try await server.key("hook")
        let admin = try await server.key("admin")
        try await server.userWithDevice("u1", key: admin)
        let first = try await server.call(
            .POST, "/v1/hooks/content-limit", key: hook, json: #"{"user_id":"u1","used":27,"limit":30}"#)
        #expect(first.status == 200 && Self.object(first.body)["action"] as? String == "sent", "\(first.body)")
        let replay = try await server.call(
            .POST, "/v1/hooks/content-limit", key: hook, json: #"{"user_id":"u1","used":27,"limit":30}"#)
        #expect(replay.status == 200 && Self.object(replay.body)["action"] as? String == "none", "\(replay.body)")
        let quiet = try await server.call(
            .POST, "/v1/hooks/content-limit", key: hook, json: #"{"user_id":"u1","used":3,"limit":30}"#)
        #expect(quiet.status == 200 && Self.object(quiet.body)["action"] as? String == "none", "\(quiet.body)")
        let sent = try String(contentsOfFile: server.outbox, encoding: .utf8).split(separator: "\n")
        #expect(sent.count == 1 && sent[0].contains("content_limit_90"), "\(sent)")
        _ = await server.stop()
    }

    /// A Supabase-style app writes only its own tables (uuid ids, a JSON preferences column, its own device table
    /// of FCM tokens); their Database Webhooks, through the mapping, keep the push schema in step: sign-ups and
    /// settings, token rotation, logout, entries and account deletion. The run then reminds exactly the user due.
    @Test(arguments: Backend.allCases) func databaseWebhooksKeepThePushSchemaInStepWithTheAppsTables(
        _ backend: Backend
    ) async throws {
        let mappingPath = FileManager.default.temporaryDirectory
            .appendingPathComponent("mapping-\(UUID().uuidString).json").path
        try #"""
        {
          "users": { "table": "public.profiles",
                     "columns": { "id": "id", "timezone": "timezone", "locale": "preferences.locale",
                                  "reminder_time": "preferences.reminder_time", "reminders": "preferences.reminders",
                                  "quiet_hours": "preferences.quiet_hours" } },
          "devices": { "table": "user_devices",
                       "columns": { "user_id": "user_id", "token": "fcm_token", "platform": "platform",
                                    "active": "is_active" },
                       "fixed": { "provider": "fcm" } },
          "entries": { "table": "public.entries", "columns": { "user_id": "user_id", "at": "created_at" } }
        }
        """#.write(toFile: mappingPath, atomically: true, encoding: .utf8)
        defer { try? FileManager.default.removeItem(atPath: mappingPath) }
        let server = try await Server.start(backend, arguments: ["--api-webhook-mapping", mappingPath])
        let webhook = try await server.key("webhook")
        let hook = try await server.key("hook")
        func change(_ type: String, _ table: String, record: String = "null", old: String = "null") async throws
            -> [String: Any]
        {
            let answer = try await server.call(
                .POST, "/v1/webhooks/database", key: webhook,
                json:
                    #"{"type":"\#(type)","table":"\#(table)","schema":"public","record":\#(record),"old_record":\#(old)}"#
            )
            #expect(answer.status == 200, "\(type) \(table): \(answer.body)")
            return Self.object(answer.body)
        }
        let (due, wrote) = ("0b5e7c1a-4f3e-4c1e-9a57-0d1c2b3a4f5e", "7d2c9e44-1b7f-4a0d-8c3e-5f6a7b8c9d0e")
        for id in [due, wrote] {
            let profile =
                #"{"id":"\#(id)","timezone":"Africa/Lagos","preferences":{"reminder_time":"21:00:00","reminders":true,"quiet_hours":null}}"#
            #expect(try await change("INSERT", "profiles", record: profile)["action"] as? String == "user_set")
            let device = #"{"user_id":"\#(id)","fcm_token":"old-\#(id):APA91b","platform":"android","is_active":true}"#
            #expect(
                try await change("INSERT", "user_devices", record: device)["action"] as? String == "device_registered")
        }
        // Issue 78: webhooks keep what triggers keep. A profile made before its zone is set is no push user yet
        // (no error); its device waits, a device logged out meanwhile stops waiting, and when the zone arrives the
        // user becomes a push user with the device that still waits.
        let late = "5a5a5a5a-0000-4000-8000-00000000000a"
        let lateProfile = #"{"id":"\#(late)","timezone":null,"preferences":{"reminder_time":"21:00:00"}}"#
        let notYet = try await change("INSERT", "profiles", record: lateProfile)
        #expect(notYet["action"] as? String == "none" && (notYet["detail"] as? String ?? "").contains("time zone"))
        for token in ["late-phone:APA91b", "late-tablet:APA91b"] {
            let waiting = try await change(
                "INSERT", "user_devices",
                record: #"{"user_id":"\#(late)","fcm_token":"\#(token)","platform":"android","is_active":true}"#)
            #expect(waiting["action"] as? String == "device_waiting", "\(waiting)")
        }
        let gone = try await change(
            "UPDATE", "user_devices",
            record: #"{"user_id":"\#(late)","fcm_token":"late-tablet:APA91b","platform":"android","is_active":false}"#)
        #expect(gone["action"] as? String == "device_unregistered", "\(gone)")
        // They write before their zone is set: the entry waits too, and still counts for that day once they are a
        // push user (an entry lost here would mean a reminder that evening although they wrote).
        let early = try await change(
            "INSERT", "entries", record: #"{"id":7,"user_id":"\#(late)","created_at":"2026-11-21T09:00:00+00:00"}"#)
        #expect(early["action"] as? String == "entry_waiting", "\(early)")
        // Support asks about them: unknown to the push schema still (404), and why, with what waits.
        let explained = try await server.call(.GET, "/v1/users/\(late)/explain", key: try await server.key("admin"))
        #expect(
            explained.status == 404 && explained.body.contains("no time zone")
                && explained.body.contains("1 device(s) of theirs wait")
                && explained.body.contains("their latest entry waits"), "\(explained.body)")
        let zoned = try await change(
            "UPDATE", "profiles", record: lateProfile.replacingOccurrences(of: "null", with: #""Asia/Tokyo""#),
            old: lateProfile)
        #expect(
            zoned["action"] as? String == "user_set"
                && (zoned["detail"] as? String ?? "").contains("1 waiting device(s) registered")
                && (zoned["detail"] as? String ?? "").contains("the entry of 2026-11-21T09:00:00Z recorded"), "\(zoned)"
        )
        #expect(try await server.db.count("SELECT count(*) FROM diary_entries WHERE user_id = '\(late)'") == 1)
        #expect(
            try await server.db.strings("SELECT token FROM user_devices WHERE user_id = '\(late)' AND is_active")
                == ["late-phone:APA91b"])
        #expect(try await server.db.count("SELECT count(*) FROM waiting_devices") == 0)
        #expect(try await server.db.count("SELECT count(*) FROM waiting_users") == 0)

        // Token rotation: the row's token changed; the old one is retired in the same step.
        let rotated = try await change(
            "UPDATE", "user_devices",
            record: #"{"user_id":"\#(due)","fcm_token":"new-\#(due):APA91b","platform":"android","is_active":true}"#,
            old: #"{"user_id":"\#(due)","fcm_token":"old-\#(due):APA91b","platform":"android","is_active":true}"#)
        #expect(
            rotated["action"] as? String == "device_registered"
                && (rotated["detail"] as? String ?? "").contains("replaced"))
        let entry = try await change(
            "INSERT", "entries",
            record: #"{"id":1,"user_id":"\#(wrote)","created_at":"2026-11-21T19:30:00.123456+00:00"}"#)
        #expect(entry["action"] as? String == "entry_recorded")
        #expect(
            try await change("DELETE", "entries", old: #"{"id":1,"user_id":"\#(wrote)"}"#)["action"] as? String
                == "none")

        let outbox = server.db.directory.appendingPathComponent("reminders.jsonl").path
        let run = try await Executables.run(
            "diary-reminder", ["--database", server.db.path, "--now", "2026-11-21T20:00:00Z", "--outbox", outbox])
        #expect(run.status == 0, "\(run.stderr)")
        let lines = try String(contentsOfFile: outbox, encoding: .utf8).split(separator: "\n")
        #expect(lines.count == 1 && lines[0].contains("new-\(due)"), "\(lines)")

        // Logout (the app's row set inactive), then account deletion.
        let logout = try await change(
            "UPDATE", "user_devices",
            record:
                #"{"user_id":"\#(wrote)","fcm_token":"old-\#(wrote):APA91b","platform":"android","is_active":false}"#)
        #expect(logout["action"] as? String == "device_unregistered")
        // Active: due's new token and the late user's phone.
        #expect(try await server.db.count("SELECT count(*) FROM user_devices WHERE deactivated_at IS NULL") == 2)
        #expect(
            try await change("DELETE", "profiles", old: #"{"id":"\#(due)"}"#)["action"] as? String == "user_deleted")
        #expect(try await server.db.count("SELECT count(*) FROM users") == 2)

        // A table the mapping does not name, a row that fails the checks: 400, nothing written. Another scope: 403.
        let unknown = try await server.call(
            .POST, "/v1/webhooks/database", key: webhook,
            json: #"{"type":"INSERT","table":"orders","schema":"public","record":{"id":1},"old_record":null}"#)
        #expect(unknown.status == 400 && unknown.body.contains("not in the mapping"), "\(unknown.body)")
        let badZone = try await server.call(
            .POST, "/v1/webhooks/database", key: webhook,
            json:
                #"{"type":"INSERT","table":"profiles","schema":"public","record":{"id":"x","timezone":"Mars/Base"},"old_record":null}"#
        )
        #expect(badZone.status == 400 && badZone.body.contains("profiles.timezone"), "\(badZone.body)")
        // Issue 78: with the app's tables the source of truth, the API's own writes of them are refused, naming the
        // table (they would be undone by its next change, and reported as drift).
        let admin = try await server.key("admin")
        for (method, path, json) in [
            (HTTPMethod.PUT, "/v1/users/\(wrote)", #"{"reminder_time":"07:00"}"#),
            (
                .POST, "/v1/users/\(wrote)/devices",
                #"{"token":"api-token:APA91b","provider":"fcm","platform":"android"}"#
            ),
            (.DELETE, "/v1/devices/old-\(wrote):APA91b", nil), (.DELETE, "/v1/users/\(wrote)", nil),
        ] {
            let refused = try await server.call(method, path, key: admin, json: json)
            #expect(
                refused.status == 409 && refused.body.contains("/problems/owned-by-the-app")
                    && refused.body.contains("the app's table public."), "\(path): \(refused.body)")
        }
        // A TRUNCATE carries no rows: refused (nothing changed), saying what to do instead.
        let truncate = try await server.call(
            .POST, "/v1/webhooks/database", key: webhook,
            json: #"{"type":"TRUNCATE","table":"profiles","schema":"public","record":null,"old_record":null}"#)
        #expect(
            truncate.status == 400 && truncate.body.contains("a TRUNCATE of public.profiles carries no rows"),
            "\(truncate.body)")
        // A raw APNs token mapped as FCM (an iOS row of a table that holds both): refused, naming the fix.
        let apnsAsFCM = try await server.call(
            .POST, "/v1/webhooks/database", key: webhook,
            json:
                #"{"type":"INSERT","table":"user_devices","schema":"public","record":{"user_id":"\#(wrote)","fcm_token":"\#(Self.apnsToken.uppercased())","platform":"ios","is_active":true},"old_record":null}"#
        )
        #expect(
            apnsAsFCM.status == 400 && apnsAsFCM.body.contains("this is an APNs device token"), "\(apnsAsFCM.body)")
        let wrongScope = try await server.call(
            .POST, "/v1/webhooks/database", key: hook,
            json:
                #"{"type":"DELETE","table":"profiles","schema":"public","record":null,"old_record":{"id":"\#(wrote)"}}"#
        )
        #expect(wrongScope.status == 403, "\(wrongScope.body)")
        #expect(try await server.db.count("SELECT count(*) FROM users") == 2)
        let stopped = await server.stop()
        #expect(stopped.status == 0, "\(stopped.stderr)")
    }

    /// No key, a key that is not one, a revoked key: 401; a key of another scope: 403. Each a problem+json with
    /// its stable type, and no key in the server's log.
    @Test func credentialsAreCheckedForEveryOperationThatTakesThem() async throws {
        let server = try await Server.start(.sqlite)
        let hook = try await server.key("hook")
        let revoked = try await server.key("admin")
        let id = String(revoked.dropFirst(4).prefix(16))
        let revoke = try await Executables.run(
            "pushctl", ["api-key", "revoke", "--database", server.db.path, "--id", id])
        #expect(revoke.status == 0, "\(revoke.stderr)")
        let list = try await Executables.run("pushctl", ["api-key", "list", "--database", server.db.path])
        #expect(
            list.stdout.contains("\(id) admin") && list.stdout.contains("revoked") && !list.stdout.contains(revoked))

        let body = #"{"timezone":"UTC"}"#
        let cases: [(String?, Int, String)] = [
            (nil, 401, "unauthorized"),
            ("not-a-key", 401, "unauthorized"),
            ("dpk_0000000000000000_" + String(repeating: "A", count: 43), 401, "unauthorized"),
            (revoked, 401, "unauthorized"),
            (String(hook.dropLast()) + (hook.last == "A" ? "B" : "A"), 401, "unauthorized"),  // a forged secret
            (hook, 403, "forbidden"),
        ]
        for (key, status, type) in cases {
            let answer = try await server.call(.PUT, "/v1/users/u1", key: key, json: body)
            #expect(answer.status == status, "\(key ?? "none"): \(answer.body)")
            #expect(answer.type == "application/problem+json")
            #expect(answer.body.contains(#""type":"/problems/\#(type)""#), "\(answer.body)")
        }
        let scheme = try await server.call(.PUT, "/v1/users/u1", json: body, headers: [("Authorization", "Basic eDp5")])
        #expect(scheme.status == 401)
        #expect(try await server.db.count("SELECT count(*) FROM users") == 0)
        // Health and metrics take no credentials.
        #expect(try await server.call(.GET, "/healthz").status == 200)
        let metrics = try await server.call(.GET, "/metrics")
        #expect(metrics.status == 200 && metrics.body.contains(#"operation="putUser",status="401""#), "\(metrics.body)")
        let stopped = await server.stop()
        #expect(!stopped.stderr.contains(hook) && !stopped.stderr.contains(revoked))
    }

    /// Bad input is 400 with the CLI's own checks, an oversized body 413, another content type 415; never a 500,
    /// and nothing written.
    @Test func badInputIsRefusedWithAProblemAndWritesNothing() async throws {
        let server = try await Server.start(.sqlite)
        let admin = try await server.key("admin")
        let cases: [(String, String, Int, String)] = [
            ("/v1/users/u1", #"{"timezone":"Mars/Base"}"#, 400, "timezone: unknown IANA time zone"),
            ("/v1/users/u1", #"{"timezone":"UTC","reminder_time":"25:00"}"#, 400, "reminder_time: not HH:MM"),
            ("/v1/users/u1", #"{"timezone":"UTC","quiet_hours":"22:00-22:00"}"#, 400, "ends when it starts"),
            ("/v1/users/u1", #"{"timezone":"UTC","timezone":"UTC"}"#, 400, "appears twice"),
            ("/v1/users/u1", #"{"timezone":"UTC","tz":"x"}"#, 400, "tz"),
            ("/v1/users/u1", #"{"timezone":"UTC"} trailing"#, 400, "text after the value"),
            ("/v1/users/u1", #"{"timezone":7}"#, 400, "timezone"),
            ("/v1/users/u1", #"{}"#, 400, "needs a time zone"),
            ("/v1/users/" + String(repeating: "x", count: 129), #"{"timezone":"UTC"}"#, 400, "1 to 128 characters"),
        ]
        for (path, json, status, detail) in cases {
            let answer = try await server.call(.PUT, path, key: admin, json: json)
            #expect(answer.status == status, "\(json): \(answer.body)")
            #expect(
                answer.type == "application/problem+json" && answer.body.contains(detail), "\(json): \(answer.body)")
        }
        let devices: [String] = [
            #"{"platform":"ios"}"#,
            #"{"token":"zz","provider":"apns","platform":"ios"}"#,
            #"{"token":"\#(Self.apnsToken)","platform":"ios"}"#,
            #"{"token":"\#(Self.apnsToken)","provider":"apns","platform":"android"}"#,
            #"{"fid":"f","token":"t","platform":"android"}"#,
            // Issue 78: a 64-hex APNs token registered as FCM.
            #"{"token":"\#(Self.apnsToken)","provider":"fcm","platform":"ios"}"#,
        ]
        _ = try await server.call(.PUT, "/v1/users/u2", key: admin, json: #"{"timezone":"UTC"}"#)
        for json in devices {
            let answer = try await server.call(.POST, "/v1/users/u2/devices", key: admin, json: json)
            #expect(answer.status == 400, "\(json): \(answer.body)")
        }
        let unknown = try await server.call(
            .POST, "/v1/users/nobody/devices", key: admin,
            json: #"{"token":"\#(Self.apnsToken)","provider":"apns","platform":"ios"}"#)
        #expect(unknown.status == 404, "\(unknown.body)")
        let unmapped = try await server.call(
            .POST, "/v1/webhooks/database", key: admin,
            json: #"{"type":"INSERT","table":"entries","schema":"public","record":{},"old_record":null}"#)
        #expect(unmapped.status == 404 && unmapped.body.contains("PUSH_API_WEBHOOK_MAPPING"), "\(unmapped.body)")
        let large = try await server.call(
            .PUT, "/v1/users/u1", key: admin,
            json: #"{"timezone":"UTC","plan":""# + String(repeating: "p", count: 70_000) + #""}"#)
        #expect(large.status == 413 && large.body.contains("/problems/too-large"), "\(large.body)")
        let text = try await server.call(
            .PUT, "/v1/users/u1", key: admin, json: #"{"timezone":"UTC"}"#, contentType: "text/plain")
        #expect(text.status == 415 && text.body.contains("/problems/unsupported-media-type"), "\(text.body)")
        let hookEvent = try await server.call(
            .POST, "/v1/hooks/content-limit", key: admin, json: #"{"user_id":"u2","used":-1,"limit":30}"#)
        #expect(hookEvent.status == 400, "\(hookEvent.body)")
        let at = try await server.call(.GET, "/v1/users/u2/explain?at=yesterday", key: admin)
        #expect(at.status == 400, "\(at.body)")
        let route = try await server.call(.GET, "/v1/nothing-here", key: admin)
        #expect(route.status == 404 && route.type == "application/problem+json", "\(route.body)")
        // Issue 78: a path the API has, under a method it does not take, is 405 with the methods it takes.
        let method = try await server.call(.PATCH, "/v1/users/u2", key: admin, json: "{}")
        #expect(method.status == 405 && method.type == "application/problem+json", "\(method.body)")
        #expect(method.allow == "DELETE, PUT" && method.body.contains("it takes DELETE, PUT"), "\(method)")
        let entries = try await server.call(.GET, "/v1/users/u2/entries", key: admin)
        #expect(entries.status == 405 && entries.allow == "POST", "\(entries)")
        // Every answer is counted, those given before any operation too (operation "none").
        let metrics = try await server.call(.GET, "/metrics")
        for status in [404, 405, 413] {
            #expect(
                metrics.body.contains(#"diary_push_api_requests_total{operation="none",status="\#(status)"}"#),
                "\(status): \(metrics.body)")
        }
        #expect(try await server.db.count("SELECT count(*) FROM users") == 1)
        #expect(try await server.db.count("SELECT count(*) FROM user_devices") == 0)
        let stopped = await server.stop()
        #expect(stopped.status == 0 && !stopped.stderr.contains(" 500 "), "\(stopped.stderr)")
    }

    /// SIGTERM ends a serving server with 0; a server whose store cannot be opened never starts, with the jobs'
    /// exit code for it.
    @Test func theServerStopsCleanlyAndNeverStartsWithoutItsStore() async throws {
        let server = try await Server.start(.sqlite)
        #expect(try await server.call(.GET, "/healthz").status == 200)
        let stopped = await server.stop()
        #expect(stopped.status == 0, "SIGTERM ends the server cleanly: \(stopped.stderr)")
        // A server that cannot open its store never starts: the jobs' own exit code for it.
        let missing = try await Executables.run(
            "push-api", ["--database", server.db.directory.appendingPathComponent("none/x.db").path, "--port", "0"],
            environment: ["PUSH_OUTBOX": server.outbox])
        #expect(missing.status != 0 && missing.status != 70, "\(missing.stderr)")
    }

    /// Each operation's scopes, as the server checks them (``OperationScopes``), are the ones `openapi.yaml` states
    /// in its summary, and an operation that takes no credentials says `security: []`.
    @Test func theSpecStatesTheScopesTheServerChecks() throws {
        let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
            .deletingLastPathComponent()
        let spec = try String(contentsOf: root.appendingPathComponent("openapi.yaml"), encoding: .utf8)
        let operations = spec.components(separatedBy: "operationId: ").dropFirst()
        var seen: Set<String> = []
        for text in operations {
            let id = String(text.prefix { !$0.isNewline })
            let block = text.components(separatedBy: "\n      responses:").first ?? ""
            seen.insert(id)
            if let scopes = OperationScopes.byOperation[id] {
                let stated = scopes.map(\.rawValue).sorted().joined(separator: ", ")
                let phrase = scopes.count == 1 ? "(scope \(stated))" : "(scopes \(stated))"
                #expect(block.contains(phrase) && !block.contains("security: []"), "\(id): \(phrase)")
            } else {
                #expect(block.contains("security: []"), "\(id) takes no credentials: the spec must say so")
            }
        }
        #expect(seen == Set(OperationScopes.byOperation.keys).union(["health", "metrics"]), "\(seen)")
    }

    /// An app calls with its signed-in user's JWT: it may set its own settings and register and log out its own
    /// devices, nothing else; a token that is expired, of another issuer or audience, unsigned (`alg: none`) or
    /// signed with another secret is 401.
    @Test func anAppUsersTokenActsForThatUserOnly() async throws {
        let secret = String(repeating: "s3cr3t-", count: 6)
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("jwt-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        let secretFile = directory.appendingPathComponent("secret").path
        try secret.write(toFile: secretFile, atomically: true, encoding: .utf8)
        let server = try await Server.start(
            .sqlite, arguments: ["--api-jwt-secret-file", secretFile],
            environment: [
                "PUSH_API_JWT_ISSUER": "https://example.supabase.co/auth/v1", "PUSH_API_JWT_AUDIENCE": "authenticated",
            ])
        let now = instant("2026-11-21T20:00:00Z")
        func token(
            sub: String = "u1", exp: Int64? = nil, iss: String = "https://example.supabase.co/auth/v1",
            aud: String = "authenticated", key: String? = nil
        ) async throws -> String {
            let keys = JWTKeyCollection()
            await keys.add(hmac: HMACKey(from: key ?? secret), digestAlgorithm: .sha256)
            return try await keys.sign(
                TestClaims(
                    sub: .init(value: sub), exp: .init(value: Date(timeIntervalSince1970: Double(exp ?? now + 3600))),
                    iss: .init(value: iss), aud: .init(value: [aud])))
        }
        let admin = try await server.key("admin")
        _ = try await server.call(.PUT, "/v1/users/u2", key: admin, json: #"{"timezone":"UTC"}"#)
        let device = #"{"token":"\#(Self.apnsToken)","provider":"apns","platform":"ios"}"#
        _ = try await server.call(.POST, "/v1/users/u2/devices", key: admin, json: device)

        let own = try await token()
        let created = try await server.call(.PUT, "/v1/users/u1", key: own, json: #"{"timezone":"UTC"}"#)
        #expect(created.status == 200, "\(created.body)")
        let fid = #"{"fid":"c\#(String(repeating: "u", count: 21))","platform":"android"}"#
        let registered = try await server.call(.POST, "/v1/users/u1/devices", key: own, json: fid)
        #expect(registered.status == 200, "\(registered.body)")
        // Another user's settings, devices, or their token: 403 and 404, nothing changed.
        #expect(try await server.call(.PUT, "/v1/users/u2", key: own, json: #"{"plan":"pro"}"#).status == 403)
        #expect(try await server.call(.POST, "/v1/users/u2/devices", key: own, json: fid).status == 403)
        #expect(try await server.call(.DELETE, "/v1/devices/\(Self.apnsToken)", key: own).status == 404)
        // What only backends may do.
        #expect(try await server.call(.GET, "/v1/users/u1/explain", key: own).status == 403)
        #expect(
            try await server.call(.POST, "/v1/hooks/content-limit", key: own, json: #"{"user_id":"u1","used":1}"#)
                .status == 403)
        #expect(try await server.call(.DELETE, "/v1/users/u1", key: own).status == 403)

        let header = Data(#"{"alg":"none","typ":"JWT"}"#.utf8).base64EncodedString()
        let unsigned = own.split(separator: ".")[1]
        let bad: [(String, String)] = [
            ("expired", try await token(exp: now - 1)),
            ("another issuer", try await token(iss: "https://evil.example/auth/v1")),
            ("another audience", try await token(aud: "anon")),
            ("another secret", try await token(key: String(repeating: "x", count: 42))),
            ("alg none", header.replacingOccurrences(of: "=", with: "") + "." + unsigned + "."),
            ("not a user id", try await token(sub: "")),
        ]
        for (name, credential) in bad {
            let answer = try await server.call(.PUT, "/v1/users/u1", key: credential, json: #"{"plan":"pro"}"#)
            #expect(answer.status == 401 && answer.body.contains("/problems/unauthorized"), "\(name): \(answer.body)")
        }
        #expect(try await server.db.count("SELECT count(*) FROM users WHERE plan = 'pro'") == 0)
        #expect(try await server.db.count("SELECT count(*) FROM user_devices WHERE is_active = 1") == 2)
        let loggedOut = try await server.call(.DELETE, "/v1/devices/c\(String(repeating: "u", count: 21))", key: own)
        #expect(loggedOut.status == 204, "\(loggedOut.body)")
        let stopped = await server.stop()
        #expect(!stopped.stderr.contains(own))
    }

    /// A retried `POST` with the same `Idempotency-Key` gets the first answer and acts once; the same key with
    /// another body is 422; another caller's key of the same text is its own.
    @Test(arguments: Backend.allCases) func aRetriedPostWithItsKeyActsOnce(_ backend: Backend) async throws {
        let server = try await Server.start(backend)
        let admin = try await server.key("admin")
        let hook = try await server.key("hook")
        try await server.userWithDevice("u1", key: admin)
        let event = #"{"user_id":"u1","used":30,"limit":30}"#
        let once = [("Idempotency-Key", "write-41")]
        let first = try await server.call(.POST, "/v1/hooks/content-limit", key: hook, json: event, headers: once)
        let again = try await server.call(.POST, "/v1/hooks/content-limit", key: hook, json: event, headers: once)
        #expect(first.status == 200 && Self.object(first.body)["action"] as? String == "sent", "\(first.body)")
        #expect(again.status == 200 && again.body == first.body, "a replay answers the first answer: \(again.body)")
        let other = try await server.call(
            .POST, "/v1/hooks/content-limit", key: hook, json: #"{"user_id":"u1","used":29,"limit":30}"#, headers: once)
        #expect(other.status == 422 && other.body.contains("/problems/unprocessable"), "\(other.body)")
        // Another caller's key of the same text is another key: it acts (and the hook's own rule sends nothing).
        let mine = try await server.call(.POST, "/v1/hooks/content-limit", key: admin, json: event, headers: once)
        #expect(mine.status == 200 && Self.object(mine.body)["action"] as? String == "none", "\(mine.body)")
        #expect(try String(contentsOfFile: server.outbox, encoding: .utf8).split(separator: "\n").count == 1)

        for _ in 0..<3 {
            let entry = try await server.call(
                .POST, "/v1/users/u1/entries", key: hook, json: #"{"at":"2026-11-21T19:00:00Z"}"#,
                headers: [("Idempotency-Key", "entry-7")])
            #expect(entry.status == 204, "\(entry.body)")
        }
        #expect(try await server.db.count("SELECT count(*) FROM diary_entries") == 1)
        // A refused request's answer is kept too: the retry is refused the same way, and writes nothing.
        for _ in 0..<2 {
            let refused = try await server.call(
                .POST, "/v1/users/ghost/entries", key: hook, json: "{}", headers: [("Idempotency-Key", "ghost")])
            #expect(refused.status == 404 && refused.body.contains("/problems/not-found"), "\(refused.body)")
        }
        let badKey = try await server.call(
            .POST, "/v1/users/u1/entries", key: hook, json: "{}", headers: [("Idempotency-Key", "has space")])
        #expect(badKey.status == 400, "\(badKey.body)")
        _ = await server.stop()
    }

    /// SIGTERM while a request is in flight (its head sent, its body still arriving): the request is answered, then
    /// the server exits 0 and the write is there. The client says when its head is out (a marker file), so that a
    /// loaded machine's slow start cannot put the signal first.
    @Test func sigtermLetsTheRequestInFlightFinish() async throws {
        let server = try await Server.start(.sqlite)
        let admin = try await server.key("admin")
        let marker = server.db.directory.appendingPathComponent("head-sent").path
        let client = """
            import socket, sys, time
            s = socket.create_connection(("127.0.0.1", \(server.port)))
            body = b'{"timezone":"UTC"}'
            head = ("PUT /v1/users/inflight HTTP/1.1\\r\\nHost: x\\r\\nAuthorization: Bearer \(admin)\\r\\n"
                    "Content-Type: application/json\\r\\nContent-Length: %d\\r\\nConnection: close\\r\\n\\r\\n" % len(body))
            s.sendall(head.encode() + body[:5])
            time.sleep(0.3)
            open("\(marker)", "w").close()
            time.sleep(1.5)
            s.sendall(body[5:])
            answer = b""
            while True:
                chunk = s.recv(65536)
                if not chunk: break
                answer += chunk
            print(answer.decode().split("\\r\\n")[0])
            """
        let python = try Executables.start(executable: URL(fileURLWithPath: "/usr/bin/env"), ["python3", "-c", client])
        for _ in 0..<600 where !FileManager.default.fileExists(atPath: marker) {
            try await Task.sleep(for: .milliseconds(50))
        }
        #expect(FileManager.default.fileExists(atPath: marker), "the client never sent its request")
        server.started.process.terminate()
        let answered = await Executables.finish(python, limit: .seconds(60))
        #expect(answered.stdout.hasPrefix("HTTP/1.1 200"), "\(answered.stdout) \(answered.stderr)")
        let stopped = await Executables.finish(server.started, limit: .seconds(60))
        #expect(stopped.status == 0 && stopped.signal == nil, "\(stopped.stderr)")
        #expect(try await server.db.count("SELECT count(*) FROM users WHERE id = 'inflight'") == 1)
    }

    /// PostgreSQL going away under a running server (its connections killed, new ones refused): 503 with
    /// Retry-After, never a 500; when it is back, the server answers again without a restart.
    @Test func aStoreThatGoesAwayIs503UntilItIsBack() async throws {
        let server = try await Server.start(.postgres)
        let admin = try await server.key("admin")
        #expect(try await server.call(.GET, "/healthz").status == 200)
        let name = try #require(URLComponents(string: server.db.path)?.path.dropFirst())
        func psql(_ sql: String) async throws {
            let result = await Executables.finish(
                try Executables.start(
                    executable: URL(fileURLWithPath: "/usr/bin/env"),
                    ["psql", "-q", try Backend.postgresAdminURL, "-c", sql]))
            #expect(result.status == 0, "\(sql): \(result.stderr)")
        }
        try await psql("ALTER DATABASE \(name) ALLOW_CONNECTIONS false")
        try await psql(
            "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = '\(name)' AND pid <> pg_backend_pid()"
        )
        for _ in 0..<2 {
            let health = try await server.call(.GET, "/healthz")
            #expect(health.status == 503 && health.body.contains("/problems/unavailable"), "\(health.body)")
            let put = try await server.call(.PUT, "/v1/users/u1", key: admin, json: #"{"timezone":"UTC"}"#)
            #expect(put.status == 503 && Self.object(put.body)["retry_after"] != nil, "\(put.body)")
        }
        try await psql("ALTER DATABASE \(name) ALLOW_CONNECTIONS true")
        #expect(try await server.call(.GET, "/healthz").status == 200)
        #expect(try await server.call(.PUT, "/v1/users/u1", key: admin, json: #"{"timezone":"UTC"}"#).status == 200)
        let stopped = await server.stop()
        #expect(stopped.status == 0, "\(stopped.stderr)")
    }

    /// The rule itself: kept 24 hours, a request in progress for a minute is taken over.
    @Test func anIdempotencyKeysRowDecides() {
        let row = IdempotencyRecord(requestSHA256: "a", status: 200, response: "{}", createdAt: 1_000)
        #expect(IdempotencyRule.decide(nil, requestSHA256: "a", now: 1_000) == .proceed)
        #expect(IdempotencyRule.decide(row, requestSHA256: "a", now: 1_001) == .replay(status: 200, response: "{}"))
        #expect(IdempotencyRule.decide(row, requestSHA256: "b", now: 1_001) == .conflict)
        #expect(IdempotencyRule.decide(row, requestSHA256: "b", now: 1_000 + 86_400) == .proceed)
        let running = IdempotencyRecord(requestSHA256: "a", status: 0, response: nil, createdAt: 1_000)
        #expect(IdempotencyRule.decide(running, requestSHA256: "a", now: 1_059) == .inProgress)
        #expect(IdempotencyRule.decide(running, requestSHA256: "a", now: 1_060) == .proceed)
    }

    /// Over `--api-rate` requests a second with one key: 429 with Retry-After; another key has its own bucket.
    /// The requests go at once, so that a loaded machine's slowness cannot refill the bucket between them.
    @Test func aKeyOverItsRateIsToldToWait() async throws {
        let server = try await Server.start(.sqlite, arguments: ["--api-rate", "1"])
        let first = try await server.key("admin")
        let second = try await server.key("admin")
        let answers = try await withThrowingTaskGroup(of: (status: Int, type: String, body: String, allow: String).self)
        { group in
            for _ in 0..<20 { group.addTask { try await server.call(.GET, "/v1/users/u1/explain", key: first) } }
            return try await group.reduce(into: []) { $0.append($1) }
        }
        let limited = answers.filter { $0.status == 429 }
        #expect(limited.count >= 10, "\(answers.map(\.status))")
        if let one = limited.first {
            #expect(one.type == "application/problem+json" && one.body.contains("/problems/too-many-requests"))
            #expect(Self.object(one.body)["retry_after"] as? Int == 1, "\(one.body)")
        }
        #expect(try await server.call(.GET, "/v1/users/u1/explain", key: second).status != 429)
        _ = await server.stop()
    }

    /// The bucket refills at the rate, up to one second's worth.
    @Test func theBucketRefillsAtItsRate() {
        let limiter = RateLimiter(rate: 2)
        let start = ContinuousClock.now
        #expect(limiter.take("k", now: start) == nil)
        #expect(limiter.take("k", now: start) == nil)
        #expect(limiter.take("k", now: start) == 1)
        #expect(limiter.take("k", now: start + .milliseconds(500)) == nil)
        #expect(limiter.take("k", now: start + .milliseconds(500)) == 1)
        #expect(limiter.take("other", now: start) == nil)
        #expect(RateLimiter(rate: 0).take("k") == nil)
    }

    /// A JWKS at a URL (as Supabase and Firebase publish theirs) is read at start-up over https, and read again
    /// when a token does not verify (the keys rotated): the new key's tokens pass, the retired key's no longer do.
    /// http is refused except on this machine, and a URL that does not answer stops the start-up.
    @Test func aJWKSAtAURLIsReadAgainWhenTheKeysRotate() async throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("jwks-\(UUID().uuidString)")
        defer { try? FileManager.default.removeItem(at: directory) }
        let credentials = try SimulatorCredentials.prepare(in: directory)
        let served = NIOLockedValueBox("")
        let recorder = try await HTTPRecorder(tls: credentials) { _ in (.ok, served.withLockedValue { $0 }) }
        defer { Task { await recorder.stop() } }
        func key(_ kid: String) async throws -> (keys: JWTKeyCollection, jwks: String) {
            let key = P256.Signing.PrivateKey()
            let point = key.publicKey.x963Representation.dropFirst()
            func base64URL(_ bytes: Data.SubSequence) -> String {
                Data(bytes).base64EncodedString().replacingOccurrences(of: "+", with: "-")
                    .replacingOccurrences(of: "/", with: "_").replacingOccurrences(of: "=", with: "")
            }
            let jwk =
                #"{"kty":"EC","crv":"P-256","alg":"ES256","use":"sig","kid":"\#(kid)","x":"\#(base64URL(point.prefix(32)))","y":"\#(base64URL(point.suffix(32)))"}"#
            let keys = JWTKeyCollection()
            await keys.add(ecdsa: try ES256PrivateKey(pem: key.pemRepresentation), kid: JWKIdentifier(string: kid))
            return (keys, #"{"keys":[\#(jwk)]}"#)
        }
        let claims = TestClaims(
            sub: .init(value: "u1"), exp: .init(value: Date(timeIntervalSince1970: 2_000_000_000)),
            iss: .init(value: "https://example.supabase.co/auth/v1"), aud: .init(value: ["authenticated"]))
        let (first, second) = (try await key("first"), try await key("second"))
        served.withLockedValue { $0 = first.jwks }
        let remote = try RemoteJWKS(
            url: "https://127.0.0.1:\(recorder.port)/auth/v1/.well-known/jwks.json", caFile: credentials.caFile)
        let keys = VerifyingKeys(
            secret: nil, jwks: nil, remote: remote, logger: Logger(label: "tests"), retryAfter: .zero)
        try await keys.load()
        #expect(try await keys.verify(try await first.keys.sign(claims)).string("sub") == "u1")
        #expect(recorder.requests.count == 1 && recorder.requests.first?.path == "/auth/v1/.well-known/jwks.json")

        served.withLockedValue { $0 = second.jwks }
        #expect(try await keys.verify(try await second.keys.sign(claims)).string("sub") == "u1")
        #expect(recorder.requests.count == 2)
        await #expect(throws: (any Error).self) { try await keys.verify(try await first.keys.sign(claims)) }

        #expect(throws: JobError.self) { try RemoteJWKS(url: "http://auth.example.com/jwks.json", caFile: nil) }

        // Keys past their hour are read again in the background: the request at hand is answered with the keys
        // it has (the retired key's token still passes once), and the keys read meanwhile take over.
        let hourly = VerifyingKeys(
            secret: nil, jwks: nil, remote: remote, logger: Logger(label: "tests"), refreshAfter: .zero,
            retryAfter: .seconds(3600))
        served.withLockedValue { $0 = first.jwks }
        try await hourly.load()
        served.withLockedValue { $0 = second.jwks }
        #expect(try await hourly.verify(try await first.keys.sign(claims)).string("sub") == "u1")
        var rotated = false
        for _ in 0..<100 where !rotated {
            rotated = (try? await hourly.verify(try await second.keys.sign(claims))) != nil
            if !rotated { try await Task.sleep(for: .milliseconds(50)) }
        }
        #expect(rotated, "the background read never brought the new key")
        await #expect(throws: (any Error).self) { try await hourly.verify(try await first.keys.sign(claims)) }
        await recorder.stop()
        let db = try await TemporaryDatabase(.sqlite)
        let unreachable = try await Executables.run(
            "push-api",
            [
                "--database", db.path, "--port", "0", "--api-jwks-url", remote.url, "--api-jwt-issuer", "i",
                "--api-jwt-audience", "a",
            ], environment: ["PUSH_CA_FILE": credentials.caFile])
        #expect(unreachable.status == 69 && unreachable.stderr.contains("cannot read"), "\(unreachable.stderr)")
    }

    struct TestClaims: JWTPayload {
        var sub: SubjectClaim
        var exp: ExpirationClaim
        var iss: IssuerClaim
        var aud: AudienceClaim
        func verify(using algorithm: some JWTAlgorithm) async throws {}
    }
}

/// Issue 66: `push-api` as a Lambda custom runtime behind a Function URL or an API Gateway HTTP API: each
/// invocation a payload-2.0 request, answered by the same routes as the server.
@Suite struct HTTPAPILambdaTests {
    /// A Function URL request as Lambda delivers it.
    static func request(
        _ method: String, _ path: String, query: String = "", key: String? = nil, body: String? = nil,
        base64: Bool = false
    ) -> String {
        var headers = #""host":"abc.lambda-url.eu-west-1.on.aws","content-type":"application/json""#
        if let key { headers += #","authorization":"Bearer \#(key)""# }
        let encoded = body.map { base64 ? Data($0.utf8).base64EncodedString() : $0 }
        var escaped = ""
        if let encoded {
            escaped = encoded.replacingOccurrences(of: "\\", with: "\\\\").replacingOccurrences(of: "\"", with: "\\\"")
        }
        return
            #"{"version":"2.0","routeKey":"$default","rawPath":"\#(path)","rawQueryString":"\#(query)","headers":{\#(headers)},"requestContext":{"http":{"method":"\#(method)","path":"\#(path)","protocol":"HTTP/1.1","sourceIp":"203.0.113.7"},"requestId":"r1","stage":"$default"},"isBase64Encoded":\#(base64)\#(body == nil ? "" : #","body":"\#(escaped)""#)}"#
    }

    /// The response an invocation returned: status, headers, body.
    static func answer(_ outcome: InvocationOutcome?) throws -> (status: Int, headers: [String: String], body: String) {
        let payload = try #require(outcome?.response, "expected a response, got \(String(describing: outcome))")
        let object = try #require(try JSONSerialization.jsonObject(with: Data(payload.utf8)) as? [String: Any])
        return (
            object["statusCode"] as? Int ?? 0, object["headers"] as? [String: String] ?? [:],
            object["body"] as? String ?? ""
        )
    }

    @Test func functionURLRequestsAreAnsweredByTheSameRoutes() async throws {
        let db = try await TemporaryDatabase(.sqlite)
        let outbox = db.directory.appendingPathComponent("outbox.jsonl").path
        let created = try await Executables.run(
            "pushctl", ["api-key", "create", "--database", db.path, "--scope", "admin", "--name", "lambda"])
        let key = created.stdout.trimmingCharacters(in: .whitespacesAndNewlines)
        let api = try await LambdaRuntimeSimulator.start()
        let process = try Executables.start(
            "push-api", [],
            environment: ["AWS_LAMBDA_RUNTIME_API": api.address, "PUSH_DATABASE_URL": db.path, "PUSH_OUTBOX": outbox])
        let deadline = (Int64(Date().timeIntervalSince1970) + 300) * 1000
        func call(_ event: String) async throws -> (status: Int, headers: [String: String], body: String) {
            try Self.answer(await api.invoke(event, deadlineMs: deadline))
        }
        let user = try await call(Self.request("PUT", "/v1/users/u1", key: key, body: #"{"timezone":"UTC"}"#))
        #expect(user.status == 200 && user.body.contains(#""created":true"#), "\(user)")
        #expect(user.headers["content-type"] == "application/json; charset=utf-8", "\(user.headers)")
        let device = try await call(
            Self.request(
                "POST", "/v1/users/u1/devices", key: key,
                body: #"{"token":"\#(HTTPAPITests.apnsToken)","provider":"apns","platform":"ios"}"#, base64: true))
        #expect(device.status == 200, "\(device)")
        let hook = try await call(
            Self.request("POST", "/v1/hooks/content-limit", key: key, body: #"{"user_id":"u1","used":27,"limit":30}"#))
        #expect(hook.status == 200 && hook.body.contains(#""action":"sent""#), "\(hook)")
        let explained = try await call(
            Self.request("GET", "/v1/users/u1/explain", query: "at=2026-11-21T20%3A00%3A00Z", key: key))
        #expect(explained.status == 200 && explained.body.contains(#""now":"2026-11-21T20:00:00Z""#), "\(explained)")
        // Problems are answers too: the invocation succeeds with the status.
        let anonymous = try await call(Self.request("PUT", "/v1/users/u2", body: #"{"timezone":"UTC"}"#))
        #expect(anonymous.status == 401 && anonymous.headers["content-type"] == "application/problem+json")
        let nowhere = try await call(Self.request("GET", "/v2/nothing", key: key))
        #expect(nowhere.status == 404 && nowhere.body.contains("/problems/not-found"), "\(nowhere)")
        // An event that is not such a request fails the invocation, and the runtime goes on.
        guard case .error(let type, _, _)? = await api.invoke(#"{"time":"2026-11-21T20:00:00Z"}"#, deadlineMs: deadline)
        else {
            Issue.record("a scheduled event was answered")
            return
        }
        #expect(type == "JobError.dataError")
        #expect(try await call(Self.request("GET", "/healthz")).status == 200)
        // A Function URL is on the internet: the counters that need no credential are not served there (issue 79).
        let metrics = try await call(Self.request("GET", "/metrics"))
        #expect(metrics.status == 404 && metrics.body.contains("not served under Lambda"), "\(metrics)")
        #expect(try await call(Self.request("GET", "/metrics", query: "x=1")).status == 404)
        await api.stop()
        _ = await Executables.finish(process)
        #expect(try String(contentsOfFile: outbox, encoding: .utf8).split(separator: "\n").count == 1)
        #expect(try await db.count("SELECT count(*) FROM users") == 1)
    }
}

import Foundation
import GRDB
import JobKitTestSupport
import NIOConcurrencyHelpers
import Testing

@testable import JobKit
@testable import JobKitDelivery

@Suite struct TokenJanitorTests {
    let now = instant("2026-12-30T12:00:00Z")
    let day: Int64 = 86_400

    /// A janitor whose probe sender must not be needed.
    func janitor(_ store: any JobStore) -> TokenJanitor {
        TokenJanitor(store: store, logger: quietLogger) { () async throws(JobError) -> any Sender in
            Issue.record("the probe sender was made without --probe")
            return RecordingSender()
        }
    }

    func janitor(_ store: any JobStore, probe: @escaping @Sendable () async throws(JobError) -> any Sender)
        -> TokenJanitor
    {
        TokenJanitor(store: store, logger: quietLogger, makeProbeSender: probe)
    }

    func device(_ db: TemporaryDatabase, user: String, token: String, provider: Provider = .fcm, seenDaysAgo: Int64)
        async throws
    {
        try await db.store.upsertUser(UserProfile(id: user, timezone: "UTC"), now: 0)
        _ = try await db.store.register(
            DeviceRegistration(
                userID: user, token: provider == .apns ? token.lowercased() : token,
                provider: provider, platform: provider == .apns ? .ios : .android),
            now: now - seenDaysAgo * day)
    }

    @Test(arguments: Backend.allCases) func staleAndFCMExpiryRules(_ backend: Backend) async throws {
        let db = try await TemporaryDatabase(backend)
        try await device(db, user: "a", token: "fresh", seenDaysAgo: 89)
        try await device(db, user: "b", token: "old", seenDaysAgo: 91)
        try await device(db, user: "c", token: "ab01", provider: .apns, seenDaysAgo: 300)
        try await device(db, user: "d", token: "fcm-ancient", seenDaysAgo: 271)
        var options = JanitorOptions(now: now)
        let first = try await janitor(db.store).run(options)
        #expect(first.staleDeactivated == 2)
        #expect(first.fcmExpiredDeactivated == 1)
        #expect(
            try await db.strings(
                "SELECT token || ' ' || CASE WHEN is_active THEN 1 ELSE 0 END || ' ' || coalesce(deactivation_reason, '-') FROM user_devices ORDER BY token"
            )
                == ["ab01 0 stale", "fcm-ancient 0 fcm_expired", "fresh 1 -", "old 0 stale"])
        // With a long stale period, FCM's 270 days still applies.
        let db2 = try await TemporaryDatabase(backend)
        try await device(db2, user: "c", token: "ab01", provider: .apns, seenDaysAgo: 300)
        try await device(db2, user: "d", token: "fcm-ancient", seenDaysAgo: 271)
        options.staleDays = 400
        let second = try await janitor(db2.store).run(options)
        #expect(second.fcmExpiredDeactivated == 1)
        #expect(second.staleDeactivated == 0)
        #expect(try await db2.count("SELECT count(*) FROM user_devices WHERE is_active AND provider = 'apns'") == 1)
    }

    /// Issue 78: a device mirrored from the app's own table (a database webhook, the SQL mirror) is the app's to
    /// retire: neither age rule touches it, however long ago the app last saw it; an API registration of the same
    /// token later keeps the mark, and the app's own sighting is the stored one.
    @Test(arguments: Backend.allCases) func mirroredDevicesNeverGoStale(_ backend: Backend) async throws {
        let db = try await TemporaryDatabase(backend)
        try await device(db, user: "api", token: "api-old", seenDaysAgo: 300)
        try await db.store.upsertUser(UserProfile(id: "app", timezone: "UTC"), now: 0)
        for (token, days) in [("app-old", Int64(300)), ("app-older", 100)] {
            var mirrored = try DeviceRegistration(userID: "app", token: token, provider: .fcm, platform: .android)
            mirrored.mirrored = true
            mirrored.lastSeen = now - days * day
            _ = try await db.store.register(mirrored, now: now)
        }
        // Registered again through the API, without the app's sighting: still mirrored, seen now.
        _ = try await db.store.register(
            try DeviceRegistration(userID: "app", token: "app-older", provider: .fcm, platform: .android), now: now)
        let summary = try await janitor(db.store).run(JanitorOptions(now: now))
        #expect(summary.staleDeactivated == 0 && summary.fcmExpiredDeactivated == 1, "\(summary.text)")
        #expect(
            try await db.strings(
                "SELECT token || ' ' || CASE WHEN is_active THEN 1 ELSE 0 END || ' ' || CASE WHEN mirrored THEN 1 ELSE 0 END || ' ' || ((\(now) - \(backend == .sqlite ? "last_seen" : "extract(epoch FROM last_seen)::bigint")) / \(day)) FROM user_devices ORDER BY token"
            ) == ["api-old 0 0 300", "app-old 1 1 300", "app-older 1 1 0"])
    }

    @Test func probeDeactivatesOnlyTokensFCMCallsUnregisteredAndDeliversNothing() async throws {
        let harness = try await DeliveryHarness.start()
        let db = harness.db
        for (i, token) in ["dead-1", "dead-2", "live-1", "live-2", "live-3"].enumerated() {
            try await device(db, user: "p\(i)", token: token, seenDaysAgo: 45)
        }
        try await device(db, user: "recent", token: "dead-recent", seenDaysAgo: 5)  // seen recently: not probed
        var delivery = harness.delivery(apns: false)
        delivery.fcm?.validateOnly = true
        let store = db.store
        let probeDelivery = delivery
        var options = JanitorOptions(now: now)
        options.probe = true
        options.probeRate = 2
        // The probes are paced on the janitor's clock: 2 a second, so 5 of them wait twice, on this clock and
        // not the wall's (the test slept for those two seconds).
        var prober = janitor(store) { () async throws(JobError) -> any Sender in
            try await PushSender(configuration: probeDelivery, credentials: store, logger: quietLogger)
        }
        let clock = ManualRetryClock()
        prober.clock = clock
        let summary = try await prober.run(options)
        #expect(clock.waits == [.seconds(1), .seconds(1)])
        #expect(summary.probed == 5)
        #expect(summary.probeUnregistered == 2)
        #expect(
            try await db.strings("SELECT token FROM user_devices WHERE NOT is_active ORDER BY token") == [
                "dead-1", "dead-2",
            ])
        #expect(
            try await db.strings("SELECT DISTINCT deactivation_reason FROM user_devices WHERE NOT is_active") == [
                "UNREGISTERED"
            ])
        #expect(harness.simulator.stats.accepted == 0)
        #expect(harness.simulator.stats.validated == 3)
        await harness.stop()
    }

    /// A janitor run whose probes FCM could not answer (credentials refused: exit 77) was recorded `ok`.
    @Test(arguments: Backend.allCases) func aRunWhoseProbesWereLeftIsRecordedFailed(_ backend: Backend) async throws {
        struct RefusingSender: Sender {
            func send(_ batch: [OutgoingNotification]) async -> [DeliveryReport] {
                batch.map { _ in DeliveryReport(channel: .fcm, outcome: .credentials, reason: "UNAUTHENTICATED") }
            }
        }
        let db = try await TemporaryDatabase(backend)
        try await device(db, user: "p", token: "quiet-1", seenDaysAgo: 45)
        var options = JanitorOptions(now: now)
        options.probe = true
        let summary = try await janitor(db.store) { () async throws(JobError) -> any Sender in RefusingSender() }
            .run(options)
        #expect(summary.failure?.exitCode == 77)
        #expect(try await db.strings("SELECT job || ' ' || outcome FROM job_runs") == ["token-janitor failed"])
        // It says why, as its exit code does.
        let report = try await db.store.healthReport(from: now - day, to: now + 1)
        #expect(report.lastRuns.map(\.error) == [summary.failure?.message])
    }

    /// A janitor run killed outright left no `job_runs` row. It journals itself `running` from its start (as the
    /// probes' sender is made, mid-run), and its end replaces that row.
    @Test(arguments: Backend.allCases) func aRunIsJournaledRunningFromItsStart(_ backend: Backend) async throws {
        let db = try await TemporaryDatabase(backend)
        try await device(db, user: "p", token: "quiet-1", seenDaysAgo: 45)
        var options = JanitorOptions(now: now)
        options.probe = true
        let query = "SELECT job || ' ' || outcome FROM job_runs"
        let midRun = NIOLockedValueBox<[String]?>(nil)
        let summary = try await janitor(db.store) { () async throws(JobError) -> any Sender in
            let rows = try? await db.strings(query)
            midRun.withLockedValue { $0 = rows }
            return RecordingSender()
        }.run(options)
        #expect(summary.probed == 1)
        #expect(midRun.withLockedValue { $0 } == ["token-janitor running"])
        #expect(try await db.strings(query) == ["token-janitor ok"])
    }

    /// A janitor run that ended with an error (here: the probes' FCM credentials could not be loaded) recorded
    /// nothing in `job_runs`; it is now recorded `failed`, with its error and what it did before it.
    @Test(arguments: Backend.allCases) func aRunThatEndsWithAnErrorIsRecordedFailedWithTheError(_ backend: Backend)
        async throws
    {
        let db = try await TemporaryDatabase(backend)
        try await device(db, user: "s", token: "stale-1", seenDaysAgo: 100)
        try await device(db, user: "p", token: "quiet-1", seenDaysAgo: 45)
        var options = JanitorOptions(now: now)
        options.probe = true
        let noAccount = JobError.config("FCM service account: no such file /etc/push/fcm.json")
        await #expect(throws: noAccount) {
            try await janitor(db.store) { () async throws(JobError) -> any Sender in throw noAccount }.run(options)
        }
        #expect(try await db.strings("SELECT job || ' ' || outcome FROM job_runs") == ["token-janitor failed"])
        let stored = try await db.strings("SELECT summary\(backend == .postgres ? "::text" : "") FROM job_runs")
        let summary = try JSONSerialization.jsonObject(with: Data(stored.joined().utf8)) as? [String: Any]
        #expect(summary?["error"] as? String == noAccount.message)
        #expect(summary?["stale_deactivated"] as? Int == 1, "\(stored)")
    }

    /// A dry run that fails writes nothing either: no failed-run record (whose guard had no test of its own), no
    /// device changed. The failure here is a table the retention step counts in, gone.
    @Test(arguments: Backend.allCases) func aDryRunThatFailsRecordsNoRun(_ backend: Backend) async throws {
        let db = try await TemporaryDatabase(backend)
        try await device(db, user: "s", token: "stale-1", seenDaysAgo: 100)
        try await db.execute("DROP TABLE notification_deliveries")
        let devices =
            "SELECT token || ' ' || CASE WHEN is_active THEN 1 ELSE 0 END || ' ' || \(db.epoch("updated_at")) FROM user_devices"
        let before = try await db.strings(devices)
        var options = JanitorOptions(now: now)
        options.dryRun = true
        await #expect(throws: JobError.self) { try await janitor(db.store).run(options) }
        #expect(try await db.count("SELECT count(*) FROM job_runs") == 0)
        #expect(try await db.strings(devices) == before)
        options.dryRun = false
        await #expect(throws: JobError.self) { try await janitor(db.store).run(options) }
        #expect(try await db.strings("SELECT job || ' ' || outcome FROM job_runs") == ["token-janitor failed"])
    }

    func log(
        _ db: TemporaryDatabase, _ user: String, _ type: String, _ period: String, claimedDaysAgo: Int64,
        status: String = "sent"
    ) async throws {
        let at = db.ts(now - claimedDaysAgo * day)
        try await db.execute(
            """
            INSERT INTO notification_logs (user_id, notification_type, period_key, status, run_id, claimed_at, updated_at)
            VALUES ('\(user)', '\(type)', '\(period)', '\(status)', 'r', \(at), \(at))
            """)
    }

    @Test(arguments: Backend.allCases) func retentionNeverRemovesALogRowThatStillDeduplicates(_ backend: Backend)
        async throws
    {
        let db = try await TemporaryDatabase(backend)
        try await db.store.upsertUser(UserProfile(id: "u", timezone: "Pacific/Kiritimati"), now: 0)
        try await log(db, "u", "diary_reminder", "2026-10-01", claimedDaysAgo: 90)  // over: goes
        try await log(db, "u", "diary_reminder", "2026-12-29", claimedDaysAgo: 1)  // recent: stays
        try await log(db, "u", "content_limit_90", "2026-10", claimedDaysAgo: 80)  // month over: goes
        try await log(db, "u", "content_limit_100", "2026", claimedDaysAgo: 300)  // this year's: stays
        try await log(db, "u", "content_limit_90", "2025", claimedDaysAgo: 380)  // last year's: goes
        // Held for quiet hours, in a month not over: stays.
        try await log(db, "u", "content_limit_100", "2026-12", claimedDaysAgo: 40, status: "deferred")
        // Left claimed by a run that died, or held, in a period long over: nothing sends them any more, they go.
        try await log(db, "u", "diary_reminder", "2026-09-15", claimedDaysAgo: 100, status: "claimed")
        try await log(db, "u", "content_limit_100", "2026-09", claimedDaysAgo: 95, status: "deferred")
        try await log(db, "u", "content_limit_90", "2026-08", claimedDaysAgo: 130, status: "retry")
        try await db.execute(
            """
            INSERT INTO notification_deliveries (log_id, provider, outcome, run_id, created_at)
            SELECT id, 'fcm', 'delivered', 'r', claimed_at FROM notification_logs
            """)
        var options = JanitorOptions(now: now)
        options.logRetentionDays = 35
        let dry = try await janitor(db.store).run(
            {
                var o = options
                o.dryRun = true
                return o
            }())
        let summary = try await janitor(db.store).run(options)
        #expect(summary.logsDeleted == 6)
        #expect(dry.logsDeleted == summary.logsDeleted)
        #expect(summary.deliveriesDeleted == 8)  // all but the 1-day-old one (deliveries keep 30 days)
        #expect(
            try await db.strings(
                "SELECT notification_type || ' ' || period_key FROM notification_logs ORDER BY period_key")
                == ["content_limit_100 2026", "content_limit_100 2026-12", "diary_reminder 2026-12-29"])
        // Default retention (400 days) keeps everything younger.
        let defaults = try await janitor(db.store).run(JanitorOptions(now: now))
        #expect(defaults.logsDeleted == 0)
    }

    /// `job_runs` had no retention: every run's row and JSON summary (about 600 bytes) stayed for ever, 96 a day for
    /// the reminder job alone, and more with shards. Runs older than the run retention (90 days) now go, except the
    /// runs at each job's latest instant, which the report's "last run of each job" shows: a job that stopped
    /// running months ago still says when it last ran.
    @Test(arguments: Backend.allCases) func oldRunRecordsGoButEachJobKeepsItsLastRun(_ backend: Backend) async throws {
        let db = try await TemporaryDatabase(backend)
        for (id, job, daysAgo) in [
            ("a-old", "diary-reminder", 120), ("a-older", "diary-reminder", 400), ("a-recent", "diary-reminder", 89),
            ("a-last", "diary-reminder", 0),
            // Stopped long ago: its last instant (two shards) stays, its runs before that go.
            ("b-last-1", "old-job", 200), ("b-last-2", "old-job", 200), ("b-before", "old-job", 201),
        ] as [(String, String, Int64)] {
            try await db.execute(
                "INSERT INTO job_runs (id, job, run_at, duration_ms, outcome, summary) VALUES ('\(id)', '\(job)', \(db.ts(now - daysAgo * day)), 5, 'ok', '{}')"
            )
        }
        var options = JanitorOptions(now: now)
        options.dryRun = true
        let dry = try await janitor(db.store).run(options)
        options.dryRun = false
        options.batchSize = 2
        let done = try await janitor(db.store).run(options)
        #expect(dry.runsDeleted == 3 && done.runsDeleted == 3)
        #expect(
            Set(try await db.strings("SELECT id FROM job_runs"))
                == ["a-last", "a-recent", "b-last-1", "b-last-2", done.runID])
        options.runRetentionDays = 30
        #expect(try await janitor(db.store).run(options).runsDeleted == 1)  // a-recent; the run just recorded stays
    }

    @Test(arguments: Backend.allCases) func purgeIsOffByDefaultAndADryRunWritesNothing(_ backend: Backend) async throws
    {
        let db = try await TemporaryDatabase(backend)
        try await device(db, user: "gone", token: "long-gone", seenDaysAgo: 800)
        try await db.execute(
            "UPDATE user_devices SET is_active = \(backend == .sqlite ? "0" : "false"), deactivated_at = \(db.ts(now - 400 * day)), deactivation_reason = 'logout'"
        )
        try await device(db, user: "stale", token: "stale-token", seenDaysAgo: 120)
        let snapshot =
            "SELECT token || ' ' || CASE WHEN is_active THEN 1 ELSE 0 END || ' ' || \(db.epoch("updated_at")) FROM user_devices ORDER BY token"
        let before = try await db.strings(snapshot)
        let bytes = try await db.contentDigest()
        var options = JanitorOptions(now: now)
        options.dryRun = true
        options.purge = true
        let readOnly = try await db.reopen(.readOnly)
        let dry = try await janitor(readOnly).run(options)
        #expect(dry.staleDeactivated == 1)
        #expect(dry.devicesPurged == 1)
        #expect(try await db.strings(snapshot) == before)
        #expect(try await db.count("SELECT count(*) FROM job_runs") == 0)
        #expect(try await db.contentDigest() == bytes)
        let plain = try await janitor(db.store).run(JanitorOptions(now: now))
        #expect(plain.devicesPurged == 0)
        #expect(try await db.count("SELECT count(*) FROM user_devices") == 2)
        options.dryRun = false
        let purged = try await janitor(db.store).run(options)
        #expect(purged.devicesPurged == 1)
        #expect(try await db.strings("SELECT token FROM user_devices") == ["stale-token"])
    }

    /// What a database webhook brought for a user who never got a time zone waits no longer than the stale window:
    /// a device or an entry 91 days old goes (dry: counted only), one of yesterday and a profile seen then stay.
    @Test(arguments: Backend.allCases) func whatWaitedLongerThanTheStaleWindowGoes(_ backend: Backend) async throws {
        let db = try await TemporaryDatabase(backend)
        let store = db.store
        try await store.keepWaitingDevice(token: "old-phone", userID: "never", registration: "{}", now: now - 91 * day)
        try await store.keepWaitingDevice(token: "new-phone", userID: "later", registration: "{}", now: now - day)
        try await store.keepWaitingUser(userID: "never", profileAt: nil, entryAt: now - 91 * day)
        try await store.keepWaitingUser(userID: "later", profileAt: now - 91 * day, entryAt: now - day)
        var options = JanitorOptions(now: now)
        options.dryRun = true
        #expect(try await janitor(db.store).run(options).waitingExpired == 2)
        #expect(try await db.count("SELECT count(*) FROM waiting_devices") == 2)
        let summary = try await janitor(db.store).run(JanitorOptions(now: now))
        #expect(summary.waitingExpired == 2 && summary.text.contains(" waiting_expired=2 "), "\(summary.text)")
        #expect(try await db.strings("SELECT token FROM waiting_devices") == ["new-phone"])
        #expect(try await db.strings("SELECT user_id FROM waiting_users") == ["later"])
    }

    @Test(arguments: Backend.allCases) func smallBatchesDoTheSameWork(_ backend: Backend) async throws {
        let db = try await TemporaryDatabase(backend)
        for i in 0..<25 { try await device(db, user: "u\(i)", token: "t\(i)", seenDaysAgo: 100) }
        var options = JanitorOptions(now: now)
        options.batchSize = 4
        #expect(try await janitor(db.store).run(options).staleDeactivated == 25)
        #expect(try await db.count("SELECT count(*) FROM job_runs WHERE job = 'token-janitor'") == 1)
    }
}

@Suite struct HealthReportTests {
    @Test(arguments: Backend.allCases) func figuresMatchASeededHistory(_ backend: Backend) async throws {
        let db = try await TemporaryDatabase(backend)
        let day: Int64 = 86_400
        let end = instant("2026-11-22T00:00:00Z")
        for user in ["a", "b", "c"] { try await db.store.upsertUser(UserProfile(id: user, timezone: "UTC"), now: 0) }
        for (user, token, provider, platform) in [
            ("a", "ab01", Provider.apns, Platform.ios), ("b", "fcm-b", .fcm, .android),
            ("c", "fcm-c", .fcm, .ios),
        ] {
            _ = try await db.store.register(
                DeviceRegistration(userID: user, token: token, provider: provider, platform: platform), now: 0)
        }
        try await db.store.unregister(token: "fcm-c", reason: "logout", now: end - day)
        // Day 1 (2026-11-20): a sent (2 deliveries), b failed (token dead). Day 2: a partial, c deferred warning.
        let rows: [(String, String, String, String, Int64)] = [
            ("a", "diary_reminder", "2026-11-20", "sent", end - 2 * day + 3600),
            ("b", "diary_reminder", "2026-11-20", "failed", end - 2 * day + 3600),
            ("a", "diary_reminder", "2026-11-21", "partial", end - day + 3600),
            ("c", "content_limit_90", "2026-11", "deferred", end - day + 7200),
            ("a", "diary_reminder", "2026-10-01", "sent", end - 50 * day),  // outside the window
            // Still pending when the report is made: within a day a run may send it, after that it was missed.
            ("b", "diary_reminder", "2026-11-21", "retry", end - day + 3600),
            ("c", "diary_reminder", "2026-11-20", "retry", end - 2 * day + 3600),
            ("c", "diary_reminder", "2026-11-19", "claimed", end - 3 * day),  // its run died; never taken over
            ("c", "content_limit_100", "2026-11", "retry", end - day),  // exactly a day
            ("b", "content_limit_100", "2026-11", "deferred", end - 2 * day + 60),  // its quiet hours ended long ago
        ]
        for (user, type, period, status, at) in rows {
            try await db.execute(
                """
                INSERT INTO notification_logs (user_id, notification_type, period_key, status, run_id, claimed_at, updated_at)
                VALUES ('\(user)', '\(type)', '\(period)', '\(status)', 'r', \(db.ts(at)), \(db.ts(at)))
                """)
        }
        let deliveries: [((String, String), String, String, Int64)] = [
            (("a", "2026-11-20"), "apns", "delivered", end - 2 * day + 3601),
            (("a", "2026-11-20"), "apns", "delivered", end - 2 * day + 3602),
            (("b", "2026-11-20"), "fcm", "token_dead", end - 2 * day + 3601),
            (("a", "2026-11-21"), "apns", "delivered", end - day + 3601),
            (("a", "2026-11-21"), "fcm", "retry_later", end - day + 3601),
        ]
        for ((user, period), provider, outcome, at) in deliveries {
            try await db.execute(
                """
                INSERT INTO notification_deliveries (log_id, provider, outcome, run_id, created_at)
                SELECT id, '\(provider)', '\(outcome)', 'r', \(db.ts(at)) FROM notification_logs
                WHERE user_id = '\(user)' AND period_key = '\(period)'
                """)
        }
        try await db.execute(
            "INSERT INTO job_runs (id, job, run_at, duration_ms, outcome) VALUES ('r1', 'diary-reminder', \(db.ts(end - 3600)), 12, 'ok'), ('r0', 'diary-reminder', \(db.ts(end - 7200)), 9, 'ok')"
        )
        let report = try await db.store.healthReport(from: end - 7 * day, to: end)
        // day, type: claimed, sent, partial, failed, deferred, retry, missed, superseded, in progress
        #expect(
            report.volume.map(Self.counts) == [
                "2026-11-19 diary_reminder: 1 0 0 0 0 0 1 0 0",
                "2026-11-20 content_limit_100: 1 0 0 0 0 0 1 0 0",
                "2026-11-20 diary_reminder: 3 1 0 1 0 0 1 0 0",
                "2026-11-21 content_limit_100: 1 0 0 0 0 0 1 0 0",
                "2026-11-21 content_limit_90: 1 0 0 0 1 0 0 0 0",
                "2026-11-21 diary_reminder: 2 0 1 0 0 1 0 0 0",
            ])
        #expect(
            report.deliveries == [
                .init(key: "apns/delivered", count: 3), .init(key: "fcm/retry_later", count: 1),
                .init(key: "fcm/token_dead", count: 1),
            ])
        #expect(
            report.invalidTokenRate == [
                .init(day: "2026-11-20", deliveries: 3, tokenDead: 1),
                .init(day: "2026-11-21", deliveries: 2, tokenDead: 0),
            ])
        #expect(
            report.activeDevices == [.init(key: "android/fcm/token", count: 1), .init(key: "ios/apns/token", count: 1)])
        #expect(report.deactivations == [.init(key: "logout", count: 1)])
        #expect(
            report.lastRuns == [
                .init(
                    job: "diary-reminder", runAt: "2026-11-21T23:00:00Z", outcome: "ok", durationMs: 12, runs: 1,
                    outcomes: [.init(key: "ok", count: 1)])
            ])
        let html = report.html
        #expect(html.hasPrefix("<!DOCTYPE html>"))
        #expect(html.contains("<svg") && html.contains("<polyline"))
        // Self-contained: nothing to fetch, nothing to run.
        #expect(!html.contains("<script"))
        #expect(!html.contains("src="))
        #expect(!html.contains("<link"))
        #expect(report.text.contains("33.33 % (1 of 3)"))
    }

    /// Several runs of a job can evaluate the same instant: the shards of a slot (`--shard K/N` on several hosts),
    /// overlapping runners, and a Lambda invocation retried with its event's `time`. "Last run of each job"
    /// showed one of them, whichever the store returned first, so a failed shard or a failed first try hid behind
    /// an `ok` one. Each job's line now stands for every run at its latest instant: the worst outcome, how many runs
    /// there were with each outcome, and the longest of them.
    @Test(arguments: Backend.allCases) func theLastRunOfAJobCountsEveryRunAtItsLatestInstant(_ backend: Backend)
        async throws
    {
        let db = try await TemporaryDatabase(backend)
        let slot = instant("2026-11-21T20:45:00Z")
        let night = instant("2026-11-21T03:30:00Z")
        // Ids sort one failed run before its ok twin and the other after it, so that a store returning one row
        // of the instant, whichever it is, shows `ok` for one of the jobs.
        for (id, job, at, ms, outcome) in [
            ("r0", "diary-reminder", slot - 900, 9, "failed"), ("r1", "diary-reminder", slot, 40, "failed"),
            ("r2", "diary-reminder", slot, 12, "ok"), ("r3", "diary-reminder", slot, 15, "ok"),
            ("j1", "token-janitor", night, 900, "ok"), ("j2", "token-janitor", night, 30, "failed"),
            ("j3", "token-janitor", night - 86_400, 800, "ok"),
        ] {
            try await db.execute(
                "INSERT INTO job_runs (id, job, run_at, duration_ms, outcome) VALUES ('\(id)', '\(job)', \(db.ts(at)), \(ms), '\(outcome)')"
            )
        }
        let report = try await db.store.healthReport(from: slot - 7 * 86_400, to: slot + 900)
        let lines = report.text.split(separator: "\n").map(String.init)
        #expect(lines.contains("  diary-reminder: 2026-11-21T20:45:00Z failed, 3 runs (failed=1 ok=2), longest 40 ms"))
        #expect(lines.contains("  token-janitor: 2026-11-21T03:30:00Z failed, 2 runs (failed=1 ok=1), longest 900 ms"))
        #expect(
            report.lastRuns.first
                == .init(
                    job: "diary-reminder", runAt: "2026-11-21T20:45:00Z", outcome: "failed", durationMs: 40, runs: 3,
                    outcomes: [.init(key: "failed", count: 1), .init(key: "ok", count: 2)]))
        #expect(
            report.html.contains(
                #"<td class="text">failed, 2 runs (failed=1 ok=1)</td><td class="text">longest 900 ms</td>"#))
    }

    /// The report showed each job's last run only: a job that failed every other night of the week read as healthy
    /// when its last run went well. It now counts each job's runs in the window, how many failed, and names the
    /// last failed one with its error.
    @Test(arguments: Backend.allCases) func theReportCountsEachJobsRunsAndFailuresInTheWindow(_ backend: Backend)
        async throws
    {
        let db = try await TemporaryDatabase(backend)
        let end = instant("2026-11-22T00:00:00Z")
        let day: Int64 = 86_400
        for (id, job, at, outcome, summary) in [
            ("r0", "diary-reminder", end - 8 * day, "failed", #"{"error":"before the window"}"#),
            ("r1", "diary-reminder", end - 3 * day, "failed", #"{"error":"claiming: the database is locked"}"#),
            ("r2", "diary-reminder", end - 2 * day, "failed", #"{"error":"recording deliveries: disk full"}"#),
            ("r3", "diary-reminder", end - 2 * day + 900, "failed", "{}"),
            ("r4", "diary-reminder", end - day, "ok", "{}"), ("r5", "diary-reminder", end - 900, "ok", "{}"),
            ("j1", "token-janitor", end - day, "ok", "{}"),
        ] {
            try await db.execute(
                "INSERT INTO job_runs (id, job, run_at, duration_ms, outcome, summary) VALUES ('\(id)', '\(job)', \(db.ts(at)), 5, '\(outcome)', '\(summary)')"
            )
        }
        let report = try await db.store.healthReport(from: end - 7 * day, to: end)
        #expect(
            report.runsInWindow == [
                .init(job: "diary-reminder", runs: 5, failed: 3, lastFailedAt: "2026-11-20T00:15:00Z", lastError: nil),
                .init(job: "token-janitor", runs: 1, failed: 0, lastFailedAt: nil, lastError: nil),
            ])
        let lines = report.text.split(separator: "\n").map(String.init)
        #expect(lines.contains("runs of each job in the window:"), "\(report.text)")
        #expect(
            lines.contains("  diary-reminder: 5 runs, 3 failed, the last at 2026-11-20T00:15:00Z"), "\(report.text)")
        #expect(lines.contains("  token-janitor: 1 run, 0 failed"), "\(report.text)")
        #expect(report.html.contains("<h2>Runs of each job in the window</h2>"))
        // The last failed run's error, when it recorded one.
        try await db.execute("DELETE FROM job_runs WHERE id = 'r3'")
        let again = try await db.store.healthReport(from: end - 7 * day, to: end)
        #expect(
            again.text.contains(
                "  diary-reminder: 4 runs, 2 failed, the last at 2026-11-20T00:00:00Z: recording deliveries: disk full"),
            "\(again.text)")
    }

    /// A run that never recorded its end (killed outright, or still going) is counted apart, with its instant:
    /// the next run's `ok` hid it from the last-run section.
    @Test(arguments: Backend.allCases) func theReportCountsRunsThatRecordedNoEnd(_ backend: Backend) async throws {
        let db = try await TemporaryDatabase(backend)
        let end = instant("2026-11-22T00:00:00Z")
        let day: Int64 = 86_400
        for (id, at, outcome, summary) in [
            ("r0", end - 8 * day, "running", "{}"), ("r1", end - 3 * day, "running", "{}"),
            ("r2", end - 2 * day, "running", "{}"), ("r3", end - day, "failed", #"{"error":"disk full"}"#),
            ("r4", end - 900, "ok", "{}"),
        ] {
            try await db.execute(
                "INSERT INTO job_runs (id, job, run_at, duration_ms, outcome, summary) VALUES ('\(id)', 'diary-reminder', \(db.ts(at)), NULL, '\(outcome)', '\(summary)')"
            )
        }
        let report = try await db.store.healthReport(from: end - 7 * day, to: end)
        #expect(
            report.runsInWindow == [
                .init(
                    job: "diary-reminder", runs: 4, failed: 1, lastFailedAt: "2026-11-21T00:00:00Z",
                    lastError: "disk full", unfinished: 2, lastUnfinishedAt: "2026-11-20T00:00:00Z")
            ])
        #expect(
            report.text.contains(
                "  diary-reminder: 4 runs, 2 with no end recorded (killed, or still going), the last at 2026-11-20T00:00:00Z; 1 failed, the last at 2026-11-21T00:00:00Z: disk full\n"
            ), "\(report.text)")
        #expect(report.html.contains("<th>no end recorded</th>"), "\(report.html)")
    }

    /// The worst outcome leads: `running` (a run that has not recorded its end) before `ok`; one run's
    /// line is as it always was.
    @Test func theWorstOutcomeOfAnInstantLeadsAndOneRunReadsAsBefore() {
        let at = instant("2026-11-21T20:45:00Z")
        let runs = HealthReport.JobRun.fold([
            ("diary-reminder", at, "ok", 12, nil), ("diary-reminder", at, "running", nil, nil),
            ("token-janitor", at, "ok", 7, nil),
        ])
        #expect(
            runs.map(\.line) == [
                "diary-reminder: 2026-11-21T20:45:00Z running, 2 runs (running=1 ok=1), longest 12 ms",
                "token-janitor: 2026-11-21T20:45:00Z ok 7 ms",
            ])
    }

    /// A run that an error ended shows it after its line (on one line), of several failed runs the first by text,
    /// whatever order the store gave them in.
    @Test func theErrorThatEndedARunFollowsItsLine() {
        let at = instant("2026-11-21T20:45:00Z")
        let rows: [HealthFigures.LastRunRow] = [
            ("diary-reminder", at, "failed", 30, "recording deliveries: locked"), ("diary-reminder", at, "ok", 12, nil),
            ("diary-reminder", at, "failed", 9, "claiming: the database\nis read-only"),
            ("token-janitor", at, "failed", 7, "no FCM service account"),
        ]
        for order in [rows, rows.reversed()] {
            #expect(
                HealthReport.JobRun.fold(order).map(\.line) == [
                    "diary-reminder: 2026-11-21T20:45:00Z failed, 3 runs (failed=2 ok=1), longest 30 ms: claiming: the database\\nis read-only",
                    "token-janitor: 2026-11-21T20:45:00Z failed 7 ms: no FCM service account",
                ])
        }
    }

    static func counts(_ row: HealthReport.DayType) -> String {
        "\(row.day) \(row.type): "
            + [
                row.claimed, row.sent, row.partial, row.failed, row.deferred, row.retry, row.missed, row.superseded,
                row.inProgress,
            ].map(String.init).joined(separator: " ")
    }

    /// The stores count log rows per day, type and state; the report folds them into one row per day and type,
    /// every row in `claimed`, a state this version does not know in `claimed` only.
    @Test func volumeFoldsTheStatesOfADayAndType() {
        var figures = HealthFigures()
        figures.claims = [
            ("2026-11-20", "diary_reminder", "claimed", 1), ("2026-11-20", "diary_reminder", "retry", 2),
            ("2026-11-20", "diary_reminder", "sent", 5), ("2026-11-20", "diary_reminder", "superseded", 1),
            ("2026-11-20", "diary_reminder", "from_the_future", 4), ("2026-11-21", "content_limit_100", "deferred", 3),
            ("2026-11-21", "diary_reminder", "failed", 1), ("2026-11-21", "diary_reminder", "partial", 2),
            ("2026-11-21", "diary_reminder", "missed", 6),
        ]
        let report = HealthReport(
            from: instant("2026-11-15T00:00:00Z"), to: instant("2026-11-22T00:00:00Z"), figures: figures)
        #expect(report.from == "2026-11-15T00:00:00Z" && report.to == "2026-11-22T00:00:00Z" && report.days == 7)
        #expect(
            report.volume.map(Self.counts) == [
                "2026-11-20 diary_reminder: 13 5 0 0 0 2 0 1 1",
                "2026-11-21 content_limit_100: 3 0 0 0 3 0 0 0 0",
                "2026-11-21 diary_reminder: 9 0 2 1 0 0 6 0 0",
            ])
    }

    /// The text and HTML tables show every column the chart does: a claim still in progress (a run in flight, or
    /// one that died and awaits takeover) was counted in `claimed` and in no other column, so the row did not add
    /// up. Each count is right-aligned under its column's name (they were one column to the left of it). An empty
    /// section of the text says so, as the HTML's does.
    @Test func theTablesShowClaimsInProgressAndEmptySectionsSayNone() throws {
        var figures = HealthFigures()
        figures.claims = [("2026-11-21", "diary_reminder", "claimed", 2), ("2026-11-21", "diary_reminder", "sent", 5)]
        let report = HealthReport(
            from: instant("2026-11-15T00:00:00Z"), to: instant("2026-11-22T00:00:00Z"), figures: figures)
        let lines = report.text.split(separator: "\n", omittingEmptySubsequences: false).map(String.init)
        #expect(
            lines[2]
                == "day         type               claimed sent partial failed deferred retry missed superseded in progress"
        )
        #expect(
            lines[3]
                == "2026-11-21  diary_reminder           7    5       0      0        0     0      0          0           2"
        )
        for section in [
            "deliveries by provider/outcome:", "invalid-token rate by day:",
            "active devices by platform/provider/kind:",
            "deactivations by reason:", "last run of each job:",
        ] {
            let index = try #require(lines.firstIndex(of: section), "\(section)")
            #expect(lines[index + 1] == "  none", "\(section)")
        }
        #expect(report.html.contains("<th>superseded</th><th>in progress</th></tr>"))
        #expect(report.html.contains("<td>0</td><td>2</td></tr>"))
    }

    /// A window with no notification at all: the text's volume table and its "does the reminder work?" section
    /// ended at their headings, where every other section says `none`; the HTML said both "No reminders in this
    /// window." and `none` under that heading.
    @Test func aReportOfAQuietWindowSaysNoneUnderEveryHeading() throws {
        let report = HealthReport(
            from: instant("2026-11-15T00:00:00Z"), to: instant("2026-11-22T00:00:00Z"), figures: HealthFigures())
        let lines = report.text.split(separator: "\n", omittingEmptySubsequences: false).map(String.init)
        let table = try #require(lines.firstIndex { $0.hasPrefix("day         type") })
        #expect(lines.dropFirst(table + 1).first == "  none")
        let effect = try #require(lines.firstIndex { $0.hasPrefix("does the reminder work?") })
        #expect(Array(lines.dropFirst(effect + 1).prefix(2)) == ["  none", ""])
        let readers = try #require(lines.firstIndex { $0.hasPrefix("reminded users whose language") })
        #expect(Array(lines.dropFirst(readers + 1)) == ["  none"])
        let html = report.html
        let section = try #require(
            html.components(separatedBy: "<h2>Does the reminder work?</h2>").last?.components(
                separatedBy: "<h2>Reminded users"
            ).first)
        #expect(section.components(separatedBy: "No reminders in this window.").count == 2)
        #expect(!section.contains("<p>none</p>"))
        #expect(html.components(separatedBy: "<h2>Reminded users").last?.contains("<p>none</p>") == true)
    }

    /// The chart's legend names the table's states in the table's order, each once (it kept its own list, with
    /// `retry` before `deferred`).
    @Test func theChartLegendFollowsTheTableColumns() throws {
        var figures = HealthFigures()
        figures.claims = [("2026-11-21", "diary_reminder", "sent", 5)]
        let html = HealthReport(
            from: instant("2026-11-15T00:00:00Z"), to: instant("2026-11-22T00:00:00Z"), figures: figures
        ).html
        let legend = try #require(html.components(separatedBy: "<div class=\"legend\">").dropFirst().first)
            .components(separatedBy: "</div>")[0]
        let names = legend.components(separatedBy: "</i>").dropFirst().map { $0.components(separatedBy: "<")[0] }
        #expect(names == ["sent", "partial", "failed", "deferred", "retry", "missed", "superseded", "in progress"])
        let header = try #require(html.components(separatedBy: "<th>claimed</th>").dropFirst().first)
            .components(separatedBy: "</tr>")[0]
        #expect(
            header.components(separatedBy: "<th>").dropFirst().map { $0.replacingOccurrences(of: "</th>", with: "") }
                == names)
    }

    /// A run recorded without a duration ended its "last run" line with a space.
    @Test func noLineOfTheTextReportEndsInASpace() throws {
        var figures = HealthFigures()
        figures.lastRuns = [
            ("diary-reminder", instant("2026-11-21T20:00:00Z"), "ok", nil, nil),
            ("token-janitor", instant("2026-11-21T03:00:00Z"), "ok", 1_250, nil),
        ]
        let report = HealthReport(
            from: instant("2026-11-15T00:00:00Z"), to: instant("2026-11-22T00:00:00Z"), figures: figures)
        let lines = report.text.split(separator: "\n").map(String.init)
        #expect(lines.filter { $0.hasSuffix(" ") } == [])
        #expect(lines.contains("  diary-reminder: 2026-11-21T20:00:00Z ok"))
        #expect(lines.contains("  token-janitor: 2026-11-21T03:00:00Z ok 1250 ms"))
    }
}

/// One declaration per janitor setting: keys and flags are distinct and derived from each other, every
/// setting reaches its own field of ``JanitorOptions``, and a value out of range or of the wrong kind is
/// refused with the caller's name for it.
@Suite struct JanitorSettingTests {
    @Test func everySettingHasOneKeyOneFlagAndItsOwnField() throws {
        let all = JanitorSetting.all
        #expect(Set(all.map(\.key)).count == all.count)
        #expect(all.allSatisfy { $0.flag == "--" + $0.key.replacingOccurrences(of: "_", with: "-") })
        #expect(TokenJanitorHandler.detailKeys == Set(all.map(\.key)))
        // Each setting, set alone to a value unlike its default, changes exactly one field.
        let defaults = JanitorOptions(now: 0)
        var changedFields: Set<String> = []
        for setting in all {
            var options = defaults
            switch setting.kind {
            case .number(let path, let range):
                let value = options[keyPath: path] == range.upperBound ? range.lowerBound : range.upperBound
                try options.set(setting, to: .number(value), name: setting.flag)
                #expect(options[keyPath: path] == value)
            case .flag(let path):
                try options.set(setting, to: .flag(!options[keyPath: path]), name: setting.flag)
                #expect(options[keyPath: path] != defaults[keyPath: path])
            }
            let changed = Self.fields(options).filter { Self.fields(defaults)[$0.key] != $0.value }.map(\.key)
            #expect(changed.count == 1, "\(setting.key) changed \(changed)")
            changedFields.formUnion(changed)
        }
        #expect(changedFields.count == all.count, "two settings share a field")
    }

    @Test func aBadValueIsRefusedWithTheCallersNameForIt() {
        var options = JanitorOptions(now: 0)
        let retention = JanitorSetting.all.first { $0.key == "log_retention_days" }!
        #expect(throws: JobError.usage("detail.log_retention_days must be a whole number within 35…3650")) {
            try options.set(retention, to: .number(34), name: "detail.log_retention_days")
        }
        #expect(throws: JobError.usage("--log-retention-days must be a whole number within 35…3650")) {
            try options.set(retention, to: .flag(true), name: retention.flag)
        }
        let purge = JanitorSetting.all.first { $0.key == "purge" }!
        #expect(throws: JobError.usage("--purge must be true or false")) {
            try options.set(purge, to: .number(1), name: purge.flag)
        }
        #expect(throws: JobError.usage("--purge must be true or false")) {
            try options.set(purge, to: .other, name: purge.flag)
        }
        #expect(options.logRetentionDays == 400 && !options.purge, "nothing set by a refused value")
    }

    /// Every stored field of the options, by name (as text), to tell which ones a setting changed.
    static func fields(_ options: JanitorOptions) -> [String: String] {
        var result: [String: String] = [:]
        for child in Mirror(reflecting: options).children {
            if let label = child.label, label != "runID" { result[label] = "\(child.value)" }
        }
        return result
    }
}

import Foundation
import JobKitTestSupport
import PushSimulator
import Testing

@testable import JobKit
@testable import JobKitDelivery
@testable import JobKitSQLite

/// "Nothing lost" for credentials: a refusal is judged against the credential the request carried, and the
/// store being only a cache never costs the provider.
@Suite struct CredentialRefusalTests {
    /// Puts a credential the providers do not know into the cache, fresh by every local rule, as a key
    /// revoked and re-issued (or a cache restored from a backup) would leave it.
    func cacheRefusedCredentials(_ harness: DeliveryHarness) async throws {
        let now = Int64(Date().timeIntervalSince1970)
        let db = harness.db
        for key in [
            "apns:\(SimulatorCredentials.teamID):\(SimulatorCredentials.keyID)",
            "fcm:\(SimulatorCredentials.clientEmail)",
        ] {
            try await db.execute(
                """
                INSERT INTO provider_credentials (credential_key, token, issued_at, expires_at, updated_at)
                VALUES ('\(key)', 'refused-\(key.prefix(4))', \(db.ts(now - 60)), \(db.ts(now + 3000)), \(db.ts(now)))
                """)
        }
    }

    func notifications(_ batch: Int, count: Int, provider: Provider) -> [OutgoingNotification] {
        (0..<count).map { i in
            OutgoingNotification(
                logID: nil,
                device: Device(
                    id: Int64(batch * 1000 + i), userID: "u\(batch)-\(i)",
                    token: provider == .apns ? hexToken("c\(batch)", i) : "fcm-\(batch)-\(i)", provider: provider,
                    platform: provider == .apns ? .ios : .android,
                    apnsEnvironment: provider == .apns ? .production : nil),
                type: .diaryReminder, period: "2026-11-21", locale: "en", messageIndex: 0, title: "t", body: "b",
                expiresAt: Int64(Date().timeIntervalSince1970) + 3600)
        }
    }

    /// Measured case 1 of "Nothing lost": batches in flight with the refused cached credential are answered
    /// after another batch has replaced it; they must resend with the replacement, not stop the provider.
    @Test(arguments: Backend.allCases) func refusalsOfAnAlreadyReplacedCredentialResendWithTheNewOne(_ backend: Backend)
        async throws
    {
        let harness = try await DeliveryHarness.start(backend)
        try await cacheRefusedCredentials(harness)
        let sender = try await harness.sender()
        let batches = (0..<6).map { notifications($0, count: 40, provider: $0 % 2 == 0 ? .apns : .fcm) }
        let outcomes = await withTaskGroup(of: [DeliveryReport].self) { group in
            for batch in batches { group.addTask { await sender.send(batch) } }
            return await group.reduce(into: [String: Int]()) {
                for report in $1 { $0[report.outcome.rawValue, default: 0] += 1 }
            }
        }
        await sender.shutdown()
        #expect(outcomes == ["delivered": 240])
        #expect(harness.simulator.accepted().count == 240)
        // One replacement each, however many batches saw the refusal.
        #expect(harness.simulator.stats.apnsProviderTokens == 1)
        #expect(harness.simulator.stats.oauthExchanges == 1)
        #expect((harness.simulator.stats.errors["InvalidProviderToken"] ?? 0) >= 1)
        #expect((harness.simulator.stats.errors["UNAUTHENTICATED"] ?? 0) >= 1)
        await harness.stop()
    }

    /// The same through a whole run of several pages, two of them in delivery at once.
    @Test(arguments: Backend.allCases) func aRunOfManyPagesDeliversEverythingAfterARefusedCachedCredential(
        _ backend: Backend
    ) async throws {
        let harness = try await DeliveryHarness.start(backend)
        for i in 0..<120 {
            try await harness.addUser(
                "u\(String(format: "%03d", i))",
                devices: [(hexToken("ab", i), .apns, .ios), ("fcm-\(i)", .fcm, .android)])
        }
        try await cacheRefusedCredentials(harness)
        let sender = try await harness.sender()
        var options = ReminderRunOptions(now: instant("2026-11-21T20:00:00Z"))
        options.pageSize = 20
        let summary = try await DiaryReminderRunner(store: harness.db.store, sender: sender, logger: quietLogger).run(
            options)
        await sender.shutdown()
        #expect(summary.sent == 120)
        #expect(summary.outcomes == [.delivered: 240])
        #expect(harness.simulator.stats.apnsProviderTokens == 1)
        #expect(harness.simulator.stats.oauthExchanges == 1)
        await harness.stop()
    }

    /// A replacement that is refused too is final: the provider stops for the run, and nothing is deactivated.
    /// A service-account file that is not one says what it lacks (78), never its contents: before, the message
    /// listed the six fields it needs, whichever was missing or of the wrong kind.
    @Test func aServiceAccountFileThatIsNotOneSaysWhatItLacks() throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent(UUID().uuidString)
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: directory) }
        let file = directory.appendingPathComponent("sa.json")
        let needs =
            "is not a service-account key file (needs type, project_id, private_key_id, private_key, client_email, token_uri)"
        for (json, problem) in [
            (
                #"{"type":"service_account","project_id":"p","private_key":"SECRET","client_email":"e","token_uri":"https://o"}"#,
                "missing private_key_id"
            ),
            (
                #"{"type":"service_account","project_id":7,"private_key_id":"k","private_key":"SECRET","client_email":"e","token_uri":"https://o"}"#,
                "project_id: expected a string"
            ),
        ] {
            try Data(json.utf8).write(to: file)
            #expect(throws: JobError.config("\(file.path) \(needs): \(problem)")) {
                try ServiceAccount.load(path: file.path)
            }
        }
    }

    @Test func aRefusedReplacementStopsTheProvider() async throws {
        // The simulator's clock runs two hours ahead: every APNs provider token looks expired to it.
        let harness = try await DeliveryHarness.start { $0.clock = { Int64(Date().timeIntervalSince1970) + 7200 } }
        let sender = try await harness.sender(harness.delivery(fcm: false))
        let reports = await sender.send(notifications(0, count: 5, provider: .apns))
        await sender.shutdown()
        #expect(reports.map(\.outcome) == Array(repeating: .credentials, count: 5))
        #expect(harness.simulator.stats.errors["ExpiredProviderToken"] == 10)  // the cached one, then its replacement
        await harness.stop()
    }

    /// Measured case 3: a database locked while the new credential is leased and cached costs at most a mint,
    /// never the provider.
    @Test func aLockedDatabaseWhileCachingACredentialDoesNotStopTheProvider() async throws {
        let harness = try await DeliveryHarness.start(.sqlite)
        let lock = try await SQLiteWriteLock(path: harness.db.path)
        let credentials = try SQLiteStore.open(path: harness.db.path, mode: .readWrite, busyTimeout: 0.2)
        let logs = CapturedLogs()
        let sender = try await PushSender(
            configuration: harness.delivery(), credentials: credentials, logger: logs.logger)
        let reports = await sender.send(
            notifications(0, count: 5, provider: .apns) + notifications(1, count: 5, provider: .fcm))
        await sender.shutdown()
        await lock.release()
        #expect(reports.map(\.outcome) == Array(repeating: .delivered, count: 10))
        #expect(logs.lines.contains { $0.contains("cannot lease the credential in the store") })
        #expect(!logs.lines.contains { $0.contains("stopped sending") })
        await credentials.close()
        await harness.stop()
    }

    /// Measured case 4: a refused mint releases its lease, so the next run mints at once instead of waiting
    /// up to 30 s.
    @Test(arguments: Backend.allCases) func aFailedMintReleasesItsLease(_ backend: Backend) async throws {
        let db = try await TemporaryDatabase(backend)
        let failing = SharedCredential(
            key: "fcm:test", store: db.store, clock: { 1_000 }, isFresh: { $1 < $0.expiresAt },
            mint: { _ async throws(JobError) -> CachedCredential in
                throw .config("the OAuth token endpoint refused the service account")
            })
        await #expect(throws: JobError.self) { try await failing.get() }
        #expect(try await db.strings("SELECT coalesce(minting_by, 'none') FROM provider_credentials") == ["none"])
        let clock = ManualRetryClock()
        let next = SharedCredential(
            key: "fcm:test", store: db.store, clock: { 1_001 }, waitClock: clock, isFresh: { $1 < $0.expiresAt },
            mint: { now async throws(JobError) -> CachedCredential in
                CachedCredential(token: "minted", issuedAt: now, expiresAt: now + 3600)
            })
        // Without the release this waits out the other holder's 30 s lease.
        #expect(try await next.get().token == "minted")
        #expect(clock.waits.isEmpty, "\(clock.waits)")
    }

    /// A run that finds another holder minting waits for its credential (looking every 100 ms) and uses it:
    /// one mint for both.
    @Test(arguments: Backend.allCases) func aRunWaitsForAnotherHoldersMintAndUsesIt(_ backend: Backend) async throws {
        let db = try await TemporaryDatabase(backend)
        #expect(
            try await db.store.beginMint(key: "fcm:test", holder: "other", now: 1_000, leaseSeconds: 30) { _ in false }
                == .mint)
        let theirs = CachedCredential(token: "theirs", issuedAt: 1_000, expiresAt: 4_600)
        let clock = ManualRetryClock { waits in
            if waits == 5 { try? await db.store.finishMint(key: "fcm:test", holder: "other", credential: theirs) }
        }
        let waiting = SharedCredential(
            key: "fcm:test", store: db.store, clock: { 1_001 }, waitClock: clock, isFresh: { $1 < $0.expiresAt },
            mint: { _ async throws(JobError) -> CachedCredential in throw .software("minted a second credential") })
        #expect(try await waiting.get() == theirs)
        #expect(clock.waits == Array(repeating: .milliseconds(100), count: 5))
        #expect(await waiting.mints == 0)
    }

    /// A holder whose lease outlasts the 30 s wait (its host's clock runs ahead of this one's, or it hangs)
    /// costs one more mint, never the provider: it threw "timed out waiting for another run to mint" after 30 s
    /// on the wall clock, and the run's devices of that provider were left.
    @Test(arguments: Backend.allCases) func aMintThatOutlastsTheWaitCostsOneMoreMint(_ backend: Backend)
        async throws
    {
        let db = try await TemporaryDatabase(backend)
        _ = try await db.store.beginMint(key: "fcm:test", holder: "other", now: 1_000, leaseSeconds: 30) { _ in false }
        let clock = ManualRetryClock()
        let logs = CapturedLogs()
        let waiting = SharedCredential(
            key: "fcm:test", store: db.store, clock: { 1_001 }, waitClock: clock, isFresh: { $1 < $0.expiresAt },
            logger: logs.logger,
            mint: { now async throws(JobError) -> CachedCredential in
                CachedCredential(token: "minted", issuedAt: now, expiresAt: now + 3600)
            })
        #expect(try await waiting.get().token == "minted")
        #expect(clock.moved >= .seconds(30) && clock.moved < .seconds(30) + .milliseconds(200), "\(clock.moved)")
        #expect(await waiting.mints == 1)
        #expect(logs.lines.contains { $0.contains("taking too long: minting one") })
        // Cached for the next run, which mints none.
        #expect(try await db.store.cachedCredential(key: "fcm:test")?.token == "minted")
    }
}

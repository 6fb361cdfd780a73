import Foundation
import JobKitTestSupport
import PushSimulator
import Testing

@testable import JobKit
@testable import JobKitDelivery

/// The pacing of one provider as a value: every instant is stated.
@Suite struct SendPacingTests {
    let t0 = ContinuousClock.now

    func at(_ milliseconds: Int) -> ContinuousClock.Instant { t0 + .milliseconds(milliseconds) }

    /// Takes greedily for `duration`, asking again at each instant it is told to, and returns what was granted
    /// in each 1-second window.
    func greedy(_ pacing: inout SendPacing, for duration: Duration) -> [Int] {
        var now = t0
        var perSecond = [Int](repeating: 0, count: Int(duration / .seconds(1)) + 1)
        while now - t0 < duration {
            switch pacing.take(1_000_000, at: now) {
            case .send(let count): perSecond[Int((now - t0) / .seconds(1))] += count
            case .wait(let until):
                #expect(until > now)
                now = until
            }
        }
        return perSecond
    }

    @Test func withoutARateEverythingGoesAtOnce() {
        var pacing = SendPacing(rate: nil)
        #expect(pacing.take(5_000, at: at(0)) == .send(5_000))
        #expect(pacing.take(5_000, at: at(0)) == .send(5_000))
    }

    @Test func aRateIsKeptInEveryWindowWithOneBurstAtMost() {
        var pacing = SendPacing(rate: ProviderRate(perSecond: 100, ramp: .zero))
        let windows = greedy(&pacing, for: .seconds(10))
        for sent in windows.dropLast() { #expect((99...105).contains(sent), "\(windows)") }
    }

    @Test func theFirstRequestGoesAtOnceAndABurstIsFiftyMilliseconds() {
        var pacing = SendPacing(rate: ProviderRate(perSecond: 100, ramp: .zero))
        #expect(pacing.take(1_000, at: at(0)) == .send(1))
        #expect(pacing.take(1_000, at: at(0)) == .wait(until: at(10)))
        #expect(pacing.take(1_000, at: at(50)) == .send(5))
        #expect(pacing.take(1_000, at: at(5_000)) == .send(5))  // credit is capped at the burst
        #expect(pacing.take(2, at: at(6_000)) == .send(2))  // never more than asked for
    }

    @Test func theRateRampsFromATenthOverTheRamp() {
        var pacing = SendPacing(rate: ProviderRate(perSecond: 1_000, ramp: .seconds(10)))
        let windows = greedy(&pacing, for: .seconds(12))
        #expect((95...160).contains(windows[0]), "\(windows)")  // ~100/s at first
        #expect((540...620).contains(windows[5]), "\(windows)")  // ~550/s halfway
        #expect((990...1_060).contains(windows[10]), "\(windows)")  // the full rate after the ramp
        #expect(windows[0] < windows[3] && windows[3] < windows[6] && windows[6] < windows[9], "\(windows)")
    }

    @Test func aPauseStopsEverySendUntilItEndsAndThenStartsFromAnEmptyBucket() {
        var pacing = SendPacing(rate: ProviderRate(perSecond: 100, ramp: .zero))
        #expect(pacing.take(10, at: at(0)) == .send(1))
        pacing.pause(until: at(2_000))
        pacing.pause(until: at(1_000))  // a shorter pause read later does not shorten it
        #expect(pacing.take(10, at: at(1_500)) == .wait(until: at(2_000)))
        #expect(pacing.take(10, at: at(2_000)) == .wait(until: at(2_010)))
        #expect(pacing.take(10, at: at(2_050)) == .send(5))
        var unpaced = SendPacing(rate: nil)
        unpaced.pause(until: at(1_000))
        #expect(unpaced.take(10, at: at(999)) == .wait(until: at(1_000)))
        #expect(unpaced.take(10, at: at(1_000)) == .send(10))
    }

    @Test func aNewRunRampsAgain() {
        var pacing = SendPacing(rate: ProviderRate(perSecond: 1_000, ramp: .seconds(10)))
        _ = greedy(&pacing, for: .seconds(11))
        pacing.restart()
        #expect(pacing.take(1_000, at: at(20_000)) == .send(1))
        #expect(pacing.take(1_000, at: at(20_100)) == .send(5))  // 100/s again: a burst of 5
    }

    @Test func shardsDivideTheRate() {
        #expect(ProviderRate.fcmDefault.perSecond == 9_000)
        #expect(ProviderRate.fcmDefault.divided(by: 4).perSecond == 2_250)
        var delivery = DeliveryConfiguration()
        delivery.fcm = FCMConfiguration(serviceAccountFile: "/dev/null")
        let shared = delivery.sharing(Shard(index: 2, count: 3))
        #expect(shared.share(of: shared.fcm?.rate)?.perSecond == 3_000)
        #expect(shared.share(of: nil) == nil)  // unpaced stays unpaced
        #expect(delivery.share(of: delivery.fcm?.rate)?.perSecond == 9_000)
    }
}

/// A slot larger than FCM's quota, against the simulator's quota mode.
@Suite struct ProviderQuotaTests {
    static let slot = "2026-11-21T20:00:00Z"

    func users(_ harness: DeliveryHarness, _ count: Int) async throws {
        for i in 0..<count {
            try await harness.addUser("q\(i)", devices: [("fcm-quota-\(i)", .fcm, .android)])
        }
    }

    /// Paced at half the quota, a slot of 120 FCM sends against a quota of 100 per 2 s goes out with no request
    /// over the quota, every device delivered by the one run. The half is margin for requests that a loaded
    /// machine delays and delivers together (paced at 50/s against 60/s, CI once saw 7 over the quota).
    @Test(arguments: Backend.allCases) func aSlotLargerThanTheQuotaIsSentWithNoRequestOverIt(_ backend: Backend)
        async throws
    {
        let harness = try await DeliveryHarness.start(backend) {
            $0.fcmQuota = SimulatorQuota(messages: 100, window: .seconds(2))
        }
        try await users(harness, 120)
        var delivery = harness.delivery(apns: false)
        delivery.fcm?.rate = ProviderRate(perSecond: 25, ramp: .zero)
        let summary = try await harness.run(at: Self.slot, sender: try await harness.sender(delivery))
        #expect(summary.sent == 120)
        #expect(summary.outcomes == [.delivered: 120])
        let stats = harness.simulator.stats
        #expect(stats.fcmOverQuota == 0)
        #expect(stats.fcmBusiestWindow <= 100)
        #expect(harness.simulator.accepted().count == 120)
        #expect(try await harness.db.count("SELECT count(*) FROM notification_logs WHERE status = 'sent'") == 120)
    }

    /// Paced above the quota (the project's other senders used part of it), one QUOTA_EXCEEDED pauses the
    /// whole provider until its Retry-After: in a window that overflows, the requests over the quota are the
    /// few already on their way when the first refusal is read (at most 15 here), not the rest of the window's sends (at 20/s
    /// against 10 per 2 s, about 30 a window), and every device is delivered by the runs of the slot.
    @Test func oneQuotaExceededPausesTheWholeProvider() async throws {
        let harness = try await DeliveryHarness.start(.sqlite) {
            $0.fcmQuota = SimulatorQuota(messages: 10, window: .seconds(2))
        }
        try await users(harness, 30)
        var delivery = harness.delivery(apns: false)
        delivery.fcm?.rate = ProviderRate(perSecond: 20, ramp: .zero)
        var sent = 0
        for minute in ["00", "15"] where sent < 30 {
            let summary = try await harness.run(
                at: "2026-11-21T20:\(minute):00Z", sender: try await harness.sender(delivery))
            sent += summary.sent
        }
        #expect(sent == 30)
        #expect(harness.simulator.accepted().count == 30)
        let stats = harness.simulator.stats
        #expect(stats.fcmWindowsOverQuota >= 1)
        // At most the sends of 750 ms (15 at 20/s) between the first refusal and the pause: room for a loaded
        // machine that reads the answer late (CI saw 10), and half of what an unpaused provider gets (29).
        #expect(stats.fcmOverQuota <= 15 * stats.fcmWindowsOverQuota, "\(stats)")
    }
}

@Suite struct ProviderRateSettingsTests {
    func resolve(_ environment: [String: String], _ flags: DeliveryFlags = DeliveryFlags()) throws(JobError)
        -> DeliveryConfiguration
    {
        var base = ["PUSH_FCM_SERVICE_ACCOUNT_FILE": "/sa.json"]
        base.merge(environment) { $1 }
        return try DeliveryConfiguration.resolve(ConfigResolver(environment: base), flags: flags)
    }

    @Test func fcmIsPacedAtItsQuotaByDefaultAndAPNsIsNot() throws {
        let apns = [
            "PUSH_APNS_KEY_FILE": "/k.p8", "PUSH_APNS_KEY_ID": "ABC1234567", "PUSH_APNS_TEAM_ID": "TEAM123456",
            "PUSH_APNS_TOPIC": "com.example",
        ]
        let delivery = try resolve(apns)
        #expect(delivery.fcm?.rate == .fcmDefault)
        #expect(delivery.apns?.rate == nil)
        let set = try resolve(apns.merging(["PUSH_FCM_RATE": "0", "PUSH_APNS_RATE": "500"]) { $1 })
        #expect(set.fcm?.rate == nil)
        #expect(set.apns?.rate == ProviderRate(perSecond: 500))
        var flags = DeliveryFlags()
        flags.fcmRate = 1_200
        #expect(try resolve(["PUSH_FCM_RATE": "0"], flags).fcm?.rate == ProviderRate(perSecond: 1_200))
    }

    @Test func theWarningChannelIsReadFromItsFlagOrTheEnvironment() throws {
        #expect(try resolve([:]).fcm?.androidWarningChannelID == nil)
        let fromEnvironment = try resolve([
            "PUSH_FCM_ANDROID_CHANNEL_ID": "reminders", "PUSH_FCM_ANDROID_WARNING_CHANNEL_ID": "quota",
        ])
        #expect(fromEnvironment.fcm?.androidChannelID(for: .diaryReminder) == "reminders")
        #expect(fromEnvironment.fcm?.androidChannelID(for: .contentLimit90) == "quota")
        var flags = DeliveryFlags()
        flags.fcmAndroidWarningChannelID = "from-flag"
        #expect(
            try resolve(["PUSH_FCM_ANDROID_WARNING_CHANNEL_ID": "quota"], flags).fcm?.androidWarningChannelID
                == "from-flag")
        // An empty variable is unset, as for every setting; an empty flag is a usage error.
        #expect(try resolve(["PUSH_FCM_ANDROID_WARNING_CHANNEL_ID": ""]).fcm?.androidWarningChannelID == nil)
        flags.fcmAndroidWarningChannelID = ""
        #expect(throws: JobError.usage("--fcm-android-warning-channel-id: empty")) { try resolve([:], flags) }
    }

    @Test func theIOSBadgeIsReadFromItsFlagOrTheEnvironment() throws {
        #expect(try resolve([:]).badge == .number(1))
        #expect(try resolve(["PUSH_IOS_BADGE": "none"]).badge == .unchanged)
        #expect(try resolve(["PUSH_IOS_BADGE": "0"]).badge == .number(0))
        #expect(try resolve(["PUSH_IOS_BADGE": "99999"]).badge == .number(99_999))
        var flags = DeliveryFlags()
        flags.iosBadge = "3"
        #expect(try resolve(["PUSH_IOS_BADGE": "none"], flags).badge == .number(3))
        for bad in ["-1", "+1", "1.5", "100000", "None", " 1", "one", "٣"] {
            #expect(throws: JobError.config("PUSH_IOS_BADGE: not a badge number from 0 to 99999 or none: \(bad)")) {
                try resolve(["PUSH_IOS_BADGE": bad])
            }
        }
        flags.iosBadge = "many"
        #expect(throws: JobError.usage("--ios-badge: not a badge number from 0 to 99999 or none: many")) {
            try resolve([:], flags)
        }
    }

    @Test func aBadRateIsAConfigurationOrUsageError() {
        #expect(throws: JobError.self) { try resolve(["PUSH_FCM_RATE": "fast"]) }
        #expect(throws: JobError.self) { try resolve(["PUSH_FCM_RATE": "-1"]) }
        var flags = DeliveryFlags()
        flags.fcmRate = -5
        do {
            _ = try resolve([:], flags)
            Issue.record("a negative --fcm-rate was accepted")
        } catch {
            #expect(error.exitCode == 64, "\(error)")
        }
        do {
            _ = try resolve(["PUSH_FCM_RATE": "fast"])
        } catch {
            #expect(error.exitCode == 78, "\(error)")
        }
    }
}

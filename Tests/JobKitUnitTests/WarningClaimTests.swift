import JobKitTestSupport
import Testing

@testable import JobKit

/// The quota-warning claim's steps (``WarningClaim``), which both stores run: what follows each answer. The
/// stores' own tests (ContentLimitTests, on both) check that each step's SQL does what it names.
@Suite struct WarningClaimTests {
    static let warning90 = QuotaWarning(
        userID: "u1", type: .contentLimit90, period: "2026-11", messageIndex: 1, locale: "en",
        params: [LimitParams.planKey: "free"])
    static let warning100 = QuotaWarning(
        userID: "u1", type: .contentLimit100, period: "2026-11", messageIndex: 0, locale: "en",
        params: [LimitParams.planKey: "free"])

    /// Runs the steps with `answers` given in order, and returns the steps taken and the result.
    static func run(_ claim: WarningClaim, _ answers: [WarningClaim.Answer]) -> ([WarningClaim.Step], LimitClaim??) {
        var steps = [claim.first]
        for answer in answers {
            switch claim.next(after: steps.last!, answer) {
            case .step(let next): steps.append(next)
            case .claimed(let result): return (steps, .some(result))
            }
        }
        return (steps, nil)
    }

    @Test func theHundredPercentWarningSupersedesTheNinetyFirst() {
        let (steps, result) = Self.run(WarningClaim(Self.warning100, deliverAfter: nil), [.done, .inserted(7)])
        #expect(steps == [.supersede(.contentLimit90), .insert(status: .claimed)])
        #expect(result == .some(LimitClaim(PendingWarning(logID: 7, warning: Self.warning100), deferred: false)))
    }

    @Test func theNinetyPercentWarningIsNotClaimedOnceTheHundredExists() {
        let (steps, result) = Self.run(WarningClaim(Self.warning90, deliverAfter: nil), [.exists(true)])
        #expect(steps == [.exists(.contentLimit100)])
        #expect(result == .some(nil))
        let (free, claimed) = Self.run(WarningClaim(Self.warning90, deliverAfter: nil), [.exists(false), .inserted(3)])
        #expect(free == [.exists(.contentLimit100), .insert(status: .claimed)])
        #expect(claimed == .some(LimitClaim(PendingWarning(logID: 3, warning: Self.warning90), deferred: false)))
    }

    @Test func aWarningInQuietHoursIsStoredDeferredAndLeavesAnExistingRowAlone() {
        let deferred = WarningClaim(Self.warning90, deliverAfter: 1_000)
        let (steps, result) = Self.run(deferred, [.exists(false), .inserted(5)])
        #expect(steps.last == .insert(status: .deferred))
        #expect(result == .some(LimitClaim(PendingWarning(logID: 5, warning: Self.warning90), deferred: true)))
        let (_, existing) = Self.run(deferred, [.exists(false), .inserted(nil)])
        #expect(existing == .some(nil))
    }

    @Test func anExistingRowIsTakenOverWithWhatItStored() {
        let claim = WarningClaim(Self.warning90, deliverAfter: nil)
        let stored = LimitParams.encode([LimitParams.planKey: "free", "limit": "30"])
        let (steps, result) = Self.run(
            claim,
            [.exists(false), .inserted(nil), .tookOver(.init(id: 9, messageIndex: 2, locale: "ja", params: stored))])
        #expect(steps == [.exists(.contentLimit100), .insert(status: .claimed), .takeOver])
        let resumed = Self.warning90.resumed(messageIndex: 2, locale: "ja", params: stored)
        #expect(resumed.locale == "ja" && resumed.messageIndex == 2)
        #expect(result == .some(LimitClaim(PendingWarning(logID: 9, warning: resumed), deferred: false)))
        // A row another run holds (lease running) or that is final: nothing claimed.
        let (_, held) = Self.run(claim, [.exists(false), .inserted(nil), .tookOver(nil)])
        #expect(held == .some(nil))
    }
}

/// The reminder claim's answers turned into claims (``ReminderClaim``), which both stores share.
@Suite struct ReminderClaimTests {
    static func request(_ user: String, index: Int = 0) -> ClaimRequest {
        ClaimRequest(userID: user, type: .diaryReminder, period: "2026-11-28", messageIndex: index, locale: "en")
    }

    @Test func claimsComeInRequestOrderOncePerRowWithTheRecordedWords() {
        let requests = [Self.request("b", index: 1), Self.request("a"), Self.request("b", index: 2), Self.request("c")]
        let key = { (user: String) in ReminderClaim.Key(Self.request(user)) }
        let inserted: [ReminderClaim.Key: Int64] = [key("b"): 10]
        #expect(ReminderClaim.remaining(requests, inserted: inserted).map(\.userID) == ["a", "c"])
        let takenOver = [key("a"): ReminderClaim.TakenOver(id: 4, messageIndex: 3, locale: nil, delivered: [7])]
        let claims = ReminderClaim.claims(requests, inserted: inserted, takenOver: takenOver)
        // b once (its first request's words), a taken over with its recorded index and the request's locale; c lost.
        #expect(claims.map(\.userID) == ["b", "a"])
        #expect(claims[0].logID == 10 && claims[0].messageIndex == 1 && !claims[0].takenOver)
        #expect(claims[1].logID == 4 && claims[1].messageIndex == 3 && claims[1].locale == "en")
        #expect(claims[1].takenOver && claims[1].deliveredDeviceIDs == [7])
    }

    @Test func onlyAnInsertedLastReminderStartsItsPause() {
        let pause = PauseRecord(period: "2026-11-28", pausedAt: 1_000, ignored: 3)
        var last = Self.request("a")
        last.pause = pause
        var lastTakenOver = Self.request("b")
        lastTakenOver.pause = pause
        let requests = [last, lastTakenOver, Self.request("c")]
        let key = { (user: String) in ReminderClaim.Key(Self.request(user)) }
        let started = ReminderClaim.pausesStarted(requests, inserted: [key("a"): 1, key("c"): 2])
        #expect(started.map(\.userID) == ["a"])
        #expect(started.first?.pause == pause)
    }
}

/// What the hook does with a write past a threshold (``ContentLimitRule/verdict``): decided without I/O.
@Suite struct QuotaWarningVerdictTests {
    static let now = instant("2026-11-28T12:00:00Z")

    static func user(
        warnings: Bool = true, device: Bool = true, quiet: (String, String)? = nil, zone: String = "Asia/Tokyo",
        logs: [LimitLogKey: LogState] = [:]
    ) -> LimitSnapshot {
        LimitSnapshot(
            userID: "u1", timezone: zone, locale: "en", plan: "free", warningsEnabled: warnings,
            quietHoursStart: quiet?.0, quietHoursEnd: quiet?.1, hasActiveDevice: device, logs: logs)
    }

    static func verdict(_ type: NotificationType, _ user: LimitSnapshot) -> ContentLimitRule.Verdict {
        ContentLimitRule.verdict(
            type, user: user, period: .monthly, now: now, staleBefore: now - 600, explain: true)
    }

    @Test func eachReasonNotToWarnIsNamedAndTheRestWarnsInTheUsersPeriod() {
        #expect(Self.verdict(.contentLimit90, Self.user(warnings: false)).outcome == .nothing("warnings turned off"))
        #expect(Self.verdict(.contentLimit90, Self.user(device: false)).outcome == .nothing("no active device"))
        let hundred = LimitLogKey(type: .contentLimit100, period: "2026-11")
        let sent = LogState(id: 1, status: .sent, claimedAt: Self.now - 60, messageIndex: 0, locale: "en", runID: "r")
        #expect(
            Self.verdict(.contentLimit90, Self.user(logs: [hundred: sent])).outcome
                == .nothing("the 100 % warning already exists this period"))
        #expect(
            Self.verdict(.contentLimit100, Self.user(logs: [hundred: sent])).outcome
                == .nothing("already warned this period (sent)"))
        let warned = Self.verdict(.contentLimit90, Self.user())
        #expect(warned.outcome == .warn(period: "2026-11", deliverAfter: nil))
        #expect(warned.steps.first == "period: monthly in Asia/Tokyo → 2026-11")
    }

    @Test func quietHoursHoldTheWarningAndAnUnknownZoneOrMalformedHoursAreFlagged() {
        // 12:00 UTC is 21:00 in Tokyo: inside 20:00–08:00, so held until 08:00 Tokyo (23:00 UTC).
        let held = Self.verdict(.contentLimit90, Self.user(quiet: ("20:00", "08:00")))
        #expect(held.outcome == .warn(period: "2026-11", deliverAfter: instant("2026-11-28T23:00:00Z")))
        let odd = Self.verdict(.contentLimit90, Self.user(quiet: ("8pm", "08:00"), zone: "Mars/Base"))
        #expect(odd.unknownZone && odd.malformedQuietHours)
        #expect(odd.outcome == .warn(period: "2026-11", deliverAfter: nil))
    }
}

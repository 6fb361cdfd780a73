import Foundation
import JobKitTestSupport
import Testing

@testable import JobKit

@Suite struct CalendarArithmeticTests {
    @Test func civilDatesRoundTripAcrossCenturiesAndLeapDays() {
        for days in stride(from: -800_000, through: 800_000, by: 997) {
            #expect(LocalDate(daysSinceEpoch: days).daysSinceEpoch == days)
        }
        #expect(LocalDate(daysSinceEpoch: 0).description == "1970-01-01")
        #expect(date("2024-02-28").adding(days: 1).description == "2024-02-29")
        #expect(date("2100-02-28").adding(days: 1).description == "2100-03-01")
        #expect(date("2026-12-31").adding(days: 1).description == "2027-01-01")
        #expect(LocalDate("2026-02-29") == nil)
        #expect(LocalDate("2026-1-01") == nil)
    }

    @Test(arguments: ["00:00", "09:05", "23:59"])
    func wellFormedTimes(_ text: String) {
        #expect(LocalTime(text)?.description == text)
    }

    @Test(arguments: ["24:00", "9:05", "09:60", "21:00:00", "9pm", "", "ab:cd", "-1:00"])
    func malformedTimes(_ text: String) {
        #expect(LocalTime(text) == nil)
    }

    @Test func unknownZonesAreRejected() {
        #expect(ZoneClock(identifier: "Mars/Olympus_Mons") == nil)
        #expect(ZoneClock(identifier: "") == nil)
        #expect(ZoneClock(identifier: "Asia/Kathmandu") != nil)
    }

    @Test func springForwardGapMapsToTheFirstInstantAfterTheGap() {
        let newYork = zone("America/New_York")
        // 2026-03-08: 02:00 EST jumps to 03:00 EDT at 07:00Z; 02:30 does not exist.
        #expect(newYork.instant(on: date("2026-03-08"), minuteOfDay: 150) == instant("2026-03-08T07:00:00Z"))
        #expect(newYork.instant(on: date("2026-03-08"), minuteOfDay: 119) == instant("2026-03-08T06:59:00Z"))
        #expect(newYork.instant(on: date("2026-03-08"), minuteOfDay: 180) == instant("2026-03-08T07:00:00Z"))
    }

    @Test func fallBackOverlapMapsToTheFirstOccurrence() {
        let newYork = zone("America/New_York")
        // 2026-11-01: 01:30 happens at 05:30Z (EDT) and again at 06:30Z (EST).
        #expect(newYork.instant(on: date("2026-11-01"), minuteOfDay: 90) == instant("2026-11-01T05:30:00Z"))
        #expect(newYork.instant(on: date("2026-11-01"), minuteOfDay: 150) == instant("2026-11-01T07:30:00Z"))
    }

    @Test func dayBoundsFollowTheZoneIncludingShortAndLongDays() {
        let newYork = zone("America/New_York")
        let short = newYork.dayBounds(date("2026-03-08"))
        #expect(short.upperBound - short.lowerBound == 23 * 3600)
        let long = newYork.dayBounds(date("2026-11-01"))
        #expect(long.upperBound - long.lowerBound == 25 * 3600)
        #expect(zone("Pacific/Kiritimati").startOfDay(date("2026-11-21")) == instant("2026-11-20T10:00:00Z"))
    }
}

@Suite struct DueRuleTests {
    let rule = DueRule.default

    /// Every 15 minutes from `start` for `hours`, the instants at which the reminder is due.
    func dueRuns(_ reminder: String, in clock: ZoneClock, from start: String, hours: Int) -> [(Int64, LocalDate)] {
        let first = instant(start)
        return stride(from: first, to: first + Int64(hours) * 3600, by: 900).compactMap { now in
            let timing = rule.timing(now: now, reminder: time(reminder), in: clock)
            return timing.state == .due ? (now, timing.period) : nil
        }
    }

    @Test(arguments: [
        ("Asia/Kathmandu", "2026-11-21T14:15:00Z"),  // +05:45
        ("Pacific/Chatham", "2026-11-21T06:15:00Z"),  // +13:45 (daylight time in November)
        ("Pacific/Marquesas", "2026-11-22T05:30:00Z"),  // −09:30
        ("Pacific/Kiritimati", "2026-11-21T06:00:00Z"),  // +14
        ("America/St_Johns", "2026-11-21T23:30:00Z"),  // −03:30
        ("Asia/Tokyo", "2026-11-21T11:00:00Z"),
    ])
    func everyKindOfOffsetIsRemindedAtItsLocalTime(zoneName: String, expected: String) {
        let clock = zone(zoneName)
        // With the default 60-minute catch-up a quarter-hourly schedule sees the user due in the runs
        // at the reminder time and the three after it; the claim makes the first one send.
        let due = dueRuns("20:00", in: clock, from: "2026-11-20T00:00:00Z", hours: 72)
            .filter { $0.1 == date("2026-11-21") }
        #expect(due.first?.0 == instant(expected))
        #expect(due.count == 4)
    }

    @Test func springForwardReminderInTheGapIsDueAtThreeLocal() {
        let due = dueRuns("02:30", in: zone("America/New_York"), from: "2026-03-08T00:00:00Z", hours: 24)
        #expect(due.first?.0 == instant("2026-03-08T07:00:00Z"))  // 03:00 EDT
        #expect(Set(due.map(\.1)) == [date("2026-03-08")])
    }

    @Test func fallBackReminderIsDueOnlyFromTheFirstOccurrence() {
        let due = dueRuns("01:30", in: zone("America/New_York"), from: "2026-11-01T00:00:00Z", hours: 24)
        #expect(due.first?.0 == instant("2026-11-01T05:30:00Z"))  // 01:30 EDT
        // The second 01:30 (06:30Z, EST) is exactly one catch-up window later: already closed.
        #expect(due.allSatisfy { $0.0 < instant("2026-11-01T06:30:00Z") })
    }

    @Test func cronJitterEitherSideOfTheSlot() {
        let utc = zone("UTC")
        #expect(rule.timing(now: instant("2026-11-21T19:59:58Z"), reminder: time("20:00"), in: utc).state == .due)
        #expect(rule.timing(now: instant("2026-11-21T20:00:07Z"), reminder: time("20:00"), in: utc).state == .due)
        #expect(rule.timing(now: instant("2026-11-21T19:57:59Z"), reminder: time("20:00"), in: utc).state == .notYet)
        #expect(rule.timing(now: instant("2026-11-21T21:00:00Z"), reminder: time("20:00"), in: utc).state == .passed)
    }

    @Test func lateRunAfterMidnightBelongsToThePreviousDay() {
        let timing = rule.timing(now: instant("2026-11-22T00:20:00Z"), reminder: time("23:50"), in: zone("UTC"))
        #expect(timing.state == .due)
        #expect(timing.period == date("2026-11-21"))
    }

    @Test func earlyRunBeforeMidnightBelongsToTheNextDay() {
        let timing = rule.timing(now: instant("2026-11-21T23:59:58Z"), reminder: time("00:00"), in: zone("UTC"))
        #expect(timing.state == .due)
        #expect(timing.period == date("2026-11-22"))
    }

    @Test func rangesAreValidated() {
        #expect(throws: JobError.self) { try DueRule(earlyMinutes: 15, catchUpMinutes: 60) }
        #expect(throws: JobError.self) { try DueRule(earlyMinutes: 2, catchUpMinutes: 0) }
        #expect(throws: JobError.self) { try DueRule(earlyMinutes: -1, catchUpMinutes: 60) }
    }

    /// The store selects by `dueSlots`; the explain path and the tests use `timing`. They must agree for
    /// every zone, minute and instant, including around transitions.
    @Test(arguments: [
        "America/New_York", "Europe/London", "Australia/Lord_Howe", "Pacific/Chatham",
        "Asia/Kathmandu", "America/Santiago", "Antarctica/Troll", "Pacific/Kiritimati", "UTC",
    ])
    func dueSlotsAgreeWithTimingEverywhere(zoneName: String) throws {
        let clock = zone(zoneName)
        var random = SplitMix64(seed: StableHash.fnv1a(zoneName))
        let rules = [
            DueRule.default, try DueRule(earlyMinutes: 0, catchUpMinutes: 1),
            try DueRule(earlyMinutes: 14, catchUpMinutes: 720),
        ]
        // Random instants in 2026, plus instants around each transition of the zone.
        var instants = (0..<60).map { _ in instant("2026-01-01T00:00:00Z") + Int64(random.next() % (365 * 86_400)) }
        var cursor = instant("2026-01-01T00:00:00Z")
        while let next = clock.zone.nextDaylightSavingTimeTransition(
            after: .init(timeIntervalSince1970: Double(cursor))),
            next.timeIntervalSince1970 < Double(instant("2027-01-01T00:00:00Z"))
        {
            let at = Int64(next.timeIntervalSince1970)
            instants += stride(from: at - 3 * 3600, through: at + 3 * 3600, by: 1800).map { $0 }
            cursor = at + 1
        }
        for rule in rules {
            for now in instants {
                var fromSlots: Set<String> = []
                for slot in rule.dueSlots(now: now, in: clock) {
                    for range in slot.minuteRanges {
                        for minute in range { fromSlots.insert("\(slot.period) \(minute)") }
                    }
                }
                var fromTiming: Set<String> = []
                for minute in 0..<1440 {
                    let timing = rule.timing(now: now, reminder: LocalTime(minuteOfDay: minute)!, in: clock)
                    if timing.state == .due { fromTiming.insert("\(timing.period) \(minute)") }
                }
                #expect(
                    fromSlots == fromTiming,
                    "\(zoneName) at \(Timestamps.format(now)) early \(rule.early) catch-up \(rule.catchUp)")
            }
        }
    }
}

@Suite struct ReminderDecisionTests {
    let log = { (status: ClaimStatus, at: Int64) in
        LogState(id: 1, status: status, claimedAt: at, messageIndex: 0, locale: "en", runID: "r")
    }

    @Test func rulesApplyInOrder() {
        #expect(
            ReminderDecision.decide(hasActiveDevice: false, wroteToday: true, log: nil, staleBefore: 0)
                == .skip(.noActiveDevice))
        #expect(
            ReminderDecision.decide(hasActiveDevice: true, wroteToday: true, log: nil, staleBefore: 0)
                == .skip(.wroteToday))
        #expect(ReminderDecision.decide(hasActiveDevice: true, wroteToday: false, log: nil, staleBefore: 0) == .claim)
        #expect(
            ReminderDecision.decide(hasActiveDevice: true, wroteToday: false, log: log(.sent, 10), staleBefore: 100)
                == .skip(.alreadyReminded))
        #expect(
            ReminderDecision.decide(hasActiveDevice: true, wroteToday: false, log: log(.failed, 10), staleBefore: 100)
                == .skip(.alreadyReminded))
    }

    @Test func freshClaimsAreLeftAloneAndStaleOnesTakenOver() {
        #expect(
            ReminderDecision.decide(hasActiveDevice: true, wroteToday: false, log: log(.claimed, 200), staleBefore: 100)
                == .skip(.claimInProgress))
        #expect(
            ReminderDecision.decide(hasActiveDevice: true, wroteToday: false, log: log(.claimed, 100), staleBefore: 100)
                == .takeOver(log(.claimed, 100)))
        #expect(
            ReminderDecision.decide(hasActiveDevice: true, wroteToday: false, log: log(.retry, 200), staleBefore: 100)
                == .takeOver(log(.retry, 200)))
    }

    /// A state written by a newer version is neither "already reminded" nor something to take over: it is
    /// named, and nothing is sent.
    @Test func aClaimStateThisVersionDoesNotKnowIsNamedAndNothingIsSent() {
        let future = ClaimStatus(rawValue: "queued_v2")
        #expect(!future.isKnown && ClaimStatus.all.allSatisfy(\.isKnown))
        for claimedAt: Int64 in [0, 100, 200] {
            #expect(
                ReminderDecision.decide(
                    hasActiveDevice: true, wroteToday: false, log: log(future, claimedAt), staleBefore: 100)
                    == .skip(.unknownClaimState))
        }
        #expect(!DeliveryLifecycle.canTakeOver(log(future, 0), staleBefore: 100))
    }

    @Test func resolutionFromOutcomes() {
        #expect(DeliveryLifecycle.resolution(previouslyDelivered: 0, outcomes: [.delivered, .delivered]) == .sent)
        #expect(DeliveryLifecycle.resolution(previouslyDelivered: 0, outcomes: [.delivered, .tokenDead]) == .partial)
        #expect(DeliveryLifecycle.resolution(previouslyDelivered: 0, outcomes: [.delivered, .retryLater]) == .retry)
        #expect(DeliveryLifecycle.resolution(previouslyDelivered: 0, outcomes: [.tokenDead, .retryLater]) == .retry)
        #expect(DeliveryLifecycle.resolution(previouslyDelivered: 0, outcomes: [.tokenDead, .rejected]) == .failed)
        #expect(DeliveryLifecycle.resolution(previouslyDelivered: 0, outcomes: [.credentials]) == .retry)
        #expect(DeliveryLifecycle.resolution(previouslyDelivered: 1, outcomes: [.delivered]) == .sent)
        #expect(DeliveryLifecycle.resolution(previouslyDelivered: 1, outcomes: [.retryLater]) == .retry)
        #expect(DeliveryLifecycle.resolution(previouslyDelivered: 0, outcomes: []) == .failed)
    }
}

@Suite struct TimestampTests {
    @Test(arguments: [
        ("2026-11-21T20:00:00Z", "2026-11-21T20:00:00Z"),
        ("2026-11-21T21:00:00+01:00", "2026-11-21T20:00:00Z"),
        ("2026-11-21T14:15:00-05:45", "2026-11-21T20:00:00Z"),
        ("2026-11-21T20:00:00.987Z", "2026-11-21T20:00:00Z"),
        ("2026-11-21 20:00:00z", "2026-11-21T20:00:00Z"),
        ("2024-02-29T00:00:00Z", "2024-02-29T00:00:00Z"),
        ("1969-12-31T23:59:59Z", "1969-12-31T23:59:59Z"),
    ])
    func rfc3339InstantsParse(text: String, expected: String) {
        #expect(Timestamps.parse(text).map(Timestamps.format) == expected)
    }

    @Test(arguments: [
        "2026-11-21T20:00:00", "2026-11-21", "2026-02-30T00:00:00Z", "2026-11-21T24:00:00Z",
        "2026-11-21T20:00:00+0100", "2026-11-21T20:00:00.Z", "tomorrow", "", "2026-11-21T20:00:00Zjunk",
    ])
    func anythingElseIsRejected(text: String) {
        #expect(Timestamps.parse(text) == nil)
    }

    @Test func itAgreesWithFoundation() {
        let formatter = ISO8601DateFormatter()
        var random = SplitMix64(seed: 9)
        for _ in 0..<500 {
            let instant = Int64(random.next() % 4_000_000_000)
            let text = formatter.string(from: Date(timeIntervalSince1970: TimeInterval(instant)))
            #expect(Timestamps.parse(text) == instant, "\(text)")
        }
    }
}

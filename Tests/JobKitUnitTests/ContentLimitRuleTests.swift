import Foundation
import JobKitTestSupport
import NIOConcurrencyHelpers
import Testing

@testable import JobKit
@testable import JobKitDelivery

@Suite struct ContentLimitRuleTests {
    @Test func thresholdsUseExactIntegerArithmetic() {
        #expect(ContentLimitRule.threshold(used: 26, limit: 30) == nil)
        #expect(ContentLimitRule.threshold(used: 27, limit: 30) == .contentLimit90)
        #expect(ContentLimitRule.threshold(used: 29, limit: 30) == .contentLimit90)
        #expect(ContentLimitRule.threshold(used: 30, limit: 30) == .contentLimit100)
        #expect(ContentLimitRule.threshold(used: 31, limit: 30) == .contentLimit100)
        #expect(ContentLimitRule.threshold(used: 8, limit: 9) == nil)  // 88.9 %
        #expect(ContentLimitRule.threshold(used: 9, limit: 10) == .contentLimit90)
        #expect(ContentLimitRule.threshold(used: 5, limit: 0) == nil)
        #expect(ContentLimitRule.threshold(used: 5, limit: nil) == nil)
        #expect(ContentLimitRule.threshold(used: 5, limit: -3) == nil)
    }

    /// Issue 21, item 1: `limit × 9` and `used × 10` overflowed (SIGILL) for large counts, and a backend that
    /// sends Int64.max for "unlimited" crashed the hook on every write. Exact for every Int now.
    @Test func thresholdsAreExactForEveryInteger() {
        let max = Int.max
        #expect(QuotaLevel(used: 1, limit: max) == .below)
        #expect(QuotaLevel(used: max / 10 * 9, limit: max) == .below)  // just under 90 %
        #expect(QuotaLevel(used: max - max / 10, limit: max) == .ninetyPercent)  // 90 % and a bit
        #expect(QuotaLevel(used: max - 1, limit: max) == .ninetyPercent)
        #expect(QuotaLevel(used: max, limit: max) == .full)
        #expect(QuotaLevel(used: max, limit: 30) == .full)
        // 9 × 1,024,819,115,206,086,201 = 9,223,372,036,854,775,809 = Int.max + 2: one past what Int holds.
        #expect(QuotaLevel(used: 922_337_203_685_477_581, limit: 1_024_819_115_206_086_201) == .ninetyPercent)
        #expect(QuotaLevel(used: 922_337_203_685_477_580, limit: 1_024_819_115_206_086_201) == .below)
        #expect(QuotaLevel.percent(used: max - 1, limit: max) == 99)
        #expect(QuotaLevel.percent(used: max, limit: 30) == 100)
        #expect(QuotaLevel.percent(used: 27, limit: 30) == 90)
        #expect(QuotaLevel.percent(used: 0, limit: max) == 0)
        #expect(ContentLimitRule.parameters(used: max - 1, limit: max)["percent"] == "99")
    }

    /// What a takeover sends, row by row: the stored words when they were counted against this call's plan (or
    /// neither names one), this call's own otherwise, and this call's where the row stored none.
    @Test func aTakeoverKeepsTheStoredWordsOnlyForTheSamePlan() {
        let current = QuotaWarning(
            userID: "u", type: .contentLimit90, period: "2026-11", messageIndex: 0, locale: "en",
            params: ["used": "95", "limit": "100", "plan": "plus"])
        let stored = #"{"limit":"30","plan":"free","used":"27"}"#
        let cases: [(index: Int?, locale: String?, params: String?, current: QuotaWarning, expected: QuotaWarning)] = [
            (
                2, "de", #"{"limit":"100","plan":"plus","used":"91"}"#, current,
                QuotaWarning(
                    userID: "u", type: .contentLimit90, period: "2026-11", messageIndex: 2, locale: "de",
                    params: ["used": "91", "limit": "100", "plan": "plus"])
            ),
            (2, "de", stored, current, current),
            (nil, nil, nil, current, current),
            (
                nil, "fr", #"{"limit":"30","used":"27"}"#,
                QuotaWarning(
                    userID: "u", type: .contentLimit90, period: "2026-11", messageIndex: 1, locale: "en",
                    params: ["used": "28", "limit": "30"]),
                QuotaWarning(
                    userID: "u", type: .contentLimit90, period: "2026-11", messageIndex: 1, locale: "fr",
                    params: ["used": "27", "limit": "30"])
            ),
        ]
        for row in cases {
            #expect(
                row.current.resumed(messageIndex: row.index, locale: row.locale, params: row.params) == row.expected)
        }
    }

    @Test func quietHoursSpanningMidnightEndTheNextMorning() {
        let tokyo = zone("Asia/Tokyo")
        let end = ContentLimitRule.quietHoursEnd(
            now: instant("2026-11-21T14:30:00Z"), zone: tokyo,  // 23:30 JST
            start: time("22:00"), end: time("07:00"))
        #expect(end == instant("2026-11-21T22:00:00Z"))  // 07:00 JST on the 22nd
        #expect(
            ContentLimitRule.quietHoursEnd(
                now: instant("2026-11-21T20:00:00Z"), zone: tokyo,  // 05:00 JST
                start: time("22:00"), end: time("07:00")) == instant("2026-11-21T22:00:00Z"))
        #expect(
            ContentLimitRule.quietHoursEnd(
                now: instant("2026-11-21T03:00:00Z"), zone: tokyo,  // 12:00 JST
                start: time("22:00"), end: time("07:00")) == nil)
        #expect(
            ContentLimitRule.quietHoursEnd(
                now: instant("2026-11-21T03:00:00Z"), zone: tokyo,
                start: time("11:00"), end: time("13:00")) == instant("2026-11-21T04:00:00Z"))
        #expect(ContentLimitRule.quietHoursEnd(now: 0, zone: tokyo, start: time("09:00"), end: time("09:00")) == nil)
    }

    @Test func eventsAreParsedStrictly() throws {
        let event = try ContentLimitEvent.parse(json: Data(#"{"user_id":"u1","used":27,"limit":30}"#.utf8))
        #expect(event == (try ContentLimitEvent(userID: "u1", used: 27, limit: 30, period: .monthly)))
        #expect(
            try ContentLimitEvent.parse(json: Data(#"{"user_id":"u1","used":3,"period":"annual"}"#.utf8)).period
                == .annual)
        for bad in [
            #"{"user_id":"u1","used":-1,"limit":30}"#, #"{"user_id":"u1","limit":30}"#, #"{"user_id":7,"used":1}"#,
            #"{"user_id":"u1","used":1,"period":"weekly"}"#, "not json", #"{"user_id":"","used":1}"#,
        ] {
            #expect(throws: JobError.self, "\(bad)") { try ContentLimitEvent.parse(json: Data(bad.utf8)) }
        }
        // Issue 21, item 7: malformed numbers and invalid UTF-8 are bad input wherever they are, a field the hook
        // ignores included.
        let base = #"{"user_id":"u1","used":1,"limit":30,"note":"#
        var malformed = ["27.0.5", "-", "01", "1.", ".5", "1e", "+1", "[01]", "0x1F", "NaN", "Infinity"].map {
            Data((base + $0 + "}").utf8)
        }
        malformed.append(Data(base.utf8) + Data([0x22, 0xFF, 0xFE, 0x22, 0x7D]))  // "\xFF\xFE"
        malformed.append(Data(base.utf8) + Data([0x22, 0xC3, 0x28, 0x22, 0x7D]))  // a broken two-byte sequence
        malformed.append(Data(base.utf8) + Data([0x22, 0xED, 0xA0, 0x80, 0x22, 0x7D]))  // an encoded surrogate
        for bad in malformed {
            do {
                _ = try ContentLimitEvent.parse(json: bad)
                Issue.record("accepted: \(String(decoding: bad, as: UTF8.self))")
            } catch {
                #expect(error.exitCode == 65 && error.message.contains("invalid JSON"), "\(error.message)")
            }
            #expect(throws: JobError.self) {
                try ScheduledEvent.decode(
                    lambdaPayload: Array(#"{"time":"2026-11-23T12:00:00Z","detail":{"x":"#.utf8)
                        + Array(bad.suffix(from: base.utf8.count)) + [0x7D])
            }
        }
        for good in ["27.5", "-0", "0", "1e3", "-1.5E-3"] {
            #expect(throws: Never.self) { try ContentLimitEvent.parse(json: Data((base + good + "}").utf8)) }
        }
    }

    /// Each bad event is refused with what is wrong in it (65). Before, a fraction or an oversized number was
    /// "The given data was not valid JSON.", an array "wrong type for  (…)", and a key given twice was accepted:
    /// `{"user_id":"a",…,"user_id":"b"}` warned whichever user the decoder took, where the backend may have meant
    /// the other.
    @Test func badEventsSayWhatIsWrong() {
        let cases: [(event: String, message: String)] = [
            ("[1,2]", #"event: not a JSON object {"user_id", "used", "limit", "period"}"#),
            (#""u1""#, #"event: not a JSON object {"user_id", "used", "limit", "period"}"#),
            (#"{"user_id":"u1","used":9.5,"limit":10}"#, "event: used must be a whole number, got 9.5"),
            (#"{"user_id":"u1","used":1e308,"limit":10}"#, "event: used is out of range: 1e308"),
            (#"{"user_id":"u1","used":99999999999999999999}"#, "event: used is out of range: 99999999999999999999"),
            (#"{"user_id":"u1","used":"9","limit":10}"#, "event: used must be a whole number, got a string"),
            (#"{"user_id":"u1","used":9,"limit":"10"}"#, "event: limit must be a whole number or null, got a string"),
            (#"{"user_id":"u1","used":9,"limit":10.5}"#, "event: limit must be a whole number or null, got 10.5"),
            (#"{"user_id":7,"used":9}"#, "event: user_id must be a string, got 7"),
            (#"{"user_id":"u1","used":9,"period":5}"#, "event: period must be monthly or annual, got 5"),
            (#"{"user_id":"u1","used":9,"period":"weekly"}"#, "event: period must be monthly or annual, got weekly"),
            (#"{"used":9}"#, "event: missing user_id"),
            (#"{"user_id":"u1","limit":10}"#, "event: missing used"),
            (#"{"user_id":"u1","used":-1}"#, "event: used must not be negative, got -1"),
            (#"{"user_id":"a","used":9,"limit":10,"user_id":"b"}"#, "event: user_id appears twice"),
            (#"{"user_id":"u1","used":9,"meta":{"k":1,"k":2}}"#, "event: meta.k appears twice"),
        ]
        for (event, message) in cases {
            #expect(throws: JobError.dataError(message), "\(event)") {
                try ContentLimitEvent.parse(json: Data(event.utf8))
            }
        }
        // A whole number may be written with a fraction or an exponent (Python writes 27.0 for a float).
        for (written, used) in [("27", 27), ("27.0", 27), ("2.7e1", 27), ("-0", 0)] {
            let event = try? ContentLimitEvent.parse(
                json: Data(#"{"user_id":"u1","used":\#(written),"limit":null}"#.utf8))
            #expect(event == (try? ContentLimitEvent(userID: "u1", used: used, limit: nil)), "\(written)")
        }
    }

    /// An event written with a UTF-8 byte order mark (PowerShell, Windows editors) is read as without one, as
    /// RFC 8259 lets a parser do. Before, it was "event: invalid JSON at byte 0: expected a value". A mark anywhere
    /// else is still not JSON.
    @Test func anEventWithAByteOrderMarkIsRead() throws {
        let event = Data([0xEF, 0xBB, 0xBF] + Array(#"{"user_id":"u1","used":27,"limit":30}"#.utf8))
        #expect(try ContentLimitEvent.parse(json: event) == ContentLimitEvent(userID: "u1", used: 27, limit: 30))
        #expect(throws: JobError.self) {
            try ContentLimitEvent.parse(json: Data(#"{"user_id":"u1","used":27}"#.utf8 + [0xEF, 0xBB, 0xBF]))
        }
        #expect(throws: JobError.self) {
            try ContentLimitEvent.parse(json: Data([0xEF, 0xBB] + Array(#"{"user_id":"u1","used":27}"#.utf8)))
        }
    }
}

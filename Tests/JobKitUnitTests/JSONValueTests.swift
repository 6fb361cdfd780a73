import Foundation
import JobKitTestSupport
import Logging
import NIOCore
import PushSimulator
import Testing

@testable import JobKit
@testable import JobKitDelivery

@Suite struct JSONValueTests {
    @Test func readsWhatFoundationReads() throws {
        let text = #"""
             {"message": {"token": "ab\"c\\d\/e", "data": {"k": "v"}, "n": -12.5e+3, "i": 42, "zero": 0,
              "list": [true, false, null, [], {}], "uni": "\u00e9\ud83d\udcd4 é📔", "ctl": "a\nb\tc\u0001"},
              "validate_only": false}
            """#
        let value = try JSONValue(parsing: text)
        let message = try #require(value["message"])
        #expect(message["token"]?.string == #"ab"c\d/e"#)
        #expect(message["data"]?["k"]?.string == "v")
        #expect(message["n"]?.double == -12500)
        #expect(message["n"]?.int64 == nil)
        #expect(message["i"]?.int64 == 42)
        #expect(message["zero"]?.int64 == 0)
        #expect(message["list"]?.array?.count == 5)
        #expect(message["list"]?.array?.first?.bool == true)
        #expect(message["uni"]?.string == "é📔 é📔")
        #expect(message["ctl"]?.string == "a\nb\tc\u{1}")
        #expect(value["validate_only"]?.bool == false)
        #expect(value["missing"] == nil)
        #expect(message["token"]?["x"] == nil)

        // The same strings as Foundation's parser.
        let foundation = try #require(try JSONSerialization.jsonObject(with: Data(text.utf8)) as? [String: Any])
        let foundationMessage = try #require(foundation["message"] as? [String: Any])
        for key in ["token", "uni", "ctl"] {
            #expect(message[key]?.string == foundationMessage[key] as? String)
        }
    }

    @Test func writesCompactTextThatReadsBackTheSame() throws {
        let text = #"{"a":[1,-2.5e3,true,null,"x\"y"],"b":{"c":"é\n"},"d":{}}"#
        var bytes: [UInt8] = []
        try JSONValue(parsing: text).write(into: &bytes)
        #expect(String(decoding: bytes, as: UTF8.self) == text)
        var spaced: [UInt8] = []
        try JSONValue(parsing: " { \"a\" : [ 1 , 2 ] } \n").write(into: &spaced)
        #expect(String(decoding: spaced, as: UTF8.self) == #"{"a":[1,2]}"#)
    }

    @Test(arguments: [
        "", " ", "{", "}", "[1,]", "{\"a\":1,}", "{\"a\" 1}", "{a:1}", "'a'", "tru", "nul", "True",
        "01", "-", "1.", ".5", "1e", "1e+", "+1", "0x10", "NaN", "[1] [2]", "{} x", "\"abc", "\"a\\x\"",
        "\"\\u12\"", "\"\\ud83d\"", "\"\\udcd4\"", "\"\\ud83dx\"", "\"tab\there\"", "// c\n1", "[1 2]",
    ])
    func refusesWhatIsNotJSON(_ text: String) {
        #expect(throws: JSONValue.SyntaxError.self) { try JSONValue(parsing: text) }
    }

    @Test func refusesInvalidUTF8AndDeepNesting() {
        let invalid = ByteBuffer(bytes: Array("\"a".utf8) + [0xC3, 0x28] + Array("\"".utf8))
        #expect(throws: JSONValue.SyntaxError.self) { try JSONValue(parsing: invalid) }
        let deep =
            String(repeating: "[", count: JSONValue.maximumDepth + 1)
            + String(repeating: "]", count: JSONValue.maximumDepth + 1)
        #expect(throws: JSONValue.SyntaxError.self) { try JSONValue(parsing: deep) }
        let fine =
            String(repeating: "[", count: JSONValue.maximumDepth)
            + String(repeating: "]", count: JSONValue.maximumDepth)
        #expect((try? JSONValue(parsing: fine)) != nil)
    }

    @Test func errorsSayWhere() {
        do {
            _ = try JSONValue(parsing: #"{"a": tru}"#)
            Issue.record("parsed")
        } catch {
            #expect(error.offset == 6)
            #expect(error.description == "invalid JSON at byte 6: expected true")
        }
    }

    @Test func providerAnswersAreClassifiedFromTheirJSON() {
        let fcmOK = FCM.classify(
            status: 200, headers: [:], body: ByteBuffer(string: #"{"name": "projects/p/messages/0:1%2"}"#))
        #expect(fcmOK.outcome == .delivered)
        #expect(fcmOK.providerMessageID == "projects/p/messages/0:1%2")
        let fcmDead = FCM.classify(
            status: 404, headers: [:],
            body: ByteBuffer(
                string: #"""
                    {"error": {"code": 404, "message": "Requested entity was not found.", "status": "NOT_FOUND",
                     "details": [{"@type": "type.googleapis.com/google.rpc.BadRequest"},
                                 {"@type": "type.googleapis.com/google.firebase.fcm.v1.FcmError", "errorCode": "UNREGISTERED"}]}}
                    """#))
        #expect(fcmDead.outcome == .tokenDead)
        #expect(fcmDead.reason == "UNREGISTERED")
        let fcmGarbage = FCM.classify(status: 503, headers: [:], body: ByteBuffer(string: "<html>"))
        #expect(fcmGarbage.outcome == .retryLater)
        #expect(fcmGarbage.reason == "HTTP 503")
        let apnsDead = APNs.classify(
            status: 410, headers: [:], body: ByteBuffer(string: #"{"reason":"Unregistered","timestamp":1700000000123}"#)
        )
        #expect(apnsDead.outcome == .tokenDead)
        #expect(apnsDead.tokenInvalidSince == 1_700_000_000)
    }
}

/// JobKit's other JSON, read and written with ``JSONValue`` too: a warning's stored numbers, the log rows a
/// store aggregates for the hook.
@Suite struct JobKitJSONTests {
    @Test func aWarningsNumbersRoundTripWithSortedKeys() {
        let params = ["used": "27", "limit": "30", "percent": "90"]
        #expect(LimitParams.encode(params) == #"{"limit":"30","percent":"90","used":"27"}"#)
        #expect(LimitParams.decode(LimitParams.encode(params)) == params)
        #expect(LimitParams.encode(["quote": "a\"b\\c\n"]) == #"{"quote":"a\"b\\c\n"}"#)
        for unreadable in [nil, "", "not json", #"{"used":27}"#, #"["27"]"#, #"{"used":"27"} x"#] {
            #expect(LimitParams.decode(unreadable) == [:], "\(String(describing: unreadable))")
        }
    }

    @Test func logRowsAreReadAndMalformedOnesSkipped() {
        let json = """
            [[7,"content_limit_90","2026-11","deferred",1764000000,2,"en","r1",1764030000,"free"],
             [8,"content_limit_100","2026-11","claimed",1764000100,null,null,"r2",null,null],
             [9.5,"content_limit_90","2026-12","sent",1,0,"en","r",null,null],
             [10,"content_limit_100","2026-12","sent",1,0,"en","r",null],
             [11,"content_limit_100","2027-01","sent",1,0,"en","r",null,"free","eleventh"],
             ["x"], 3]
            """
        let logs = LimitSnapshot.parseLogs(json: json)
        #expect(logs.count == 2)
        let first = logs[LimitLogKey(type: .contentLimit90, period: "2026-11")]
        #expect(first?.id == 7 && first?.status == .deferred && first?.claimedAt == 1_764_000_000)
        #expect(first?.messageIndex == 2 && first?.locale == "en" && first?.runID == "r1")
        #expect(first?.deliverAfter == 1_764_030_000 && first?.plan == "free")
        let second = logs[LimitLogKey(type: .contentLimit100, period: "2026-11")]
        #expect(second?.messageIndex == nil && second?.locale == nil && second?.status == .claimed)
        #expect(second?.deliverAfter == nil && second?.plan == nil)
        #expect(LimitSnapshot.parseLogs(json: nil).isEmpty && LimitSnapshot.parseLogs(json: "{").isEmpty)
    }
}

import Foundation
import JobKitTestSupport
import Testing

@testable import JobKit
@testable import JobKitDelivery

@Suite struct PayloadJSONTests {
    @Test func escapesLikeJSONSerializationAndKeepsTheGivenOrder() throws {
        let tricky = "Quote \" backslash \\ slash / newline \n tab \t bell \u{7} emoji 📔 é"
        let value: PayloadJSON = ["a": ["b": .string(tricky), "c": 7, "d": false], "e": .int(-3)]
        let ours = value.data
        let foundation = try JSONSerialization.data(
            withJSONObject: ["a": ["b": tricky, "c": 7, "d": false] as [String: Any], "e": -3] as [String: Any],
            options: [.sortedKeys, .withoutEscapingSlashes])
        // Same value, and byte for byte the same text as Foundation's sorted-key output.
        #expect(String(decoding: ours, as: UTF8.self) == String(decoding: foundation, as: UTF8.self))
        let parsed = try #require(try JSONSerialization.jsonObject(with: ours) as? [String: Any])
        #expect((parsed["a"] as? [String: Any])?["b"] as? String == tricky)
    }

    @Test func providerPayloadsAreValidJSONWithSortedKeys() throws {
        let device = Device(
            id: 1, userID: "u", token: "tok\"en", provider: .fcm, platform: .android, apnsEnvironment: nil)
        let notification = OutgoingNotification(
            logID: 1, device: device, type: .diaryReminder, period: "2026-11-21", locale: "en",
            messageIndex: 0, title: "Ti\"tle", body: "Body\nline", expiresAt: 100)
        for data in [
            APNs.payload(for: notification, links: DeepLinks(), badge: .number(1)),
            FCM.message(
                for: notification, configuration: FCMConfiguration(serviceAccountFile: "x"), links: DeepLinks(),
                badge: .number(1), now: 40
            ),
        ] {
            let object = try JSONSerialization.jsonObject(with: data)
            let resorted = try JSONSerialization.data(
                withJSONObject: object, options: [.sortedKeys, .withoutEscapingSlashes])
            #expect(String(decoding: data, as: UTF8.self) == String(decoding: resorted, as: UTF8.self))
        }
    }

    /// Issue 21, item 5: a title of 60 characters can be 18 KB (a letter with 150 combining accents is one
    /// character). Both providers' payloads stay within 4,096 bytes, title and body cut at grapheme boundaries.
    @Test(arguments: [
        (String(repeating: "e" + String(repeating: "\u{0301}", count: 150), count: 60), "short body"),
        ("Short title", String(repeating: "👩‍👩‍👧‍👦", count: 400)),
        (String(repeating: "\u{7}", count: 2000), String(repeating: "\"", count: 3000)),
    ])
    func aPayloadNeverExceedsTheProvidersLimit(title: String, body: String) throws {
        for platform in Platform.allCases {
            let device = Device(
                id: 1, userID: "u", token: String(repeating: "ab", count: 32),
                provider: platform == .ios ? .apns : .fcm,
                platform: platform, apnsEnvironment: nil)
            let notification = OutgoingNotification(
                logID: 1, device: device, type: .contentLimit90, period: "2026-11",
                locale: "en", messageIndex: 0, title: title, body: body, expiresAt: 100)
            let payloads = [
                ("APNs", APNs.payload(for: notification, links: DeepLinks(), badge: .number(1)), APNs.maxPayloadBytes),
                (
                    "FCM",
                    FCM.message(
                        for: notification, configuration: FCMConfiguration(serviceAccountFile: "x"),
                        links: DeepLinks(), badge: .number(1), now: 40), FCM.maxPayloadBytes
                ),
            ]
            for (provider, data, limit) in payloads {
                #expect(data.count <= limit, "\(provider) payload of \(data.count) bytes")
                let object = try #require(try JSONSerialization.jsonObject(with: data) as? [String: Any])
                let alert =
                    provider == "APNs"
                    ? (object["aps"] as? [String: Any])?["alert"] as? [String: String]
                    : ((object["message"] as? [String: Any])?["notification"] as? [String: String])
                let sentTitle = try #require(alert?["title"])
                let sentBody = try #require(alert?["body"])
                // What was kept is a prefix of whole characters (then an ellipsis), never a torn grapheme.
                #expect(
                    sentTitle == title || (sentTitle.hasSuffix("…") && title.hasPrefix(String(sentTitle.dropLast()))))
                #expect(sentBody == body || (sentBody.hasSuffix("…") && body.hasPrefix(String(sentBody.dropLast()))))
                #expect(data.count > limit - 400, "cut far more than needed: \(data.count) bytes")
            }
        }
    }
}

import Foundation
import Testing
@testable import JobKit

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
        let device = Device(id: 1, userID: "u", token: "tok\"en", provider: .fcm, platform: "android", apnsEnvironment: nil)
        let notification = OutgoingNotification(logID: 1, device: device, type: .diaryReminder, period: "2026-11-21", locale: "en",
                                                messageIndex: 0, title: "Ti\"tle", body: "Body\nline", expiresAt: 100)
        for data in [APNs.payload(for: notification, links: DeepLinks()),
                     FCM.message(for: notification, configuration: FCMConfiguration(serviceAccountFile: "x"), links: DeepLinks(), now: 40)] {
            let object = try JSONSerialization.jsonObject(with: data)
            let resorted = try JSONSerialization.data(withJSONObject: object, options: [.sortedKeys, .withoutEscapingSlashes])
            #expect(String(decoding: data, as: UTF8.self) == String(decoding: resorted, as: UTF8.self))
        }
    }
}

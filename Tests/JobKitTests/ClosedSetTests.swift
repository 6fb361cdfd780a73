import Testing

@testable import JobKit

/// The closed sets read from the database (the schema's checks allow exactly these): a value this version does
/// not know is an error naming the row, never a default.
@Suite struct ClosedSetTests {
    /// A device row's provider, platform and APNs environment are closed sets: a value this version does not know
    /// is an error naming the row, never a default (before, an unknown provider's device was dropped without a
    /// word, and a platform or environment was any string).
    @Test func aStoredDeviceWithAValueThisVersionDoesNotKnowIsAnError() throws {
        let ios = try Device(
            storedID: 7, userID: "u", token: "ab", provider: "apns", platform: "ios", apnsEnvironment: "sandbox")
        #expect(ios.provider == .apns && ios.platform == .ios && ios.apnsEnvironment == .sandbox)
        let android = try Device(
            storedID: 8, userID: "u", token: "t", provider: "fcm", platform: "android", apnsEnvironment: nil)
        #expect(android.platform == .android && android.apnsEnvironment == nil)
        for (provider, platform, environment, problem) in [
            ("hms", "android", nil, "provider \"hms\""), ("fcm", "windows", nil, "platform \"windows\""),
            ("apns", "ios", "staging", "apns_environment \"staging\""),
        ] {
            #expect(throws: JobError.dataError("user_devices row 9: unknown \(problem)")) {
                try Device(
                    storedID: 9, userID: "u", token: "t", provider: provider, platform: platform,
                    apnsEnvironment: environment)
            }
        }
    }

    /// A notification type is one of three; any other name was read as a type of its own before.
    @Test func aStoredNotificationTypeThisVersionDoesNotKnowIsAnError() throws {
        #expect(NotificationType(rawValue: "streak") == nil)
        #expect(try NotificationType(storedIn: 5, "content_limit_90") == .contentLimit90)
        #expect(throws: JobError.dataError("notification_logs row 5: unknown notification_type \"streak\"")) {
            try NotificationType(storedIn: 5, "streak")
        }
        #expect(NotificationType.all.map(\.rawValue) == ["diary_reminder", "content_limit_90", "content_limit_100"])
    }
}

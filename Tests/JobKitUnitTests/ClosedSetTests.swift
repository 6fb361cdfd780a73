import JobKitTestSupport
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
        #expect(
            NotificationType.allCases.map(\.rawValue) == ["diary_reminder", "content_limit_90", "content_limit_100"])
    }

    /// The summaries count by closed sets (outcome, channel, skip reason, provider): typed keys, written as JSON
    /// objects keyed by the raw values and as `key=count` text, in the raw values' order. A typed key written
    /// without `CodingKeyRepresentable` would come out as a JSON array of alternating keys and counts.
    @Test func summaryCountsAreKeyedByTheirRawValues() throws {
        var run = RunSummary(job: "diary-reminder", runID: "r", now: 0, dryRun: false)
        run.outcomes = [.tokenDead: 1, .delivered: 3]
        run.outcomesByProvider = [.fcm: [.delivered: 2], .apns: [.delivered: 1, .tokenDead: 1]]
        run.skipped = [.wroteToday: 2, .alreadyReminded: 1]
        run.credentialMints = [.fcm: 1, .apns: 0]
        ProviderTrouble.add(provider: .outbox, cause: .unavailable, reason: "disk full", to: &run.troubles)
        for member in [
            #""outcomes":{"delivered":3,"token_dead":1}"#,
            #""outcomes_by_provider":{"apns":{"delivered":1,"token_dead":1},"fcm":{"delivered":2}}"#,
            #""skipped":{"already_reminded":1,"wrote_today":2}"#, #""credential_mints":{"apns":0,"fcm":1}"#,
            #""troubles":[{"cause":"unavailable","devices":1,"provider":"outbox","reasons":["disk full"]}]"#,
        ] {
            #expect(run.json.contains(member), "\(run.json)")
        }
        #expect(run.text.contains("outcomes[delivered=3 token_dead=1] skipped[already_reminded=1 wrote_today=2]"))
        #expect(run.troubles.first?.summary.hasPrefix("outbox was unavailable: 1 device") == true)

        var hook = HookSummary(runID: "h", now: "2026-11-24T12:00:00Z", dryRun: false, userID: "u", used: 9, limit: 10)
        hook.notifications = 3
        hook.outcomes = [.retryLater: 1, .delivered: 2]
        #expect(hook.json.contains(#""outcomes":{"delivered":2,"retry_later":1}"#), "\(hook.json)")
        #expect(hook.text.contains("notifications=3 outcomes[delivered=2 retry_later=1]"), "\(hook.text)")
    }
}

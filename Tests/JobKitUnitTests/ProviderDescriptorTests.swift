import Foundation
import Testing

@testable import JobKit

/// Issue 80: a provider is described once (``ProviderDescriptor``). What registration and the mirror did with
/// ternaries on a provider's identity they now read from its descriptor, and nothing outside the descriptors
/// compares one.
@Suite struct ProviderDescriptorTests {
    /// The rules the ternaries held, now read from the descriptors: case, platforms, kinds, environments, shapes.
    @Test func theDescriptorsSayWhatTheTernariesSaid() throws {
        let hex = String(repeating: "AB", count: 32)
        let apns = try DeviceRegistration(userID: "u", token: hex, provider: .apns, platform: .ios)
        #expect(apns.token == hex.lowercased() && apns.apnsEnvironment == .production)
        let fcm = try DeviceRegistration(userID: "u", token: "Ab:c", provider: .fcm, platform: .ios)
        #expect(fcm.token == "Ab:c" && fcm.apnsEnvironment == nil)
        #expect(throws: JobError.self) {
            try DeviceRegistration(userID: "u", token: hex, provider: .apns, platform: .android)
        }
        #expect(throws: JobError.dataError("device registration: \(DeviceToken.apnsTokenAsFCM)")) {
            try DeviceRegistration(userID: "u", token: hex, provider: .fcm, platform: .ios)
        }
        #expect(throws: JobError.self) {
            try DeviceRegistration(
                userID: "u", token: "c" + String(repeating: "a", count: 21), provider: .apns, platform: .ios, kind: .fid
            )
        }
        #expect(Provider.byShape(hex) == .apns && Provider.byShape("Ab:c") == .fcm)
        #expect(Provider.ofInstallationIDs == .fcm)
        #expect(Provider.sqlList(\.storesLowerCase) == "'apns'" && Provider.sqlList(\.probesQuietTokens) == "'fcm'")
        #expect(DeliveryChannel(Provider.apns) == .apns && DeliveryChannel(Provider.fcm) == .fcm)
        // A provider's channel is named as the provider is: the history and the metrics' labels take either.
        #expect(Provider.all.allSatisfy { DeliveryChannel($0).rawValue == $0.rawValue })
        #expect(DeliveryChannel(rawValue: "apns") == .apns && DeliveryChannel.apns.displayName == "APNs")
        // The SQL mirror's by-shape expression is the Swift rule's.
        #expect(
            Provider.sqlByShape("t") == "CASE WHEN t ~ '\(DeviceToken.apnsShapedPattern)' THEN 'apns' ELSE 'fcm' END")
        #expect(Provider.sqlEnvironment(provider: "p", "e") == "CASE p WHEN 'apns' THEN coalesce(e, 'production') END")
    }

    /// No `==`, `!=`, ternary or `case` on a provider's identity, and no SQL literal naming one, outside the
    /// descriptors. Allowed: the descriptors' folder, the simulator (it plays the providers), the migrations
    /// (history, never edited).
    @Test func nothingOutsideTheDescriptorsComparesAProvider() throws {
        let found = try Self.lines(
            matching: [
                #"(==|!=)\s*(Provider)?\.(apns|fcm)\b"#, #"\?\s*(Provider)?\.(apns|fcm)\b"#,
                #"case\s+\(?\.(apns|fcm)\b"#,
                #"'(apns|fcm)'"#,
            ],
            allowed: [
                "Sources/JobKit/Delivery/Providers/", "Sources/JobKitDelivery/Providers/", "Sources/PushSimulator/",
                "Sources/PushSimulatorCommand/",
                "Sources/JobKitSchema/SchemaMigrations.swift",
            ])
        #expect(
            found.isEmpty, "a provider's identity compared outside its descriptor:\n\(found.joined(separator: "\n"))")
    }

    /// No SQL literal names a notification type outside the type set (`<> 'diary_reminder'` stood for "a quota
    /// warning" in both stores): the stores take `NotificationType.sql`, `sqlList` and `quotaWarningSQL`.
    @Test func noSQLLiteralNamesANotificationType() throws {
        let found = try Self.lines(
            matching: [#"'(diary_reminder|content_limit_90|content_limit_100)'"#],
            allowed: ["Sources/JobKit/Copy/NotificationType.swift", "Sources/JobKitSchema/SchemaMigrations.swift"])
        #expect(found.isEmpty, "a notification type spelled in SQL:\n\(found.joined(separator: "\n"))")
        // The partial indexes' `<> 'diary_reminder'` means "a quota warning" only while every other type is one.
        #expect(
            NotificationType.allCases.filter { $0 != .diaryReminder }
                == NotificationType.allCases.filter(\.isQuotaWarning))
        #expect(NotificationType.quotaWarningSQL("l.t") == "l.t <> 'diary_reminder'")
        #expect(NotificationType.sqlList(\.isQuotaWarning) == "'content_limit_90', 'content_limit_100'")
    }

    /// The lines of `Sources/**/*.swift` outside `allowed` (path prefixes) that match any of `patterns`.
    static func lines(matching patterns: [String], allowed: [String]) throws -> [String] {
        let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
            .deletingLastPathComponent()
        let expressions = try patterns.map { try NSRegularExpression(pattern: $0) }
        var found: [String] = []
        var files = 0
        let walker = FileManager.default.enumerator(
            at: root.appendingPathComponent("Sources"), includingPropertiesForKeys: nil)
        while let url = walker?.nextObject() as? URL {
            guard url.pathExtension == "swift" else { continue }
            let relative = String(url.path.dropFirst(root.path.count + 1))
            guard !allowed.contains(where: { relative.hasPrefix($0) }) else { continue }
            files += 1
            let text = try String(contentsOf: url, encoding: .utf8)
            for (number, line) in text.components(separatedBy: "\n").enumerated() {
                let range = NSRange(line.startIndex..., in: line)
                if expressions.contains(where: { $0.firstMatch(in: line, range: range) != nil }) {
                    found.append("\(relative):\(number + 1): \(line.trimmingCharacters(in: .whitespaces))")
                }
            }
        }
        #expect(files > 100, "the walk found \(files) files: is the tree where the test looks?")
        return found
    }
}

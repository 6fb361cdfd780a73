import Foundation
import JobKitTestSupport
import Testing

@testable import JobCLI
@testable import JobKit
@testable import JobKitDelivery

/// Issue 65: a setting is declared once (``ConfigKey``: the flag, the environment variable, the help, the value
/// name), and every command's options come from that declaration. Read from what ArgumentParser derives, in each
/// executable's `--experimental-dump-help`, every subcommand included.
@Suite struct SettingFlagsTests {
    struct Option: Hashable {
        let command: String
        let long: [String]
        let abstract: String
        let valueName: String?
    }

    /// Every option of `executable` and of its subcommands.
    static func options(_ executable: String) async throws -> [Option] {
        let result = try await Executables.run(executable, ["--experimental-dump-help"])
        #expect(result.status == 0, "\(executable): \(result.stderr)")
        let dump = try #require(
            try JSONSerialization.jsonObject(with: Data(result.stdout.utf8)) as? [String: Any], "\(executable)")
        var options: [Option] = []
        func walk(_ command: [String: Any], path: String) {
            for argument in command["arguments"] as? [[String: Any]] ?? [] {
                let names = (argument["names"] as? [[String: Any]] ?? []).filter { $0["kind"] as? String == "long" }
                options.append(
                    Option(
                        command: path, long: names.compactMap { $0["name"] as? String },
                        abstract: argument["abstract"] as? String ?? "", valueName: argument["valueName"] as? String))
            }
            for sub in command["subcommands"] as? [[String: Any]] ?? [] {
                walk(sub, path: path + " " + (sub["commandName"] as? String ?? "?"))
            }
        }
        walk(try #require(dump["command"] as? [String: Any]), path: executable)
        return options
    }

    @Test func everyCommandsSettingFlagsComeFromTheOneDeclaration() async throws {
        var offered: Set<ConfigKey> = []
        let byFlag = Dictionary(uniqueKeysWithValues: ConfigKey.allCases.map { (String($0.flag.dropFirst(2)), $0) })
        for executable in ["diary-reminder", "content-limit-hook-full", "token-janitor", "pushctl", "push-api"] {
            let options = try await Self.options(executable)
            #expect(options.count > 5, "\(executable): \(options.count) options read")
            for option in options {
                let keys = option.long.compactMap { byFlag[$0] }
                for key in keys {
                    offered.insert(key)
                    #expect(
                        option.abstract == key.optionHelp && option.valueName == key.valueName,
                        "\(option.command) --\(option.long): \(option.abstract) <\(option.valueName ?? "")>")
                }
                // An option that names an environment variable is a setting: it must be one under its own flag.
                for key in ConfigKey.allCases where option.abstract.contains(key.rawValue) {
                    #expect(keys == [key], "\(option.command) --\(option.long) names \(key.rawValue)")
                }
            }
        }
        // Each setting has a flag in some command (the hook front reads only the environment).
        #expect(offered == Set(ConfigKey.allCases), "no flag: \(Set(ConfigKey.allCases).subtracting(offered))")
    }

    @Test func aSettingsFlagIsItsVariablesNameAndDatabaseAloneDiffers() {
        #expect(ConfigKey.apnsKeyID.flag == "--apns-key-id")
        #expect(ConfigKey.fcmAndroidWarningChannelID.flag == "--fcm-android-warning-channel-id")
        #expect(ConfigKey.databaseURL.flag == "--database")
        #expect(Set(ConfigKey.allCases.map(\.flag)).count == ConfigKey.allCases.count)
    }

    /// The defaults the jobs apply with nothing set are the ones each setting declares, and its help says them.
    @Test func theDeclaredDefaultsAreTheOnesApplied() throws {
        // APNs and FCM configured, every other setting left to its default.
        let config = ConfigResolver(environment: [
            "PUSH_APNS_KEY_FILE": "k.p8", "PUSH_APNS_KEY_ID": "KEY", "PUSH_APNS_TEAM_ID": "TEAM",
            "PUSH_APNS_TOPIC": "t", "PUSH_FCM_SERVICE_ACCOUNT_FILE": "sa.json",
        ])
        let delivery = try DeliveryConfiguration.resolve(config, flags: DeliveryFlags())
        let reminder = try DiaryReminderHandler.Settings.resolve(config)
        func number(_ key: ConfigKey) -> Int { key.number!.default }
        func text(_ key: ConfigKey) -> String { key.defaultValue! }
        #expect(reminder.rule.early == Int64(number(.earlyMinutes)) * 60)
        #expect(reminder.rule.catchUp == Int64(number(.catchUpMinutes)) * 60)
        #expect(reminder.claimLeaseSeconds == Int64(number(.claimLeaseMinutes)) * 60)
        #expect(delivery.retry.budget == .seconds(number(.retryBudgetSeconds)))
        #expect(delivery.apns?.rate == nil && number(.apnsRate) == 0)
        #expect(delivery.fcm?.rate?.perSecond == Double(number(.fcmRate)))
        #expect(
            delivery.outage
                == OutageThreshold(sharePercent: number(.outageShare), minDevices: number(.outageMinDevices)))
        #expect(delivery.apns?.productionEndpoint == Endpoint(url: text(.apnsEndpoint)))
        #expect(delivery.apns?.sandboxEndpoint == Endpoint(url: text(.apnsSandboxEndpoint)))
        #expect(delivery.fcm?.endpoint == Endpoint(url: text(.fcmEndpoint)))
        #expect(delivery.fcm?.androidChannelID == text(.fcmAndroidChannelID))
        #expect(delivery.links.base == text(.deepLinkBase))
        #expect(delivery.badge == AppBadge(text(.iosBadge)))
        for key in ConfigKey.allCases {
            guard let value = key.defaultValue else { continue }
            #expect(key.optionHelp.contains("Default \(value)"), "\(key.rawValue): \(key.optionHelp)")
            // A declared default is a value the setting accepts, as written.
            if let number = key.number { #expect(number.range.contains(number.default), "\(key.rawValue)") }
        }
    }
}

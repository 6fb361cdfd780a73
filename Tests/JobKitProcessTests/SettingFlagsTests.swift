import Foundation
import JobKitTestSupport
import Testing

@testable import JobCLI
@testable import JobKit

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
        for executable in ["diary-reminder", "content-limit-hook-full", "token-janitor", "pushctl"] {
            let options = try await Self.options(executable)
            #expect(options.count > 5, "\(executable): \(options.count) options read")
            for option in options {
                let keys = option.long.compactMap { byFlag[$0] }
                for key in keys {
                    offered.insert(key)
                    #expect(
                        option.abstract == ConfigKey.optionHelp(key) && option.valueName == key.valueName,
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
}

import ArgumentParser
import JobKit

// A setting's flag, help and value name come from its one declaration, ``ConfigKey``:
//
//     @Option(name: .setting(.apnsKeyFile), help: .setting(.apnsKeyFile)) public var apnsKeyFile: String?
//
// A test reads every command's `--experimental-dump-help` and checks each setting's flag against it.

extension NameSpecification {
    /// The long name of setting `key` (``ConfigKey/flag``).
    package static func setting(_ key: ConfigKey) -> NameSpecification {
        [.customLong(String(key.flag.dropFirst(2)))]
    }
}

extension ArgumentHelp {
    /// The help of setting `key`: ``ConfigKey/help`` and the environment variable that also sets it.
    package static func setting(_ key: ConfigKey) -> ArgumentHelp {
        ArgumentHelp(key.optionHelp, valueName: key.valueName)
    }
}

extension ConfigKey {
    /// The abstract of this setting's option in every command's help.
    package var optionHelp: String { "\(fullHelp) Env \(rawValue)." }
}

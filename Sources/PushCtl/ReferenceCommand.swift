import ArgumentParser
import Foundation
import JobKit
import JobKitCore

/// The facts the generated reference pages are made from (`scripts/reference`): every setting and every exit
/// code, as JSON. Hidden: a tool of the repository's, not an operator's command.
struct ReferenceCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "reference", abstract: "Print the settings and exit codes as JSON (for scripts/reference).",
        shouldDisplay: false)

    func run() throws {
        let settings: [[String: String]] = ConfigKey.allCases.map { key in
            var row = ["variable": key.rawValue, "flag": key.flag, "value": key.valueName, "help": key.help]
            if let number = key.number {
                row["default"] = String(number.default)
                row["range"] = "\(number.range.lowerBound)–\(number.range.upperBound)"
            } else if let value = key.defaultValue {
                row["default"] = value
            }
            return row
        }
        let exitCodes: [[String: String]] = JobError.exitCodes.map {
            ["code": String($0.code), "kind": $0.kind, "meaning": $0.meaning]
        }
        let data = try JSONSerialization.data(
            withJSONObject: ["settings": settings, "exit_codes": exitCodes], options: [.sortedKeys, .prettyPrinted])
        print(String(decoding: data, as: UTF8.self))
    }
}

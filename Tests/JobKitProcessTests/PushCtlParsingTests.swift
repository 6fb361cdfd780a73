import ArgumentParser
import Testing

@testable import PushCtlCommands

/// `pushctl`'s flags are checked before anything is opened: parsed and validated in process, each bad combination
/// is a usage error that names the flag (the executable prints it and exits 64).
@Suite struct PushCtlParsingTests {
    static func usageError(_ arguments: [String]) -> String? {
        do {
            _ = try PushCtl.parseAsRoot(arguments)
            return nil
        } catch {
            return PushCtl.exitCode(for: error) == .validationFailure ? PushCtl.message(for: error) : "\(error)"
        }
    }

    @Test func badCombinationsAreUsageErrorsThatNameTheFlag() {
        let fid = "c" + String(repeating: "a", count: 21)
        for (arguments, flag) in [
            (["device", "register", "--user", "u", "--fid", fid, "--provider", "apns", "--platform", "ios"], "--fid"),
            (["device", "register", "--user", "u", "--token", "t", "--platform", "android"], "--provider"),
            (["device", "register", "--user", "u", "--platform", "android"], "--token"),
            (
                [
                    "device", "register", "--user", String(repeating: "u", count: 129), "--token", "t", "--provider",
                    "fcm",
                    "--platform", "android",
                ], "--user"
            ),
            (["user", "set", "--id", "u", "--reminder-time", "25:00"], "--reminder-time"),
            (["seed", "--users", "10", "--due-count", "3"], "--due-at"),
            (["entry", "add", "--user", ""], "--user"),
        ] {
            let message = Self.usageError(arguments)
            #expect(message?.contains(flag) == true, "\(arguments): \(message ?? "accepted")")
        }
        // And a good one parses.
        #expect(Self.usageError(["device", "register", "--user", "u", "--fid", fid, "--platform", "ios"]) == nil)
    }
}

// Reads one hook event per line on stdin ({"user_id": "u1", "used": 27, "limit": 30}) and handles each
// in-process, the way a Vapor or Hummingbird route would after saving a write. Settings come from the
// PUSH_* environment (README "Configuration"); the service is built once and closed at the end.
import Foundation
import JobKit
import JobKitDelivery
import JobKitSQLite

let hook: JobService<ContentLimitHookHandler>
do {
    // At start-up: the store is opened and the provider settings, key files and catalog are checked.
    hook = try await JobService.contentLimitHook(stores: .sqliteOnly)
} catch {
    FileHandle.standardError.write(Data("in-process-hook: \(error.message)\n".utf8))
    exit(error.exitCode)
}

var status: Int32 = 0
while let line = readLine() {
    guard !line.isEmpty else { continue }
    do {
        let event = try ContentLimitEvent.parse(json: Data(line.utf8))
        let summary = try await hook.handle(event)
        print(summary.json)
        // The warning was due but a provider refused or was unavailable: an app would alert or retry later.
        if let failure = summary.failure {
            FileHandle.standardError.write(Data("in-process-hook: \(failure.message)\n".utf8))
            status = failure.exitCode
        }
    } catch {
        // A bad event or an unknown user (65), a locked database (75), …: the write itself stands.
        FileHandle.standardError.write(Data("in-process-hook: \(error.message)\n".utf8))
        status = error.exitCode
    }
}
await hook.close()
exit(status)

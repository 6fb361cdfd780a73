import Foundation
import NIOConcurrencyHelpers
import Testing

@testable import JobKit

/// The built executables, run as cron runs them.
package enum Executables {
    package static let directory: URL = {
        // The test bundle sits beside the products in the build directory.
        var url = URL(fileURLWithPath: CommandLine.arguments[0]).resolvingSymlinksInPath()
        while url.pathComponents.count > 1
            && !FileManager.default.fileExists(atPath: url.appendingPathComponent("diary-reminder").path)
        {
            url.deleteLastPathComponent()
        }
        return url
    }()

    package static func url(_ name: String) throws -> URL {
        let url = directory.appendingPathComponent(name)
        guard FileManager.default.isExecutableFile(atPath: url.path) else {
            throw JobError.noInput(
                "\(name) is not built next to the tests (run `swift build` before `swift test`; scripts/test does)")
        }
        return url
    }

    package struct Result {
        package let status: Int32
        package let stdout: String
        package let stderr: String
        /// The signal that ended the child, if one did (`status` is then the signal's number).
        package var signal: Int32? = nil
    }

    package static func run(_ name: String, _ arguments: [String], stdin: String, environment: [String: String] = [:])
        async throws -> Result
    {
        let input = Pipe()
        let started = try start(name, arguments, environment: environment, stdin: input)
        input.fileHandleForWriting.write(Data(stdin.utf8))
        try input.fileHandleForWriting.close()
        return await finish(started)
    }

    package static func start(
        _ name: String, _ arguments: [String], environment: [String: String] = [:], stdin: Pipe? = nil
    )
        throws -> Started
    {
        try start(executable: try url(name), arguments, environment: environment, stdin: stdin)
    }

    /// Starts the executable at `executable` (a product copied elsewhere, say).
    package static func start(
        executable: URL, _ arguments: [String], environment: [String: String] = [:], stdin: Pipe? = nil
    )
        throws -> Started
    {
        // An executable the test has just copied may fail with ETXTBSY ("Text file busy"): a child another test
        // forked at that moment still holds the copy's write descriptor until it execs. Tried again, with a new
        // Process, as Go's os/exec does.
        for attempt in 1... {
            let process = Process()
            process.executableURL = executable
            process.arguments = arguments
            var env = ProcessInfo.processInfo.environment.filter { !$0.key.hasPrefix("PUSH_") }
            env.merge(environment) { $1 }
            process.environment = env
            let out = Pipe()
            let err = Pipe()
            process.standardOutput = out
            process.standardError = err
            // Without a pipe of its own the child would share the test runner's stdin.
            process.standardInput = stdin ?? FileHandle.nullDevice
            do {
                try process.run()
                return Started(process: process, stdout: out, stderr: err)
            } catch let error as NSError where attempt < 20 && isTextFileBusy(error) {
                Thread.sleep(forTimeInterval: 0.05)
            }
        }
        fatalError("unreachable")
    }

    package static func isTextFileBusy(_ error: NSError) -> Bool {
        let underlying = error.userInfo[NSUnderlyingErrorKey] as? NSError
        return (error.domain == NSPOSIXErrorDomain && error.code == Int(ETXTBSY))
            || (underlying?.domain == NSPOSIXErrorDomain && underlying?.code == Int(ETXTBSY))
    }

    /// A running child and the pipes it writes to.
    package struct Started: @unchecked Sendable {
        package let process: Process
        package let stdout: Pipe
        package let stderr: Pipe
    }

    /// Reads both pipes to their end at once (a child that fills one while we wait on the other would
    /// never finish) and waits for the exit — on threads of their own: blocking the concurrency pool,
    /// which has only as many threads as cores, would starve every other test (and the servers the
    /// children talk to) running beside this one.
    /// A child still running after `limit` is killed and its result says so, so that a hung child fails its
    /// test instead of hanging the suite.
    package static func finish(_ started: Started, limit: Duration = .seconds(120)) async -> Result {
        let killed = NIOLockedValueBox(false)
        let watchdog = Task {
            try await Task.sleep(for: limit)
            killed.withLockedValue { $0 = true }
            kill(started.process.processIdentifier, SIGKILL)
        }
        defer { watchdog.cancel() }
        let result = await collect(started)
        guard killed.withLockedValue({ $0 }) else { return result }
        return Result(
            status: -1, stdout: result.stdout, stderr: "killed: still running after \(limit)\n" + result.stderr,
            signal: SIGKILL)
    }

    /// Everything a pipe carries until its writer closes it, read so that a signal landing in the read (a child
    /// exiting) retries it: Foundation's `readDataToEndOfFile()` stops the whole test process instead.
    package static func drain(_ pipe: Pipe) -> Data {
        (try? FileDescriptorRead.toEnd(pipe.fileHandleForReading.fileDescriptor)) ?? Data()
    }

    private static func collect(_ started: Started) async -> Result {
        async let stderr = blocking { drain(started.stderr) }
        let stdout = await blocking { drain(started.stdout) }
        let errors = await stderr
        let (status, signaled) = await blocking { () -> (Int32, Bool) in
            started.process.waitUntilExit()
            return (started.process.terminationStatus, started.process.terminationReason == .uncaughtSignal)
        }
        return Result(
            status: status, stdout: String(decoding: stdout, as: UTF8.self),
            stderr: String(decoding: errors, as: UTF8.self),
            signal: signaled ? status : nil)
    }

    package static func run(_ name: String, _ arguments: [String], environment: [String: String] = [:]) async throws
        -> Result
    {
        await finish(try start(name, arguments, environment: environment))
    }

    /// Runs `body` on a new thread and resumes with its value.
    private static func blocking<T: Sendable>(_ body: @escaping @Sendable () -> T) async -> T {
        await withCheckedContinuation { continuation in
            Thread.detachNewThread { continuation.resume(returning: body()) }
        }
    }
}

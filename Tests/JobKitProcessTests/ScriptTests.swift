import Foundation
import JobKitTestSupport
import Testing

/// The scripts the suite and the benchmarks stand on.
@Suite struct ScriptTests {
    static let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
        .deletingLastPathComponent()

    /// A TERM for scripts/with-postgres (a CI timeout, a killed run) reaches its command, and the throwaway
    /// server is stopped and its data deleted then, not once the command happens to end.
    @Test func aTerminatedWithPostgresStopsItsCommandAndLeavesNoServerBehind() async throws {
        let work = FileManager.default.temporaryDirectory.appendingPathComponent("with-postgres-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: work, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: work) }
        // The script runs under a shell that sends it TERM once its command has started, then gives it 30 s
        // before a KILL. The test runner's children inherit SIGTERM ignored (hence KILL for the guard), and a
        // shell cannot trap a signal ignored when it started: `env --default-signal` gives the script the
        // disposition it has under a CI runner or a terminal.
        let harness = #"""
            env --default-signal=TERM "$SCRIPT" bash -c 'touch "$WORK/started"; exec sleep 600 >/dev/null 2>&1' \
                2>"$WORK/stderr" &
            script=$!
            for _ in $(seq 1200); do [ -e "$WORK/started" ] && break; sleep 0.1; done
            [ -e "$WORK/started" ] || { echo "never started"; exit 1; }
            kill -TERM "$script"
            ( sleep 30; kill -KILL "$script" ) &
            guard=$!
            wait "$script"
            echo "status=$?"
            pkill -KILL -P "$guard"
            kill -KILL "$guard"
            exit 0
            """#
        let result = await Executables.finish(
            try Executables.start(
                executable: URL(fileURLWithPath: "/bin/bash"), ["-c", harness],
                environment: [
                    "SCRIPT": Self.root.appendingPathComponent("scripts/with-postgres").path, "WORK": work.path,
                ]))
        let stderr = (try? String(contentsOf: work.appendingPathComponent("stderr"), encoding: .utf8)) ?? ""
        // 143: the command ended by the TERM passed on; 137 would be the guard's KILL after 30 s of waiting.
        #expect(result.stdout == "status=143\n", "\(result.stdout)\(result.stderr)\(stderr)")
        let data = try #require(stderr.firstMatch(of: /data in (\S+)\)/).map { String($0.1) }, "\(stderr)")
        #expect(!FileManager.default.fileExists(atPath: data), "\(data) left behind")
    }
}

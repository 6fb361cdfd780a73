import Foundation
import PackagePlugin

/// Writes `BuildCommit.swift` (`buildCommit`: `git describe --tags --always --dirty` of the package's checkout,
/// empty outside one) before every build, so that `--version` of a development build names its commit. The file
/// is rewritten only when the text changes: an unchanged commit recompiles nothing.
@main
struct BuildCommit: BuildToolPlugin {
    func createBuildCommands(context: PluginContext, target: Target) throws -> [Command] {
        let output = context.pluginWorkDirectoryURL.appending(path: "generated")
        let script = """
            set -e
            mkdir -p "$1"
            commit=$(git -C "$2" describe --tags --always --dirty 2>/dev/null | tr -cd 'A-Za-z0-9._-' || true)
            text="package let buildCommit = \\"$commit\\""
            if [ ! -f "$1/BuildCommit.swift" ] || [ "$(cat "$1/BuildCommit.swift")" != "$text" ]; then
                printf '%s\\n' "$text" > "$1/BuildCommit.swift"
            fi
            """
        return [
            .prebuildCommand(
                displayName: "The build's commit (git describe)", executable: URL(fileURLWithPath: "/bin/sh"),
                arguments: ["-c", script, "build-commit", output.path, context.package.directoryURL.path],
                outputFilesDirectory: output)
        ]
    }
}

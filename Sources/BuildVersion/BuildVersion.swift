import JobKitCore

/// What every executable's `--version` prints: the release, and in a build from a git checkout that is not
/// exactly the release's tag, the commit it was built from (`0.10.0 (v0.10.0-3-g1a2b3c4-dirty)`), so that two
/// development builds of one release can be told apart.
package enum BuildVersion {
    package static var text: String {
        buildCommit.isEmpty || buildCommit == "v" + JobKitVersion.current
            ? JobKitVersion.current : "\(JobKitVersion.current) (\(buildCommit))"
    }
}

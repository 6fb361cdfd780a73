/// The release of diary-push (every executable's `--version`, the Debian package, the changelog). A test checks
/// it against the newest entry of CHANGELOG.md.
package enum JobKitVersion {
    package static let current = "0.10.0"
}

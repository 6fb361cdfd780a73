import Foundation
import JobKitTestSupport
import Testing

@testable import JobKit

@Suite struct AtomicFileTests {
    private func mode(_ path: String) throws -> Int {
        try (FileManager.default.attributesOfItem(atPath: path)[.posixPermissions] as? NSNumber)?.intValue ?? -1
    }

    /// A file it creates has exactly the mode asked for, whatever the umask; one that is already there (another
    /// process created it a moment before: the database file two first runs open at once, an outbox) is kept as
    /// it is. It was given the mode: a file its owner had opened to a group lost that.
    @Test func createSetsTheModeOfAFileItCreatesOnly() throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("atomic-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: directory) }
        let created = directory.appendingPathComponent("new").path
        // 0o666, which the usual umask (022) would cut to 0o644. The umask is the process's, so the test leaves it.
        try AtomicFile.create(created, mode: 0o666)
        #expect(try mode(created) == 0o666)

        let existing = directory.appendingPathComponent("existing").path
        #expect(FileManager.default.createFile(atPath: existing, contents: Data("kept".utf8)))
        try FileManager.default.setAttributes([.posixPermissions: 0o644], ofItemAtPath: existing)
        try AtomicFile.create(existing, mode: 0o600)
        #expect(try mode(existing) == 0o644)
        #expect(try String(contentsOfFile: existing, encoding: .utf8) == "kept")
    }
}

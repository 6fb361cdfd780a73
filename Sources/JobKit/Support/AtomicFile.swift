import Foundation

#if canImport(Glibc)
    import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif

/// Files written with errno kept (open(2), fchmod(2), rename(2): `FileManager.createFile`'s Bool loses it), and
/// replaced whole: written beside their path under a temporary name, flushed, then renamed over it, so
/// that a reader (a metrics scraper, a web server, a job reading a secret) never sees half of one, and a failed
/// write leaves the previous file, or none, and no temporary file.
package enum AtomicFile {
    /// Replaces the file at `path` with `data`. `mode` is set exactly, whatever the umask (`nil`: the umask
    /// decides, as for any file a command writes). A failure throws what the system said (``systemReason(_:)``
    /// states it).
    package static func replace(_ path: String, with data: Data, mode: mode_t? = nil) throws {
        let url = URL(fileURLWithPath: path)
        let temporary = url.deletingLastPathComponent()
            .appendingPathComponent(".\(url.lastPathComponent).\(getpid()).tmp").path
        do {
            let descriptor = open(temporary, O_WRONLY | O_CREAT | O_TRUNC, mode ?? 0o666)
            guard descriptor >= 0 else { throw lastError() }
            let handle = FileHandle(fileDescriptor: descriptor, closeOnDealloc: true)
            defer { try? handle.close() }
            if let mode { guard fchmod(descriptor, mode) == 0 else { throw lastError() } }
            try handle.write(contentsOf: data)
            try handle.synchronize()
            guard rename(temporary, path) == 0 else { throw lastError() }
        } catch {
            unlink(temporary)
            throw error
        }
    }

    /// Creates an empty file with exactly `mode`. One that another process created at the same moment is kept as
    /// it is, mode included: no failure. Throws what the system said.
    package static func create(_ path: String, mode: mode_t) throws {
        let descriptor = open(path, O_WRONLY | O_CREAT | O_EXCL, mode)
        guard descriptor >= 0 else {
            if errno == EEXIST { return }
            throw lastError()
        }
        defer { close(descriptor) }
        guard fchmod(descriptor, mode) == 0 else { throw lastError() }
    }

    /// The error of the system call that just failed.
    private static func lastError() -> POSIXError { POSIXError(POSIXErrorCode(rawValue: errno) ?? .EIO) }
}

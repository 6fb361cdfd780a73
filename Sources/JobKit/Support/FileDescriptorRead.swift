import Foundation

#if canImport(Glibc)
    import Glibc
#elseif canImport(Musl)
    import Musl
#elseif canImport(Darwin)
    import Darwin
#endif

/// Reads from a file descriptor as `read(2)` does, retrying a read a signal interrupted (`EINTR`).
///
/// Foundation's `FileHandle.availableData` and `readDataToEndOfFile()` stop the process with a fatal error when a
/// signal lands during the read (swift-corelibs-foundation, `FileHandle.swift:231`), and `readToEnd()` throws it as
/// a failure; a job that handles SIGTERM, or a test process whose children exit, sees such signals.
package enum FileDescriptorRead {
    /// Up to 64 KiB that are there now, waiting for some if none are; empty only at the end of the input.
    package static func some(_ descriptor: Int32) throws(JobError) -> Data {
        var buffer = [UInt8](repeating: 0, count: 65_536)
        while true {
            let count = buffer.withUnsafeMutableBytes { read(descriptor, $0.baseAddress, $0.count) }
            if count >= 0 { return Data(buffer[0..<count]) }
            if errno == EINTR { continue }
            throw .noInput(String(cString: strerror(errno)))
        }
    }

    /// Everything until the end of the input.
    package static func toEnd(_ descriptor: Int32) throws(JobError) -> Data {
        var all = Data()
        while true {
            let chunk = try some(descriptor)
            if chunk.isEmpty { return all }
            all.append(chunk)
        }
    }
}

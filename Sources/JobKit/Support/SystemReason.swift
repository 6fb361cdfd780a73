import Foundation

/// What the system said about a failed file operation ("No space left on device", "File too large"), where
/// Foundation's own text is "The operation could not be completed. (NSCocoaErrorDomain error 512.)".
package func systemReason(_ error: any Error) -> String {
    let error = error as NSError
    let posix = error.domain == NSPOSIXErrorDomain ? error : error.userInfo[NSUnderlyingErrorKey] as? NSError
    guard let posix, posix.domain == NSPOSIXErrorDomain else { return error.localizedDescription }
    return String(cString: strerror(Int32(posix.code)))
}

/// The bytes of a file a job is given to read (a key, a service account, a catalog, an event, a password), or a
/// ``JobError/noInput(_:)`` that names it and says why: "cannot read the APNs key file /k.p8: No such file or
/// directory" (or "Permission denied", "Is a directory").
package func readInputFile(_ path: String, what: String) throws(JobError) -> Data {
    let handle: FileHandle
    do {
        handle = try FileHandle(forReadingFrom: URL(fileURLWithPath: path))
    } catch {
        throw .noInput("cannot read \(what) \(path): \(systemReason(error))")
    }
    defer { try? handle.close() }
    do {
        return try FileDescriptorRead.toEnd(handle.fileDescriptor)
    } catch {
        throw .noInput("cannot read \(what) \(path): \(error.message)")
    }
}

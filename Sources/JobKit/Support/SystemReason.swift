import Foundation

/// What the system said about a failed file operation ("No space left on device", "File too large"), where
/// Foundation's own text is "The operation could not be completed. (NSCocoaErrorDomain error 512.)".
package func systemReason(_ error: any Error) -> String {
    let error = error as NSError
    let posix = error.domain == NSPOSIXErrorDomain ? error : error.userInfo[NSUnderlyingErrorKey] as? NSError
    guard let posix, posix.domain == NSPOSIXErrorDomain else { return error.localizedDescription }
    return String(cString: strerror(Int32(posix.code)))
}

import Foundation

/// What the system said about a failed file operation ("No space left on device", "File too large"), where
/// Foundation's own text is "The operation could not be completed. (NSCocoaErrorDomain error 512.)".
func systemReason(_ error: any Error) -> String {
    let error = error as NSError
    for candidate in [error, error.userInfo[NSUnderlyingErrorKey] as? NSError]
    where candidate?.domain == NSPOSIXErrorDomain {
        return String(cString: strerror(Int32(candidate!.code)))
    }
    return error.localizedDescription
}

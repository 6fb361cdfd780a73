import NIOCore
import NIOPosix
import NIOSSL

#if canImport(Glibc)
    import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif

/// A connection error in words an operator can act on: TLS failures name the TLS reason (a certificate not
/// signed by a trusted CA, one that does not name the host, an alert the server ended the handshake with);
/// anything else is described as it is, cut short. The senders' connections and the PostgreSQL store's both say
/// it so.
package enum ConnectionErrorText {
    /// Why a TLS handshake failed.
    package enum TLSFailure: Sendable, Hashable {
        /// The certificate does not name the host (or address) connected to.
        case hostname
        /// The certificate was not accepted: BoringSSL's reason (CERTIFICATE_VERIFY_FAILED, …).
        case notAccepted(reason: String)
        /// The server ended the handshake with an alert (TLSV1_ALERT_UNKNOWN_CA: it did not trust our client
        /// certificate, …).
        case refusedByServer(alert: String)
    }

    /// The TLS failure `error` is, or nil for any other error.
    package static func tlsFailure(_ error: any Error) -> TLSFailure? {
        if let extra = error as? NIOSSLExtraError, extra == .failedToValidateHostname {
            return .hostname
        }
        guard error is NIOSSLError || error is BoringSSLError || error is NIOSSLExtraError else { return nil }
        // BoringSSL's reason is the upper-case word after "OPENSSL_internal:" (CERTIFICATE_VERIFY_FAILED, …).
        let text = String(describing: error)
        var reason = "handshake failed"
        if let range = text.range(of: "OPENSSL_internal:") {
            let word = text[range.upperBound...].prefix { $0.isUppercase || $0.isNumber || $0 == "_" }
            if !word.isEmpty { reason = String(word) }
        }
        // An alert the peer sent is named so by BoringSSL (SSLV3_ALERT_…, TLSV1_ALERT_…); one we send is not.
        if reason.hasPrefix("TLSV1_ALERT_") || reason.hasPrefix("SSLV3_ALERT_") {
            return .refusedByServer(alert: reason)
        }
        return .notAccepted(reason: reason)
    }

    package static func describe(_ error: any Error) -> String {
        switch tlsFailure(error) {
        case .hostname: "TLS: the server's certificate does not name the host"
        case .notAccepted(let reason): "TLS: the server's certificate was not accepted (\(reason))"
        case .refusedByServer(let alert): "TLS: the server refused the handshake (\(alert))"
        case nil: unreachable(error) ?? String(String(describing: error).prefix(200))
        }
    }

    /// Why a connection could not be made, as the system says it ("Connection refused"), for each address the
    /// name resolved to (once for addresses that said the same); nil for an error that is not one of these.
    private static func unreachable(_ error: any Error) -> String? {
        if let error = error as? IOError { return String(cString: strerror(error.errnoCode)) }
        guard let error = error as? NIOConnectionError else { return nil }
        var reasons: [String] = []
        for failure in error.connectionErrors {
            let reason = describe(failure.error)
            if !reasons.contains(reason) { reasons.append(reason) }
        }
        if reasons.isEmpty, error.dnsAError != nil || error.dnsAAAAError != nil {
            return "cannot resolve \(error.host)"
        }
        return reasons.isEmpty ? nil : reasons.joined(separator: "; ")
    }
}

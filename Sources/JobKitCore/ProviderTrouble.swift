/// Due work a provider left undelivered in one run, by provider and cause: devices left for the next runs
/// because the provider refused our credentials, or could not be reached or kept failing (unreachable, TLS,
/// 5xx, timeouts). Every job's summary carries them; the exit code, the error line and the log lines are
/// derived from them (``ProviderTrouble/exitCode(_:)``), so that cron, Lambda and an operator see a failure
/// the run itself survived.
public struct ProviderTrouble: Sendable, Codable, Hashable {
    public enum Cause: String, Sendable, Codable, Hashable {
        /// The provider refused our credentials (APNs 403, FCM 401/403, an OAuth refusal): a person must act.
        case credentials
        /// The provider could not be reached, or answered only transient errors.
        case unavailable
        /// The provider called a large share of the tokens dead for a reason that also means this sender is set up
        /// wrong (a topic of another app, sandbox tokens sent to production, a service account of another Firebase
        /// project): the devices are kept and held (``DeadTokenGuard``); a person must fix the setting.
        case misconfigured
    }

    /// Distinct reasons kept per trouble, the first seen.
    public static let reasonsKept = 3

    /// The provider, or the outbox when writing it failed.
    public let provider: DeliveryChannel
    public let cause: Cause
    public var devices: Int
    /// The first distinct reasons, as the provider or the transport gave them.
    public var reasons: [String]

    public init(provider: DeliveryChannel, cause: Cause, devices: Int = 0, reasons: [String] = []) {
        self.provider = provider
        self.cause = cause
        self.devices = devices
        self.reasons = reasons
    }

    /// Counts one device left pending for `cause`, keeping the first few distinct reasons.
    public static func add(
        provider: DeliveryChannel, cause: Cause, reason: String?, to troubles: inout [ProviderTrouble]
    ) {
        let index: Int
        if let found = troubles.firstIndex(where: { $0.provider == provider && $0.cause == cause }) {
            index = found
        } else {
            troubles.append(ProviderTrouble(provider: provider, cause: cause))
            index = troubles.count - 1
        }
        troubles[index].devices += 1
        if let reason, troubles[index].reasons.count < reasonsKept, !troubles[index].reasons.contains(reason) {
            troubles[index].reasons.append(reason)
        }
    }

    /// `a` and `b` together.
    public static func merge(_ a: [ProviderTrouble], _ b: [ProviderTrouble]) -> [ProviderTrouble] {
        var merged = a
        for trouble in b {
            if let index = merged.firstIndex(where: { $0.provider == trouble.provider && $0.cause == trouble.cause }) {
                merged[index].devices += trouble.devices
                for reason in trouble.reasons
                where merged[index].reasons.count < reasonsKept && !merged[index].reasons.contains(reason) {
                    merged[index].reasons.append(reason)
                }
            } else {
                merged.append(trouble)
            }
        }
        return merged.sorted { ($0.provider.rawValue, $0.cause.rawValue) < ($1.provider.rawValue, $1.cause.rawValue) }
    }

    /// The sysexits code of a run that did all it could and left these: 0 when nothing was left for a provider
    /// reason; 77 (EX_NOPERM) when a provider refused our credentials; 78 (EX_CONFIG) when its answers say the
    /// sender is set up wrong; otherwise 69 (EX_UNAVAILABLE).
    public static func exitCode(_ troubles: [ProviderTrouble]) -> Int32 {
        if troubles.contains(where: { $0.cause == .credentials && $0.devices > 0 }) { return 77 }
        if troubles.contains(where: { $0.cause == .misconfigured && $0.devices > 0 }) { return 78 }
        if troubles.contains(where: { $0.devices > 0 }) { return 69 }
        return 0
    }

    /// The provider's name as people write it.
    public var providerName: String { provider.displayName }

    /// One sentence: what happened, how many devices, the first reasons.
    public var summary: String {
        let reasonText = reasons.isEmpty ? "" : " (\(reasons.joined(separator: "; ")))"
        let count = "\(devices) device\(devices == 1 ? "" : "s")"
        switch cause {
        case .credentials:
            return "\(providerName) refused our credentials: \(count) left for the next runs\(reasonText)"
        case .unavailable: return "\(providerName) was unavailable: \(count) left for the next runs\(reasonText)"
        case .misconfigured:
            return
                "\(providerName) called \(count) not this sender's\(reasonText), too many to believe: kept active and held, none deactivated; \(advice)"
        }
    }

    /// The reasons of a provider's "too many requests" (HTTP 429): throttling, not a network fault.
    static let throttleReasons: Set<String> = ["TooManyRequests", "QUOTA_EXCEEDED", "RESOURCE_EXHAUSTED", "HTTP 429"]

    /// Whether every reason kept is a throttle.
    var isThrottle: Bool { !reasons.isEmpty && reasons.allSatisfy { Self.throttleReasons.contains($0) } }

    /// What an operator should do about it: the channel's own advice (each provider's is in its descriptor), else
    /// what any provider's trouble of this cause calls for.
    public var advice: String {
        let text = reasons.joined(separator: " ").lowercased()
        if let own = provider.advice?(cause, text, isThrottle) { return own }
        switch cause {
        case .credentials:
            return "check the provider's credentials"
        case .misconfigured:
            return
                "check that the devices' tokens are this provider's and this project's: a device's provider stored wrong (APNs tokens as FCM), or PUSH_FCM_SERVICE_ACCOUNT_FILE of another Firebase project"
        case .unavailable where text.contains("certificate") || text.contains("tls") || text.contains("hostname"):
            return
                "the provider's TLS certificate was not accepted: check the endpoint's host name, PUSH_CA_FILE, and any proxy that intercepts TLS"
        case .unavailable:
            return
                "check the network path to the provider (DNS, firewall, proxy, NAT) and its status page; the devices are retried by the next runs inside the catch-up window"
        }
    }
}

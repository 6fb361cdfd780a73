/// What a transient failure says about whom: one device, the provider's answers, or the way to the provider.
/// It decides whether devices left pending make a run fail (``ProviderTrouble/judge(_:attempts:threshold:)``).
public enum TransientScope: String, Sendable, Codable, Hashable, CaseIterable {
    /// The provider answered about this device alone: APNs `429 TooManyRequests` (too many notifications to one
    /// device token), FCM's per-device message rate. Never an outage, however many.
    case device
    /// The provider answered with a transient error of its own (a 5xx, FCM's project quota): an outage only above
    /// a share of the provider's attempts in the run (``OutageThreshold``).
    case provider
    /// No answer: the connection could not be made or was lost, TLS failed, the OAuth endpoint could not be
    /// reached, a request went unanswered. Always an outage.
    case connection
    /// The provider called the token dead for a reason that also means this sender is set up wrong (``DeadTokenGuard``),
    /// for too many of its answers in the run to believe: the device is kept, held, and the run fails with the
    /// setting to check (78). Never an outage.
    case sender
}

/// Where device-level trouble ends and a provider outage begins: the provider failed in a run when its devices
/// left pending by its own transient answers (``TransientScope/provider``) are at least `minDevices` *and* more than
/// `sharePercent` % of its attempts in the run, or are every one of its attempts, however few (a small app's
/// outage). A few 5xx among many deliveries are retried quietly; a provider answering 5xx to a large part of them
/// is down.
public struct OutageThreshold: Sendable, Codable, Hashable {
    /// Percent of the provider's attempts in the run (0–100).
    public var sharePercent: Int
    public var minDevices: Int

    public static let `default` = OutageThreshold(
        sharePercent: ConfigKey.outageShare.number!.default, minDevices: ConfigKey.outageMinDevices.number!.default)
    public static let sharePercentRange = ConfigKey.outageShare.number!.range
    public static let minDevicesRange = ConfigKey.outageMinDevices.number!.range

    public init(sharePercent: Int, minDevices: Int) {
        self.sharePercent = sharePercent
        self.minDevices = minDevices
    }

    /// Whether `devices` pending of `attempts` make an outage: over the share and the count, or all of them.
    public func isOutage(devices: Int, attempts: Int) -> Bool {
        guard devices > 0 else { return false }
        return devices >= attempts || (devices >= minDevices && devices * 100 > sharePercent * attempts)
    }
}

/// Devices a run left for later runs because of a transient answer, by provider, reason and scope: counted in
/// the summary (`pending[…]`), the metrics (`diary_push_run_devices_pending_retry`) and one log line per reason.
public struct PendingDevices: Sendable, Codable, Hashable {
    public let provider: DeliveryChannel
    public let reason: String
    public let scope: TransientScope
    public var devices: Int

    public init(provider: DeliveryChannel, reason: String, scope: TransientScope, devices: Int) {
        self.provider = provider
        self.reason = reason
        self.scope = scope
        self.devices = devices
    }

    /// The most distinct reasons kept per provider; more are counted under ``otherReasons``, so that a provider
    /// writing a new text into every answer cannot grow the summary or the metrics without bound.
    public static let reasonsKept = 8
    public static let otherReasons = "other"

    /// Counts one device of `provider` left pending for `reason`.
    public static func add(
        provider: DeliveryChannel, reason: String?, scope: TransientScope, to pending: inout [PendingDevices]
    ) {
        var reason = reason ?? "unknown"
        if let index = pending.firstIndex(where: { $0.provider == provider && $0.reason == reason && $0.scope == scope }
        ) {
            pending[index].devices += 1
            return
        }
        if pending.filter({ $0.provider == provider }).count >= reasonsKept { reason = otherReasons }
        if let index = pending.firstIndex(where: { $0.provider == provider && $0.reason == reason && $0.scope == scope }
        ) {
            pending[index].devices += 1
        } else {
            pending.append(PendingDevices(provider: provider, reason: reason, scope: scope, devices: 1))
        }
    }

    /// `a` and `b` together, ordered by provider, reason and scope.
    public static func merge(_ a: [PendingDevices], _ b: [PendingDevices]) -> [PendingDevices] {
        var merged = a
        for entry in b {
            if let index = merged.firstIndex(where: {
                $0.provider == entry.provider && $0.reason == entry.reason && $0.scope == entry.scope
            }) {
                merged[index].devices += entry.devices
            } else {
                merged.append(entry)
            }
        }
        return merged.sorted {
            ($0.provider.rawValue, $0.reason, $0.scope.rawValue) < ($1.provider.rawValue, $1.reason, $1.scope.rawValue)
        }
    }
}

extension ProviderTrouble {
    /// The run-level verdict on what a run left pending: the troubles it already has (credentials refused, no
    /// connection), plus an `unavailable` trouble for each provider whose own transient answers left more devices
    /// pending than `threshold` allows of its `attempts` in the run. Devices pending for device-level reasons
    /// (throttles) never make a trouble; they are retried by the next runs and counted in `pending`.
    public static func judge(
        _ troubles: [ProviderTrouble], pending: [PendingDevices], attempts: [DeliveryChannel: Int],
        threshold: OutageThreshold
    ) -> [ProviderTrouble] {
        var judged = troubles
        let answered = pending.filter { $0.scope == .provider }
        for provider in Set(answered.map(\.provider)) {
            let mine = answered.filter { $0.provider == provider }
            let devices = mine.reduce(0) { $0 + $1.devices }
            guard threshold.isOutage(devices: devices, attempts: attempts[provider] ?? devices) else { continue }
            let reasons = Array(mine.sorted { $0.devices > $1.devices }.map(\.reason).prefix(reasonsKept))
            judged = merge(
                judged, [ProviderTrouble(provider: provider, cause: .unavailable, devices: devices, reasons: reasons)])
        }
        return judged
    }
}

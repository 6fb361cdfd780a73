import Logging

/// The marks of the ``DeadTokenGuard``, written alike by every job that sends: the devices it held, and the release
/// of a provider's marks once its answers in a run are healthy.
enum HeldDevices {
    /// The holds among these answers (`reports[i]` answers `devices[i]`): devices a provider called dead for a reason
    /// that here means a misconfiguration (``TransientScope/sender``).
    static func holds(_ devices: [Device], _ reports: [DeliveryReport]) -> [DeviceHold] {
        zip(devices, reports).compactMap { device, report in
            guard report.outcome == .retryLater, report.scope == .sender else { return nil }
            return DeviceHold(deviceID: device.id, provider: device.provider, reason: report.reason ?? "unknown")
        }
    }

    /// The providers whose answers in a run were healthy: something delivered and nothing held. Their marks go.
    static func healthy(_ outcomes: [DeliveryChannel: [DeliveryOutcome: Int]], troubles: [ProviderTrouble])
        -> [Provider]
    {
        Provider.all.filter { provider in
            let channel = DeliveryChannel(provider)
            return (outcomes[channel]?[.delivered] ?? 0) > 0
                && !troubles.contains { $0.provider == channel && $0.cause == .misconfigured }
        }
    }

    /// Writes `holds`, then releases the marks of the `healthy` providers. Best effort: the devices are active
    /// either way, and a mark is what explain and the report say; a failure is a warning.
    static func record(
        _ holds: [DeviceHold], releasing healthy: [Provider] = [], store: any DeviceHolds, runID: String, now: Int64,
        logger: Logger
    ) async {
        do throws(JobError) {
            try await store.holdDevices(holds, runID: runID, now: now)
            for provider in healthy {
                let released = try await store.releaseHeldDevices(provider: provider)
                if released > 0 {
                    logger.notice(
                        "held devices released: the provider's answers are healthy again",
                        metadata: ["provider": "\(provider)", "devices": "\(released)"])
                }
            }
        } catch {
            logger.warning("held devices not marked", metadata: ["error": "\(error.message)"])
        }
    }
}

import Logging

extension ProviderTrouble {
    /// Why a report leaves its device for a later run, if it does: credentials refused, or the provider
    /// unavailable. Final outcomes (delivered, dead token, rejected) are no trouble of the provider's.
    package static func cause(of report: DeliveryReport) -> Cause? {
        switch report.outcome {
        case .credentials: .credentials
        case .retryLater where report.scope == .sender: .misconfigured
        case .retryLater: .unavailable
        case .delivered, .tokenDead, .rejected: nil
        }
    }

    /// Counts `report`'s device if it was left for a later run: in `pending` by reason when a transient answer
    /// left it, and in `troubles` at once when the provider refused our credentials, could not be reached
    /// (``TransientScope/connection``) or called it dead for a reason that here means a misconfiguration
    /// (``TransientScope/sender``). A device the provider answered transiently about (a throttle, a 5xx)
    /// becomes a trouble only through ``conclude(_:pending:outcomesByProvider:threshold:)``, at the end of the run.
    static func add(
        _ report: DeliveryReport, to troubles: inout [ProviderTrouble], pending: inout [PendingDevices]
    ) {
        guard let cause = cause(of: report) else { return }
        if report.outcome == .retryLater {
            PendingDevices.add(provider: report.channel, reason: report.reason, scope: report.scope, to: &pending)
            guard report.scope == .connection || report.scope == .sender else { return }
        }
        add(provider: report.channel, cause: cause, reason: report.reason, to: &troubles)
    }

    /// The troubles a run (or a hook invocation, or the janitor's probes) ends with: `troubles`, plus each
    /// provider whose own transient answers left more devices pending than `threshold` allows of its attempts
    /// (``judge(_:pending:attempts:threshold:)``).
    package static func conclude(
        _ troubles: [ProviderTrouble], pending: [PendingDevices],
        outcomesByProvider: [DeliveryChannel: [DeliveryOutcome: Int]], threshold: OutageThreshold
    ) -> [ProviderTrouble] {
        let attempts = outcomesByProvider.mapValues { $0.values.reduce(0, +) }
        return judge(troubles, pending: pending, attempts: attempts, threshold: threshold)
    }

    /// The error a run that left these reports to cron and Lambda (after printing its summary); nil when it
    /// left nothing for a provider reason.
    package static func failure(_ troubles: [ProviderTrouble]) -> JobError? {
        let message = "due work left undelivered: " + troubles.map(\.summary).joined(separator: "; ")
        switch exitCode(troubles) {
        case 77: return .noPermission(message)
        case 78: return .config(message)
        case 69: return .unavailable(message)
        default: return nil
        }
    }

    /// One error line per provider and cause: the count, the first reasons and what to do.
    static func log(_ troubles: [ProviderTrouble], logger: Logger) {
        for trouble in troubles where trouble.devices > 0 {
            logger.error(
                "\(trouble.summary)",
                metadata: [
                    "provider": "\(trouble.provider)", "cause": "\(trouble.cause.rawValue)",
                    "devices": "\(trouble.devices)",
                    "reasons": .array(trouble.reasons.map { "\($0)" }), "advice": "\(trouble.advice)",
                ])
        }
    }
}

extension PendingDevices {
    /// One line per provider and reason for the devices left pending that are no provider's trouble (a
    /// throttle, a few 5xx): a warning, not an error, since the next runs retry them and nothing is wrong with
    /// the provider. Devices a trouble covers are in its error line already.
    static func log(_ pending: [PendingDevices], troubles: [ProviderTrouble], logger: Logger) {
        for entry in pending where entry.devices > 0 {
            let covered = troubles.contains {
                $0.provider == entry.provider && $0.cause == (entry.scope == .sender ? .misconfigured : .unavailable)
            }
            guard !covered else { continue }
            logger.warning(
                "\(entry.provider.displayName) left \(entry.devices) device\(entry.devices == 1 ? "" : "s") pending retry (\(entry.reason)): retried by the next runs inside the catch-up window",
                metadata: [
                    "provider": "\(entry.provider)", "reason": "\(entry.reason)", "scope": "\(entry.scope.rawValue)",
                    "devices": "\(entry.devices)",
                ])
        }
    }
}

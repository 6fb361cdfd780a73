import Logging

extension ProviderTrouble {
    /// Why a report leaves its device for a later run, if it does: credentials refused, or the provider
    /// unavailable. Final outcomes (delivered, dead token, rejected) are no trouble of the provider's.
    public static func cause(of report: DeliveryReport) -> Cause? {
        switch report.outcome {
        case .credentials: .credentials
        case .retryLater: .unavailable
        case .delivered, .tokenDead, .rejected: nil
        }
    }

    /// Counts `report`'s device if it was left for a later run.
    static func add(_ report: DeliveryReport, to troubles: inout [ProviderTrouble]) {
        guard let cause = cause(of: report) else { return }
        add(provider: report.channel, cause: cause, reason: report.reason, to: &troubles)
    }

    /// The error a run that left these reports to cron and Lambda (after printing its summary); nil when it
    /// left nothing for a provider reason.
    public static func failure(_ troubles: [ProviderTrouble]) -> JobError? {
        let message = "due work left undelivered: " + troubles.map(\.summary).joined(separator: "; ")
        switch exitCode(troubles) {
        case 77: return .noPermission(message)
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

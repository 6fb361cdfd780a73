/// A sent page's answers, counted and resolved: each device's record, each claim's resolution
/// (``DeliveryLifecycle/resolution(previouslyDelivered:outcomes:)``) and the counts the summaries show. The reminder
/// run and the hook's quota warnings both turn their answers into records this way.
struct PageAnswers {
    /// One claim of the page: its log row, its period, and how many devices an earlier run of it reached.
    struct Claim {
        let logID: Int64
        let period: String
        let reachedBefore: Int
    }

    var outcomes: [DeliveryOutcome: Int] = [:]
    var byChannel: [DeliveryChannel: [DeliveryOutcome: Int]] = [:]
    var troubles: [ProviderTrouble] = []
    var pending: [PendingDevices] = []
    /// One per report, in order.
    var records: [DeliveryRecord] = []
    /// One per claim, in order.
    var statuses: [ClaimStatus] = []
    var resolutions: [ClaimResolution] = []

    /// - Parameters:
    ///   - owners: the claim (an index of `claims`) each notification belongs to.
    ///   - reports: the sender's answer for each notification.
    ///   - noDevice: the detail recorded for a claim that had no device to send to and none reached before.
    init(
        claims: [Claim], notifications: [OutgoingNotification], owners: [Int], reports: [DeliveryReport],
        noDevice: String
    ) {
        var byClaim = Array(repeating: [DeliveryOutcome](), count: claims.count)
        records.reserveCapacity(reports.count)
        for (i, report) in reports.enumerated() {
            outcomes[report.outcome, default: 0] += 1
            byChannel[report.channel, default: [:]][report.outcome, default: 0] += 1
            ProviderTrouble.add(report, to: &troubles, pending: &pending)
            byClaim[owners[i]].append(report.outcome)
            records.append(
                DeliveryRecord(logID: claims[owners[i]].logID, deviceID: notifications[i].device.id, report: report))
        }
        for (index, claim) in claims.enumerated() {
            let status = DeliveryLifecycle.resolution(
                previouslyDelivered: claim.reachedBefore, outcomes: byClaim[index])
            statuses.append(status)
            resolutions.append(
                ClaimResolution(
                    logID: claim.logID, period: claim.period, status: status,
                    detail: byClaim[index].isEmpty && claim.reachedBefore == 0 ? noDevice : nil))
        }
    }
}

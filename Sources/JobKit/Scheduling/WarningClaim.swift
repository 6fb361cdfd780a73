/// Claiming a quota warning: the one algorithm both stores run, step by step, inside one transaction that has
/// checked the user exists. Each ``Step`` is a store primitive on one `notification_logs` row (an
/// insert-if-absent, a conditional transition, an existence check); the store answers it and ``next(after:_:)``
/// decides what follows. The stores spell the SQL of each step; what the steps are, their order and what each
/// answer means live here.
///
/// The order of a period's two warnings is ``DeliveryLifecycle/warningOrder(_:period:logs:staleBefore:)``'s: claiming
/// the 100 % warning first supersedes the 90 % one (recording it `superseded` if it never existed, so that it
/// never will), and a 90 % warning whose period has a 100 % row is not claimed.
package struct WarningClaim: Sendable {
    package enum Step: Sendable, Hashable {
        /// Record the lower warning of the period `superseded`: insert it so (detail ``DeliveryLifecycle/neverSentDetail``)
        /// when absent, else update it so (detail ``DeliveryLifecycle/overtakenDetail``) when
        /// ``DeliveryLifecycle/canSupersede(_:)`` allows. Answer ``Answer/done``.
        case supersede(NotificationType)
        /// Whether the period's row of this type exists. Answer ``Answer/exists(_:)``.
        case exists(NotificationType)
        /// Insert the warning's row with `status` unless the (user, type, period) row exists. Answer
        /// ``Answer/inserted(_:)`` with the new row's id, or nil.
        case insert(status: ClaimStatus)
        /// Claim the warning's existing row where ``DeliveryLifecycle/canTakeOver(_:staleBefore:)`` allows:
        /// `claimed`, this run, one more attempt. Answer ``Answer/tookOver(_:)``.
        case takeOver
    }

    package enum Answer: Sendable, Hashable {
        case done
        case exists(Bool)
        case inserted(Int64?)
        case tookOver(TakenOver?)
    }

    /// The row a take-over claimed, with what an earlier claim stored.
    package struct TakenOver: Sendable, Hashable {
        let id: Int64
        let messageIndex: Int?
        let locale: String?
        let params: String?

        package init(id: Int64, messageIndex: Int?, locale: String?, params: String?) {
            self.id = id
            self.messageIndex = messageIndex
            self.locale = locale
            self.params = params
        }
    }

    /// Where a step leads: another step, or the claim's result (nil: nothing claimed).
    package enum Outcome: Sendable, Hashable {
        case step(Step)
        case claimed(LimitClaim?)
    }

    package let warning: QuotaWarning
    /// When quiet hours end: the warning is stored `deferred` until then, and an existing row is left alone.
    package let deliverAfter: Int64?

    package init(_ warning: QuotaWarning, deliverAfter: Int64?) {
        self.warning = warning
        self.deliverAfter = deliverAfter
    }

    /// The status a new row is inserted with.
    package var insertedStatus: ClaimStatus { deliverAfter == nil ? .claimed : .deferred }

    package var first: Step {
        if let lower = DeliveryLifecycle.overtakes(warning.type) { return .supersede(lower) }
        if let higher = DeliveryLifecycle.overtakenBy(warning.type) { return .exists(higher) }
        return .insert(status: insertedStatus)
    }

    package func next(after step: Step, _ answer: Answer) -> Outcome {
        switch (step, answer) {
        case (.supersede, _), (.exists, .exists(false)):
            return .step(.insert(status: insertedStatus))
        case (.exists, _):
            return .claimed(nil)
        case (.insert, .inserted(let id?)):
            return .claimed(LimitClaim(PendingWarning(logID: id, warning: warning), deferred: deliverAfter != nil))
        case (.insert, _):
            // The row exists: a deferred warning leaves it as it is; one due now may take it over.
            return deliverAfter == nil ? .step(.takeOver) : .claimed(nil)
        case (.takeOver, .tookOver(let row?)):
            let resumed = warning.resumed(messageIndex: row.messageIndex, locale: row.locale, params: row.params)
            return .claimed(LimitClaim(PendingWarning(logID: row.id, warning: resumed), deferred: false))
        case (.takeOver, _):
            return .claimed(nil)
        }
    }
}

/// One due user's way through a reminder run's rules, in the run's order, for the run and explain alike:
///
/// 1. the decision on what the candidate query read (an active device, an entry that day, the log):
///    ``ReminderDecision/decide(hasActiveDevice:wroteToday:log:staleBefore:)``;
/// 2. for a user it passes, with their history, the pause (``DiaryReminderRunner/pauseStep(_:of:from:takeOver:_:)``)
///    and the words (``DiaryReminderRunner/words(_:last:locale:userID:period:previousIndex:learned:history:)``):
///    ``DiaryReminderRunner/choose(_:userID:locale:type:period:previousIndex:history:learned:pauseFrom:_:)``;
/// 3. the devices the run would send to: ``deviceSkip(active:deliverable:)``.
///
/// The run reads the history between 1 and 2 for a whole page, and the devices between 2 and 3; explain reads
/// them for its one user. Either way the same values go through the same steps, so explain says what a run does.
struct ReminderPlan: Sendable, Equatable {
    /// Step 1.
    let decision: ReminderDecision
    /// Step 2's pause: `.remind` until it is taken.
    private(set) var pause: DiaryReminderRunner.PauseStep = .remind
    /// Step 2's words: `nil` until it is taken, and for a paused user.
    private(set) var choice: CopyChoice?

    init(_ decision: ReminderDecision) { self.decision = decision }

    /// Why the run passes the user over before looking at their devices; `nil`: it asks for a claim.
    var skip: SkipReason? {
        if case .skip(let reason) = decision { return reason }
        return pause == .paused ? .paused : nil
    }

    /// Whether the claim is an earlier run's, taken over.
    var takesOver: Bool {
        if case .takeOver = decision { return true }
        return false
    }

    /// The claim step 2 asks for; `nil` for a user passed over or a plan step 2 has not seen.
    func request(userID: String, type: NotificationType, period: String) -> ClaimRequest? {
        guard skip == nil, let choice else { return nil }
        var request = ClaimRequest(
            userID: userID, type: type, period: period, messageIndex: choice.index, locale: choice.locale)
        if case .last(let record) = pause { request.pause = record }
        return request
    }

    /// Step 3: why a claimed user gets nothing for their devices, `active` (read with the claim) of which
    /// `deliverable` are of a provider this run is configured for; `nil` when some are.
    static func deviceSkip(active: [Device], deliverable: [Device]) -> SkipReason? {
        guard deliverable.isEmpty else { return nil }
        return active.isEmpty ? .noActiveDevice : .noConfiguredProvider
    }

    fileprivate mutating func take(_ pause: DiaryReminderRunner.PauseStep, _ choice: CopyChoice?) {
        self.pause = pause
        self.choice = choice
    }
}

extension DiaryReminderRunner {
    /// Step 2 of a ``ReminderPlan`` that step 1 passed: the pause, then (unless paused) the words; a plan step 1
    /// passed over is returned as it is. `pauseFrom`: the pause rule's first period, when the caller has it.
    func choose(
        _ plan: ReminderPlan, userID: String, locale: String, type: NotificationType, period: String,
        previousIndex: Int?, history: ReminderHistory?, learned: [String: [Int: MessageOutcome]]?,
        pauseFrom: String? = nil, _ options: ReminderRunOptions
    ) -> ReminderPlan {
        guard plan.skip == nil else { return plan }
        var plan = plan
        let pause = Self.pauseStep(history, of: period, from: pauseFrom, takeOver: plan.takesOver, options)
        guard pause != .paused else {
            plan.take(pause, nil)
            return plan
        }
        let last: Bool
        if case .last = pause { last = true } else { last = false }
        plan.take(
            pause,
            words(
                type, last: last, locale: locale, userID: userID, period: period, previousIndex: previousIndex,
                learned: learned, history: history))
        return plan
    }
}

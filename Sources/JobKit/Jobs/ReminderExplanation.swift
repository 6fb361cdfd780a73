import Foundation

/// Why one user would or would not be reminded at an instant: each rule with its value and verdict.
package struct ReminderExplanation: Sendable, Codable, Hashable {
    package struct Step: Sendable, Codable, Hashable {
        package let rule: String
        package let value: String
        /// `true` passes, `false` fails, `nil` is information.
        package let ok: Bool?
    }

    /// Where one active device of the user stands in the claim of this period.
    package struct DeviceState: Sendable, Codable, Hashable {
        /// Provider, platform and the masked token.
        package let device: String
        /// `delivered`, `pending` (failed transiently or for credentials: sent again by a later run inside the
        /// window), `final` (dead token or rejected: never sent again), `not_sent` (no attempt recorded) or
        /// `missed` (pending or not sent when the window closed: no run sends to it for this period).
        package let state: String
        package let lastOutcome: String?
        package let attempts: Int
        package let lastRun: String?
        package let lastAt: String?
    }

    /// A quota warning of the user not finished yet (held for quiet hours, left for retry, or claimed), and what
    /// a run at this instant does with it.
    package struct WarningState: Sendable, Codable, Hashable {
        package let type: String
        package let period: String
        package let status: String
        package let fate: String
    }

    package let userID: String
    package let now: String
    package var steps: [Step] = []
    /// The user's active devices in this period's claim (empty when there is no claim).
    package var devices: [DeviceState] = []
    package var due = false
    package var verdict = ""
    /// The reason the user is not reminded (`nil` when due).
    package var skipReason: SkipReason?
    /// The words of the reminder: the claim's, or those a run at this instant chooses (`nil` before the rules that
    /// place the reminder in a period pass).
    package struct Words: Sendable, Codable, Hashable {
        package let locale: String
        package let messageIndex: Int
    }
    package var words: Words?
    /// The ids of the devices a run at this instant sends to: the active devices of providers it is configured
    /// for (empty when it sends nothing).
    package var sendsTo: [Int64] = []
    /// The user's unfinished quota warnings (a run delivers them after its reminders).
    package var quotaWarnings: [WarningState] = []

    mutating func step(_ rule: String, _ value: String, _ ok: Bool?) {
        steps.append(Step(rule: rule, value: value, ok: ok))
    }

    /// One line a step. A value read from the database (a zone, a reminder time) has its control characters
    /// escaped, so that it stays on its step's line.
    package var text: String {
        let width = (steps.map(\.rule.count).max() ?? 0) + 2
        var lines = ["explain \(LineText.field(userID)) at \(now)"]
        for step in steps {
            let mark = step.ok.map { $0 ? "ok  " : "FAIL" } ?? "    "
            lines.append("  \(mark) \(step.rule.padding(toLength: width, withPad: " ", startingAt: 0))\(step.value)")
        }
        lines.append("verdict: \(verdict)")
        for warning in quotaWarnings {
            lines.append("quota warning \(warning.type) \(warning.period) (\(warning.status)): \(warning.fate)")
        }
        return lines.map(LineText.escapingControls).joined(separator: "\n")
    }
}

extension DiaryReminderRunner {
    /// Explains the decision for one user at `options.now`, reading only. The same rules as ``run(_:)``: the
    /// reminder's, then what the run does with each of the user's unfinished quota warnings.
    ///
    /// `localDate`: "why no reminder that day?": explained at that local date's slot, in the user's zone and at
    /// their reminder time (the instant nobody has to work out), or at `options.now` when the user has no zone or
    /// time to place it by (the steps then say which).
    package func explain(userID: String, options: ReminderRunOptions, localDate: LocalDate? = nil)
        async throws(JobError) -> ReminderExplanation
    {
        var options = options
        options.dryRun = true  // reads only: the learned words' counted days are counted, never recorded
        var placed: ReminderExplanation.Step?
        if let localDate {
            let slot = try await slotInstant(userID: userID, on: localDate)
            if let slot { options.now = slot }
            placed = .init(
                rule: "local date",
                value: slot.map { "\(localDate): that day's slot, \(Timestamps.format($0))" }
                    ?? "\(localDate): no zone and reminder time to place it by; explained at \(Timestamps.format(options.now))",
                ok: nil)
        }
        var explanation = try await explainReminder(userID: userID, options: options)
        if let placed { explanation.steps.insert(placed, at: 0) }
        if let warnings {
            // Every period key a warning the run still reads (claimed within a day) can have: this year's and
            // last year's, monthly or annual.
            let floor = LocalDate.pad(ZoneClock.split(wallSeconds: options.now - 2 * 86_400).date.year - 1, 4)
            if let user = try await warnings.limitSnapshot(userID: userID, periodsFrom: floor) {
                explanation.quotaWarnings = ReminderExplanation.warningStates(
                    user, now: options.now, staleBefore: options.now - options.claimLeaseSeconds,
                    shard: options.shard)
            }
        }
        return explanation
    }

    /// The instant `userID`'s reminder of the local date `date` is due: their reminder time on that date in their
    /// zone (the gap and overlap rules of ``ZoneClock``); nil when they have no valid zone, settings or time.
    package func slotInstant(userID: String, on date: LocalDate) async throws(JobError) -> Int64? {
        guard let user = try await store.userSnapshot(userID: userID), let settings = user.settings,
            let zone = ZoneClock(identifier: user.timezone), let reminder = LocalTime(settings.reminderTime)
        else { return nil }
        return zone.instant(on: date, minuteOfDay: reminder.minuteOfDay)
    }

    private func explainReminder(userID: String, options: ReminderRunOptions) async throws(JobError)
        -> ReminderExplanation
    {
        var explanation = ReminderExplanation(userID: userID, now: Timestamps.format(options.now))
        func finish(_ reason: SkipReason?, _ verdict: String) -> ReminderExplanation {
            explanation.skipReason = reason
            explanation.due = reason == nil
            explanation.verdict = verdict
            return explanation
        }
        guard let user = try await store.userSnapshot(userID: userID) else {
            let orphans = try await store.orphanedRows(userID: userID)
            guard orphans.isEmpty else {
                throw .dataError(
                    "unknown user \(LineText.quoted(userID)), but \(orphans.description) of that id remain (written with foreign keys off, before migration 014): no run reads them; delete them or write the users row (docs/SCHEMA.md)"
                )
            }
            if let waiting = try await store.notPushUser(userID: userID) {
                throw .unknownUser(userID, why: waiting.why)
            }
            throw .unknownUser(userID)
        }
        explanation.step(
            "rule window", "early \(options.rule.early / 60) min, catch-up \(options.rule.catchUp / 60) min", nil)
        // As the run does, before any rule: a user of another shard is that shard's run's to remind.
        if options.shard.count > 1 {
            let owner = Shard.holding(userID: userID, count: options.shard.count)
            explanation.step("shard", "\(owner) (this run is \(options.shard))", owner == options.shard)
            if owner != options.shard {
                return finish(.otherShard, "not reminded by this run: shard \(owner) handles this user")
            }
        }
        guard let settings = user.settings else {
            explanation.step("notification settings", "no notification_settings row", false)
            return finish(.noSettings, "not reminded: the user has no notification settings")
        }
        explanation.step(
            "1. reminders enabled", settings.diaryReminderEnabled ? "yes" : "no", settings.diaryReminderEnabled)
        let devices = user.activeDevices.map(ReminderExplanation.describe)
        explanation.step(
            "1. active devices", devices.isEmpty ? "none" : "\(devices.count): " + devices.joined(separator: ", "),
            !devices.isEmpty)
        // As the run does: a device of a provider this run has no credentials for is skipped.
        let unreachable = user.activeDevices.filter { !sender.canDeliver(to: $0.provider) }
        if !unreachable.isEmpty {
            let providers = Set(unreachable.map(\.provider.rawValue)).sorted().joined(separator: ", ")
            explanation.step(
                "1. configured providers",
                "\(unreachable.count) device(s) of \(providers), not configured for this run: skipped",
                unreachable.count < devices.count)
        }
        // Devices the dead-token guard holds (``DeadTokenGuard``): active, and sent to, but worth saying.
        let holds = try await ledger.heldDevices(userID: userID)
        if !holds.isEmpty {
            let listed = holds.map { hold in
                "device \(hold.deviceID) (\(hold.provider) \(hold.reason)\(hold.heldAt.map { " since " + Timestamps.format($0) } ?? ""))"
            }
            explanation.step(
                "1. held devices",
                "\(holds.count): " + listed.joined(separator: ", ")
                    + ": the provider called them dead when most of its answers said so (a setting to fix, exit 78); kept active and retried, released by the first run with healthy answers",
                true)
        }
        guard let zone = ZoneClock(identifier: user.timezone) else {
            explanation.step("2. time zone", "\"\(user.timezone)\" is not an IANA zone this system knows", false)
            return finish(.invalidTimezone, "not reminded: unknown time zone")
        }
        explanation.step(
            "2. time zone", "\(user.timezone) (\(Timestamps.offset(zone.offset(at: options.now))) now)", true)
        guard let reminder = LocalTime(settings.reminderTime) else {
            explanation.step("2. reminder time", "\"\(settings.reminderTime)\" is not HH:MM", false)
            return finish(.invalidReminderTime, "not reminded: malformed reminder time")
        }
        explanation.step("2. reminder time", "\(reminder) local", true)
        explanation.step("2. local time now", Timestamps.local(options.now, in: zone), nil)
        let timing = options.rule.timing(now: options.now, reminder: reminder, in: zone)
        let at = "\(Timestamps.local(timing.reminderAt, in: zone)) = \(Timestamps.format(timing.reminderAt))"
        switch timing.state {
        case .due:
            explanation.step(
                "2. reminder time has come",
                "due since \(at); window \(Timestamps.format(timing.reminderAt - options.rule.early)) … \(Timestamps.format(timing.reminderAt + options.rule.catchUp)) (exclusive)",
                true)
        case .notYet:
            explanation.step(
                "2. reminder time has come",
                "not yet: next at \(at) (from \(Timestamps.format(timing.reminderAt - options.rule.early)))", false)
        case .passed:
            explanation.step(
                "2. reminder time has come",
                "passed: was \(at), window closed at \(Timestamps.format(timing.reminderAt + options.rule.catchUp))",
                false)
        }
        let day = zone.dayBounds(timing.period)
        let entries = try await store.entryCount(userID: userID, in: day)
        explanation.step(
            "3. diary entry that local day",
            entries == 0
                ? "none"
                : "\(entries) between \(Timestamps.format(day.lowerBound)) and \(Timestamps.format(day.upperBound))",
            entries == 0)
        explanation.step("4. period key", timing.period.description, nil)
        let log = try await store.logState(userID: userID, type: .diaryReminder, period: timing.period.description)
        let logValue = log.map { "\($0.status) by run \($0.runID) at \(Timestamps.format($0.claimedAt))" } ?? "none"
        let staleBefore = options.now - options.claimLeaseSeconds
        let decision = ReminderDecision.decide(
            hasActiveDevice: !devices.isEmpty, wroteToday: entries > 0, log: log,
            staleBefore: staleBefore)
        let logOK: Bool
        switch decision {
        case .skip(.alreadyReminded), .skip(.claimInProgress), .skip(.unknownClaimState): logOK = false
        default: logOK = true
        }
        let windowEnd = Timestamps.format(timing.reminderAt + options.rule.catchUp)
        let takenOver = log != nil && logOK && timing.state == .due
        explanation.step("4. notification log", logValue + (takenOver ? " (will be taken over)" : ""), logOK)
        var attempts: [DeliveryAttempt] = []
        if let log {
            attempts = try await store.deliveryAttempts(logID: log.id)
            explanation.devices = ReminderExplanation.deviceStates(
                user.activeDevices, attempts: attempts,
                // A claim the window closed on is `retry` or `claimed` until a run closes it (``MissedReminders``),
                // `partial` or `failed` after.
                windowClosed: timing.state == .passed && [.retry, .claimed, .partial, .failed].contains(log.status))
            let described = explanation.devices.map { device in
                let last =
                    device.lastOutcome.map {
                        " (\($0), \(device.attempts) attempt\(device.attempts == 1 ? "" : "s"), run \(device.lastRun ?? "?") at \(device.lastAt ?? "?"))"
                    } ?? ""
                let state =
                    switch device.state {
                    case "pending": "pending, sent again by the runs until \(windowEnd)"
                    case "missed": "missed: the window closed at \(windowEnd)"
                    default: device.state.replacingOccurrences(of: "_", with: " ")
                    }
                return "\(device.device): \(state)\(last)"
            }
            explanation.step(
                "4. devices of the claim", described.isEmpty ? "no active device" : described.joined(separator: "; "),
                nil)
        }
        var pausedText = ""
        let period = timing.period.description
        // The history the run reads with the candidate: the pause rule's look-back and the learned words' recency.
        var history: ReminderHistory?
        if readsHistory(options) {
            let key = historyKey(userID: userID, period: period, options)
            history = try await store.reminderHistory([key])[key] ?? ReminderHistory()
        }
        // The words a claim recorded are what a run sends; only without them does it choose, reading the previous
        // words with the candidate and the learned counts for the period.
        let recorded = log.flatMap { log in
            log.messageIndex.flatMap { index in log.locale.map { (locale: $0, index: index) } }
        }
        var previous: Int?
        var learnedCounts: [String: [Int: MessageOutcome]]?
        if recorded == nil {
            previous = try await store.previousMessageIndex(
                userID: userID, type: .diaryReminder, in: DueQuery.previousPeriods(before: period))
            learnedCounts = try await learnedOutcomes(period: period, options)
        }
        // The run's plan (``ReminderPlan``), steps 1 and 2, on what explain read.
        let plan = choose(
            ReminderPlan(decision), userID: userID, locale: user.locale, type: .diaryReminder, period: period,
            previousIndex: previous, history: history, learned: learnedCounts, options)
        // For a user step 1 passes over, the pause a claim would meet, to say where they stand.
        var pause = plan.pause
        if case .skip = plan.decision, options.pause.isOn {
            pause = DiaryReminderRunner.pauseStep(
                history ?? ReminderHistory(), of: period, takeOver: log != nil, options)
        }
        if options.pause.isOn {
            let history = history ?? ReminderHistory()
            let from = options.pause.lookBack(before: period).lowerBound
            let limit = "pause after \(options.pause.afterIgnored)"
            switch (pause, options.pause.verdict(history, period: period, from: from)) {
            case (.paused, .paused(let record)):
                pausedText = "paused since \(record.period) after \(record.ignored) ignored reminders"
                explanation.step(
                    "5. ignored reminders",
                    "paused since \(record.period) (\(Timestamps.format(record.pausedAt))) after \(record.ignored) ignored reminders, until they write or change their reminder settings",
                    false)
            case (.last(let record), _):
                explanation.step(
                    "5. ignored reminders",
                    "\(record.ignored) in a row (\(limit)): this is the last reminder, and says so; none after it until they write or change their reminder settings",
                    true)
            case (_, .remind(let ignored)):
                explanation.step(
                    "5. ignored reminders", "\(ignored) in a row since their last entry or settings change (\(limit))",
                    true)
            default:
                explanation.step("5. ignored reminders", "\(limit)", true)
            }
        }
        if let recorded {
            let kind = pause == .remind ? CopyKind.diaryReminder : .diaryReminderLast
            let message = catalog.recordedMessage(
                kind, locale: recorded.locale, index: recorded.index, userID: userID, period: period)
            let gone = catalog.message(kind, locale: recorded.locale, index: recorded.index) == nil
            explanation.words = .init(locale: recorded.locale, messageIndex: recorded.index)
            explanation.step(
                "copy",
                "recorded in the claim: \(recorded.locale) #\(recorded.index)\(gone ? " (not in this catalog: its own choice instead)" : ""): \"\(message.title)\" / \"\(message.body)\"",
                nil)
        } else {
            let last = pause != .remind
            let choice =
                plan.choice
                ?? words(
                    .diaryReminder, last: last, locale: user.locale, userID: userID, period: period,
                    previousIndex: previous, learned: learnedCounts, history: history)
            explanation.words = .init(locale: choice.locale, messageIndex: choice.index)
            let learned =
                last
                ? ""
                : catalog.learning.map {
                    $0.isHeldOut(userID: userID, period: period) ? " (uniform: held out of learning)" : " (learned)"
                } ?? ""
            let missing = catalog.languageWithoutWords(user.locale, for: .diaryReminder).map {
                " (the catalog has no \($0) words)"
            }
            explanation.step(
                "copy",
                "locale \(user.locale) → \(choice.locale)\(missing ?? "") #\(choice.index)\(learned) (previous #\((last ? nil : previous).map(String.init) ?? "none")): \"\(choice.message.title)\" / \"\(choice.message.body)\"",
                nil)
        }

        // The verdict in the run's order: the due set's own rules (reminders on, the time come), then the plan's.
        if !settings.diaryReminderEnabled { return finish(.disabled, "not reminded: diary reminders are off") }
        switch timing.state {
        case .due: break
        case .notYet:
            let from = Timestamps.format(timing.reminderAt - options.rule.early)
            return finish(.notDue, "not reminded: the reminder time has not come (due from \(from))")
        case .passed:
            guard log != nil else { return finish(.notDue, "not reminded: the window closed at \(windowEnd)") }
            let missed = explanation.devices.filter { $0.state == "missed" }.count
            let reached = explanation.devices.filter { $0.state == "delivered" }.count
            let closed = "the window closed at \(windowEnd)"
            return finish(
                .notDue,
                missed > 0
                    ? "not reminded: \(closed) with \(missed) device(s) not reached (\(reached) reached)"
                    : "not reminded again: \(closed) (\(reached) device(s) reached)")
        }
        if let reason = plan.skip {
            if reason == .paused { return finish(.paused, "not reminded: \(pausedText)") }
            return finish(reason, "not reminded: \(reason.rawValue.replacingOccurrences(of: "_", with: " "))")
        }
        let reachable = user.activeDevices.filter { sender.canDeliver(to: $0.provider) }
        if let reason = ReminderPlan.deviceSkip(active: user.activeDevices, deliverable: reachable) {
            return finish(
                reason,
                reason == .noConfiguredProvider
                    ? "not reminded: no device of a provider configured for this run" : "not reminded: no active device"
            )
        }
        guard case .takeOver(let earlier) = plan.decision else {
            // A new claim (``ReminderPlan/skip`` covered the decision's skips).
            explanation.sendsTo = reachable.map(\.id)
            if case .last = plan.pause {
                return finish(
                    nil,
                    "due: would get the last reminder now on \(reachable.count) device(s), then none until they write or change their reminder settings"
                )
            }
            return finish(nil, "due: would be reminded now on \(reachable.count) device(s)")
        }
        let delivered = Set(attempts.filter { $0.outcome == .delivered }.compactMap(\.deviceID))
        explanation.sendsTo = DeliveryLifecycle.devicesToSend(reachable, alreadyDelivered: delivered).map(\.id)
        let open = explanation.devices.filter { $0.state == "pending" || $0.state == "not_sent" }.count
        let reached = explanation.devices.filter { $0.state == "delivered" }.count
        if earlier.status == .retry {
            return finish(
                nil,
                "due: would send again to \(open) pending device(s) with the same collapse id (\(reached) already reached)"
            )
        }
        return finish(
            nil,
            "due: would take over the earlier run's unfinished claim (\(open) device(s) not reached yet, \(reached) reached)"
        )
    }
}

extension ReminderExplanation {
    /// What a run at `now` does with each of the user's unfinished quota warnings, by period then type: the
    /// rows the run reads (``ContentLimitStore/pendingWarnings(now:staleBefore:afterID:limit:)``) decided by its
    /// rule (``ContentLimitRule/fate(of:user:now:staleBefore:)``). Under `--shard`, the run of the user's shard is
    /// the one that does it, as it is the one that reminds them.
    static func warningStates(_ user: LimitSnapshot, now: Int64, staleBefore: Int64, shard: Shard = .all)
        -> [WarningState]
    {
        let owner = Shard.holding(userID: user.userID, count: shard.count)  // `.all` when unsharded
        let (run, notThis) = owner == shard ? ("a run", "") : ("the run of shard \(owner)", ", not this one")
        return user.logs.sorted { ($0.key.period, $0.key.type.rawValue) < ($1.key.period, $1.key.type.rawValue) }
            .compactMap { key, log in
                guard DeliveryLifecycle.unfinished.contains(log.status) else { return nil }
                let fate: String
                if DeliveryLifecycle.isMissed(log, now: now) {
                    fate = "missed: no run sends it a day after its claim (\(Timestamps.format(log.claimedAt)))"
                } else if !DeliveryLifecycle.canClaimWarning(
                    log, deliverAfter: log.deliverAfter, now: now, staleBefore: staleBefore)
                {
                    fate =
                        log.status == .deferred
                        ? "held until \(log.deliverAfter.map(Timestamps.format) ?? "?")"
                        : "being sent by run \(log.runID) since \(Timestamps.format(log.claimedAt))"
                } else {
                    switch ContentLimitRule.fate(of: key, user: user, now: now, staleBefore: staleBefore) {
                    case .send: fate = "\(run) now sends it\(notThis)"
                    case .withdraw(let detail): fate = "\(run) now withdraws it\(notThis): \(detail)"
                    case .hold(let until):
                        fate =
                            "\(run) now holds it again until \(Timestamps.format(until)) (quiet hours as set now)\(notThis)"
                    case .waitForLowerWarning:
                        fate = "\(run) now leaves it until the 90 % warning is recorded\(notThis)"
                    }
                }
                return WarningState(
                    type: key.type.rawValue, period: key.period, status: log.status.rawValue, fate: fate)
            }
    }

    /// A device as explain names it: provider, platform, kind (``TokenKind``) and the masked value.
    static func describe(_ device: Device) -> String {
        "\(device.provider)/\(device.platform) \(device.sendingKind) \(Redaction.maskToken(device.token))"
    }

    /// Each device's state from its recorded attempts (the lifecycle decides what is final).
    static func deviceStates(_ devices: [Device], attempts: [DeliveryAttempt], windowClosed: Bool) -> [DeviceState] {
        devices.map { device in
            let mine = attempts.filter { $0.deviceID == device.id }
            let state: String
            if mine.contains(where: { $0.outcome == .delivered }) {
                state = "delivered"
            } else if let last = mine.last {
                state = DeliveryLifecycle.isFinal(last.outcome) ? "final" : windowClosed ? "missed" : "pending"
            } else {
                state = windowClosed ? "missed" : "not_sent"
            }
            return DeviceState(
                device: describe(device), state: state,
                lastOutcome: mine.last?.outcome.rawValue, attempts: mine.count, lastRun: mine.last?.runID,
                lastAt: mine.last.map { Timestamps.format($0.at) })
        }
    }

    /// One JSON object.
    package var json: String {
        JSONLine.encode(self)
    }
}

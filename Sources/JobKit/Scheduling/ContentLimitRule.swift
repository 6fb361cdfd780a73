import Foundation

/// One content write, as the app backend reports it.
public struct ContentLimitEvent: Sendable, Hashable, Codable {
    public let userID: String
    /// Items used in the current period, this write included.
    public let used: Int
    /// The plan's limit; `nil` or ≤ 0 means unlimited (a no-op).
    public let limit: Int?
    public let period: LimitPeriod

    enum CodingKeys: String, CodingKey {
        case userID = "user_id"
        case used, limit, period
    }

    public init(userID: String, used: Int, limit: Int?, period: LimitPeriod = .monthly) throws(JobError) {
        guard !userID.isEmpty else { throw .dataError("user_id is empty") }
        guard used >= 0 else { throw .dataError("used must not be negative, got \(used)") }
        self.userID = userID
        self.used = used
        self.limit = limit
        self.period = period
    }

    /// An event inside a caller's own `Decodable` payload: the same rules for each field, with the decoder's own
    /// leniency (`JSONDecoder` takes a key given twice). ``parse(json:)`` is the strict reader the jobs use.
    public init(from decoder: any Decoder) throws {
        let container = try decoder.container(keyedBy: CodingKeys.self)
        let period = try container.decodeIfPresent(String.self, forKey: .period) ?? "monthly"
        guard let kind = LimitPeriod(rawValue: period) else {
            throw DecodingError.dataCorruptedError(
                forKey: .period, in: container, debugDescription: "period must be monthly or annual")
        }
        do {
            try self.init(
                userID: try container.decode(String.self, forKey: .userID),
                used: try container.decode(Int.self, forKey: .used),
                limit: try container.decodeIfPresent(Int.self, forKey: .limit), period: kind)
        } catch let error as JobError {
            throw DecodingError.dataCorrupted(.init(codingPath: [], debugDescription: error.message))
        }
    }

    /// Parses one JSON event (`{"user_id":…, "used":…, "limit":…, "period":…}`, other keys ignored); anything
    /// else is a ``JobError/dataError(_:)`` that says what is wrong.
    public static func parse(json: Data) throws(JobError) -> ContentLimitEvent {
        let event = try JSONValue.strict(json, what: "event")
        guard event.isObject else {
            throw .dataError(#"event: not a JSON object {"user_id", "used", "limit", "period"}"#)
        }
        guard let user = event["user_id"] else { throw .dataError("event: missing user_id") }
        guard let userID = user.string else {
            throw .dataError("event: user_id must be a string, got \(user.described)")
        }
        guard let usedValue = event["used"] else { throw .dataError("event: missing used") }
        let used = try whole(usedValue, "used", "a whole number")
        var limit: Int?
        if let value = event["limit"], !value.isNull { limit = try whole(value, "limit", "a whole number or null") }
        var period = LimitPeriod.monthly
        if let value = event["period"], !value.isNull {
            guard let known = value.string.flatMap(LimitPeriod.init(rawValue:)) else {
                throw .dataError("event: period must be monthly or annual, got \(value.string ?? value.described)")
            }
            period = known
        }
        do {
            return try ContentLimitEvent(userID: userID, used: used, limit: limit, period: period)
        } catch {
            throw .dataError("event: \(error.message)")
        }
    }

    private static func whole(_ value: JSONValue, _ key: String, _ expected: String) throws(JobError) -> Int {
        switch value.wholeNumber {
        case .whole(let number): return number
        case .outOfRange: throw .dataError("event: \(key) is out of range: \(value.described)")
        case .fraction, nil: throw .dataError("event: \(key) must be \(expected), got \(value.described)")
        }
    }
}

/// What a run does with a stored quota warning (``ContentLimitRule/fate(of:user:now:staleBefore:)``).
package enum HeldWarningFate: Sendable, Hashable {
    /// Send it now.
    case send
    /// Never send it: its row is marked `superseded` with this detail.
    case withdraw(String)
    /// Its user's quiet hours, as they are set now, are in force: keep it `deferred` until they end.
    case hold(until: Int64)
    /// A 100 % warning whose period's 90 % warning is on its way: leave it for the next run.
    case waitForLowerWarning
}

/// Quota warnings, free of I/O.
package enum ContentLimitRule {
    /// The warning a usage level calls for: 100 % at or past the limit, 90 % from 90 % (integer arithmetic,
    /// no rounding), none below or for an unlimited plan.
    package static func threshold(used: Int, limit: Int?) -> NotificationType? {
        switch QuotaLevel(used: used, limit: limit) {
        case .below: nil
        case .ninetyPercent: .contentLimit90
        case .full: .contentLimit100
        }
    }

    /// `YYYY-MM` (monthly) or `YYYY` (annual) in the user's zone.
    package static func periodKey(now: Int64, zone: ZoneClock, period: LimitPeriod) -> String {
        let date = zone.wall(at: now).date
        return period == .monthly ? date.monthKey : LocalDate.pad(date.year, 4)
    }

    /// Whether the period of a stored warning (`YYYY-MM` or `YYYY`) has ended in the user's zone at `now`. The
    /// quota it speaks of has reset, so a warning still held for quiet hours or left for retry is never sent.
    package static func periodEnded(_ period: String, now: Int64, zone: ZoneClock) -> Bool {
        periodKey(now: now, zone: zone, period: period.count == 4 ? .annual : .monthly) > period
    }

    /// When quiet hours `start`–`end` (local, may span midnight) end, if `now` is inside them; `nil`
    /// otherwise (or when the two are equal: no quiet hours).
    package static func quietHoursEnd(now: Int64, zone: ZoneClock, start: LocalTime, end: LocalTime) -> Int64? {
        guard start != end else { return nil }
        let wall = zone.wall(at: now)
        let minute = wall.secondOfDay / 60
        let inside =
            start < end
            ? minute >= start.minuteOfDay && minute < end.minuteOfDay
            : minute >= start.minuteOfDay || minute < end.minuteOfDay
        guard inside else { return nil }
        let endDate = minute < end.minuteOfDay ? wall.date : wall.date.adding(days: 1)
        return zone.instant(on: endDate, minuteOfDay: end.minuteOfDay)
    }

    /// When `user`'s quiet hours end, if `now` is inside them; `nil` outside them, or when they have none (or
    /// malformed ones, which the hook reports).
    package static func quietHoursEnd(now: Int64, zone: ZoneClock, of user: LimitSnapshot) -> Int64? {
        guard let start = user.quietHoursStart.flatMap({ LocalTime($0) }),
            let end = user.quietHoursEnd.flatMap({ LocalTime($0) })
        else { return nil }
        return quietHoursEnd(now: now, zone: zone, start: start, end: end)
    }

    /// What a run does now with a quota warning held for quiet hours, left for retry or left by a hook that
    /// died, given its user as they are now (`nil`: no longer known) and the period's warning log rows.
    package static func fate(of warning: LimitLogKey, user: LimitSnapshot?, now: Int64, staleBefore: Int64)
        -> HeldWarningFate
    {
        guard let user else { return .send }  // no device to send to: recorded as such
        let zone = ZoneClock(identifier: user.timezone) ?? ZoneClock(zone: .gmt)  // the hook's period zone
        if periodEnded(warning.period, now: now, zone: zone) {
            return .withdraw("its period \(warning.period) ended before it could be sent")
        }
        guard user.warningsEnabled else { return .withdraw("warnings turned off before it could be sent") }
        if let plan = user.logs[warning]?.plan, plan != user.plan {
            // Its numbers are of a quota the user no longer has ("upgrade to keep writing" after the upgrade).
            return .withdraw("the plan changed (\(plan) → \(user.plan)) before it could be sent")
        }
        switch DeliveryLifecycle.warningOrder(
            warning.type, period: warning.period, logs: user.logs, staleBefore: staleBefore)
        {
        case .overtaken: return .withdraw("overtaken by the 100 % warning")
        case .waitForLowerWarning: return .waitForLowerWarning
        case .send: break
        }
        if let end = quietHoursEnd(now: now, zone: zone, of: user) { return .hold(until: end) }
        return .send
    }

    /// What the hook does with a write that reached `type`'s threshold, given the user as the store has them: the
    /// decision, and (`explain`) each step of it as `--explain` prints it. Free of I/O: the hook claims and sends.
    package struct Verdict: Sendable, Hashable {
        package enum Outcome: Sendable, Hashable {
            /// Nothing to send, and why.
            case nothing(String)
            /// Claim the warning of `period` and send it now, or (`deliverAfter`) hold it until quiet hours end.
            case warn(period: String, deliverAfter: Int64?)
        }
        package var outcome: Outcome = .nothing("")
        /// The period key, once known.
        package var period: String?
        package var steps: [String] = []
        /// The user's zone is not one this system knows: the period was taken in UTC.
        package var unknownZone = false
        /// The user's quiet hours are not both `HH:MM`: they were ignored.
        package var malformedQuietHours = false
    }

    package static func verdict(
        _ type: NotificationType, user: LimitSnapshot, period quota: LimitPeriod, now: Int64, staleBefore: Int64,
        explain: Bool
    ) -> Verdict {
        var verdict = Verdict()
        func step(_ text: @autoclosure () -> String) { if explain { verdict.steps.append(text()) } }
        func nothing(_ reason: String) -> Verdict {
            verdict.outcome = .nothing(reason)
            return verdict
        }
        let zone = ZoneClock(identifier: user.timezone) ?? ZoneClock(zone: .gmt)
        verdict.unknownZone = ZoneClock(identifier: user.timezone) == nil
        let period = periodKey(now: now, zone: zone, period: quota)
        verdict.period = period
        step("period: \(quota.rawValue) in \(zone.identifier) → \(period)")
        guard user.warningsEnabled else { return nothing("warnings turned off") }
        step("warnings: on")

        if DeliveryLifecycle.warningOrder(type, period: period, logs: user.logs, staleBefore: staleBefore) == .overtaken
        {
            step(
                "100 % warning this period: \(user.logs[LimitLogKey(type: .contentLimit100, period: period)]?.status.rawValue ?? "?")"
            )
            return nothing("the 100 % warning already exists this period")
        }
        if let existing = user.logs[LimitLogKey(type: type, period: period)] {
            step("\(type.rawValue) this period: \(existing.status) at \(Timestamps.format(existing.claimedAt))")
            if !DeliveryLifecycle.canTakeOver(existing, staleBefore: staleBefore) {
                return nothing("already warned this period (\(existing.status))")
            }
        } else {
            step("\(type.rawValue) this period: not yet")
        }
        guard user.hasActiveDevice else { return nothing("no active device") }
        step("active device: yes")

        let deliverAfter = quietHoursEnd(now: now, zone: zone, of: user)
        if let start = user.quietHoursStart, let end = user.quietHoursEnd {
            if LocalTime(start) != nil, LocalTime(end) != nil {
                step(
                    "quiet hours \(start)–\(end): "
                        + (deliverAfter.map { "inside, deferred until \(Timestamps.format($0))" } ?? "outside"))
            } else {
                verdict.malformedQuietHours = true
            }
        }
        verdict.outcome = .warn(period: period, deliverAfter: deliverAfter)
        return verdict
    }

    /// The numbers a warning shows.
    package static func parameters(used: Int, limit: Int) -> [String: String] {
        ["used": String(used), "limit": String(limit), "percent": String(QuotaLevel.percent(used: used, limit: limit))]
    }
}

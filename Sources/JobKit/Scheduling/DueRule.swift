/// When a daily reminder at a local time is due: the timing half of the due rule, free of I/O.
///
/// With `R` the reminder's instant on some local date `D` (see ``ZoneClock/instant(on:minuteOfDay:)``
/// for daylight-saving gaps and overlaps), the reminder for `D` is due at `now` when
/// `R − early ≤ now` and `now − R < catchUp`. `early` absorbs a cron daemon that fires a little
/// early; `catchUp` lets the next run make up for a run that was late or skipped. Because
/// `early + catchUp` is less than a day, at most one `D` is due at any instant.
package struct DueRule: Sendable, Hashable {
    /// Seconds before the reminder time at which it already counts as due.
    package let early: Int64
    /// Seconds after the reminder time during which a late run still sends it.
    package let catchUp: Int64

    package static let defaultEarlyMinutes = ConfigKey.earlyMinutes.number!.default
    package static let defaultCatchUpMinutes = ConfigKey.catchUpMinutes.number!.default
    package static let earlyMinutesRange = ConfigKey.earlyMinutes.number!.range
    package static let catchUpMinutesRange = ConfigKey.catchUpMinutes.number!.range

    package static let `default` = DueRule(
        uncheckedEarlyMinutes: defaultEarlyMinutes,
        catchUpMinutes: defaultCatchUpMinutes)

    /// Fails with a ``JobError/usage(_:)`` error when a value is outside its range: early must stay below
    /// one 15-minute cron period, and early + catch-up below a day.
    package init(earlyMinutes: Int, catchUpMinutes: Int) throws(JobError) {
        guard Self.earlyMinutesRange.contains(earlyMinutes) else {
            throw .usage(
                "early minutes must be within \(Self.earlyMinutesRange.lowerBound)…\(Self.earlyMinutesRange.upperBound), got \(earlyMinutes)"
            )
        }
        guard Self.catchUpMinutesRange.contains(catchUpMinutes) else {
            throw .usage(
                "catch-up minutes must be within \(Self.catchUpMinutesRange.lowerBound)…\(Self.catchUpMinutesRange.upperBound), got \(catchUpMinutes)"
            )
        }
        self.init(uncheckedEarlyMinutes: earlyMinutes, catchUpMinutes: catchUpMinutes)
    }

    private init(uncheckedEarlyMinutes: Int, catchUpMinutes: Int) {
        self.early = Int64(uncheckedEarlyMinutes) * 60
        self.catchUp = Int64(catchUpMinutes) * 60
    }

    /// Is a reminder whose instant is `reminderAt` due at `now`?
    @inlinable
    package func window(contains reminderAt: Int64, now: Int64) -> Bool {
        reminderAt - early <= now && now - reminderAt < catchUp
    }

    /// The timing verdict for one user's reminder time at `now`.
    package func timing(now: Int64, reminder: LocalTime, in clock: ZoneClock) -> ReminderTiming {
        let today = clock.wall(at: now).date
        // Latest date first: a reminder just after midnight reached by an early run belongs to tomorrow.
        for date in [today.adding(days: 1), today, today.adding(days: -1)] {
            let at = clock.instant(on: date, minuteOfDay: reminder.minuteOfDay)
            if window(contains: at, now: now) {
                return ReminderTiming(state: .due, period: date, reminderAt: at)
            }
        }
        let todayAt = clock.instant(on: today, minuteOfDay: reminder.minuteOfDay)
        if todayAt - early > now {
            return ReminderTiming(state: .notYet, period: today, reminderAt: todayAt)
        }
        return ReminderTiming(state: .passed, period: today, reminderAt: todayAt)
    }

    /// Every reminder minute that is due at `now` in `clock`'s zone, grouped by the local date it
    /// belongs to, as ranges of minutes of the day. The store selects with these ranges, so a run reads
    /// only users whose time has come; the result agrees exactly with ``timing(now:reminder:in:)``.
    package func dueSlots(now: Int64, in clock: ZoneClock) -> [DueSlot] {
        let start = now - catchUp  // exclusive
        let end = now + early  // inclusive
        let margin: Int64 = 3 * 3600  // larger than any daylight-saving shift
        let offset = clock.offset(at: start)
        var minutes: [(date: LocalDate, minute: Int)] = []
        if clock.offset(at: end) == offset,
            clock.offset(at: start - margin) == offset,
            clock.offset(at: end + margin) == offset
        {
            // No transition anywhere near: wall time is now + offset, and every wall minute maps to
            // exactly one instant.
            var wallMinute = Self.floorDiv(start + offset, 60) + 1
            let lastWallMinute = Self.floorDiv(end + offset, 60)
            while wallMinute <= lastWallMinute {
                let wall = ZoneClock.split(wallSeconds: wallMinute * 60)
                minutes.append((wall.date, wall.secondOfDay / 60))
                wallMinute += 1
            }
        } else {
            // Near a transition: try every wall minute that could map into the window, exactly.
            let lowOffset = min(
                offset, clock.offset(at: start - margin), clock.offset(at: end + margin),
                clock.offset(at: end))
            let highOffset = max(
                offset, clock.offset(at: start - margin), clock.offset(at: end + margin),
                clock.offset(at: end))
            var wallMinute = Self.floorDiv(start + lowOffset, 60)
            let lastWallMinute = Self.floorDiv(end + highOffset, 60) + 1
            while wallMinute <= lastWallMinute {
                let wall = ZoneClock.split(wallSeconds: wallMinute * 60)
                let minute = wall.secondOfDay / 60
                if window(contains: clock.instant(on: wall.date, minuteOfDay: minute), now: now) {
                    minutes.append((wall.date, minute))
                }
                wallMinute += 1
            }
        }
        return DueSlot.group(minutes)
    }

    @usableFromInline
    static func floorDiv(_ a: Int64, _ b: Int64) -> Int64 {
        a >= 0 ? a / b : (a - b + 1) / b
    }
}

/// The timing half of a verdict: whether the reminder time has come, for which local date, and when.
package struct ReminderTiming: Sendable, Hashable {
    package enum State: String, Sendable, Hashable {
        /// Inside the window: due for `period`.
        case due
        /// Today's reminder time minus the early allowance has not been reached.
        case notYet = "not_yet"
        /// Today's window closed (the reminder time plus catch-up has passed).
        case passed
    }

    package let state: State
    /// The local date the reminder belongs to (the period key).
    package let period: LocalDate
    /// The instant of the reminder time on `period`.
    package let reminderAt: Int64
}

/// The reminder minutes due for one local date in one zone.
package struct DueSlot: Sendable, Hashable {
    package let period: LocalDate
    /// Sorted, disjoint ranges of minutes of the day (0…1439).
    package let minuteRanges: [ClosedRange<Int>]

    static func group(_ minutes: [(date: LocalDate, minute: Int)]) -> [DueSlot] {
        var byDate: [LocalDate: [Int]] = [:]
        for entry in minutes { byDate[entry.date, default: []].append(entry.minute) }
        return byDate.keys.sorted().map { date in
            let sorted = Set(byDate[date]!).sorted()
            var ranges: [ClosedRange<Int>] = []
            for minute in sorted {
                if let last = ranges.last, last.upperBound + 1 == minute {
                    ranges[ranges.count - 1] = last.lowerBound...minute
                } else {
                    ranges.append(minute...minute)
                }
            }
            return DueSlot(period: date, minuteRanges: ranges)
        }
    }
}

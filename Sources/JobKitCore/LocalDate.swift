/// A calendar date with no time zone attached (proleptic Gregorian), as used for period keys.
///
/// Arithmetic is done on days since 1970-01-01 with Howard Hinnant's civil-date algorithms, so it is
/// exact, allocation-free and independent of `Calendar`.
package struct LocalDate: Hashable, Comparable, Sendable, CustomStringConvertible {
    package let year: Int
    package let month: Int
    package let day: Int

    package init?(year: Int, month: Int, day: Int) {
        guard (1...12).contains(month), day >= 1, day <= LocalDate.daysIn(month: month, year: year) else {
            return nil
        }
        self.year = year
        self.month = month
        self.day = day
    }

    /// The date `days` days after 1970-01-01.
    package init(daysSinceEpoch days: Int) {
        let z = days + 719_468
        let era = (z >= 0 ? z : z - 146_096) / 146_097
        let doe = z - era * 146_097
        let yoe = (doe - doe / 1460 + doe / 36524 - doe / 146_096) / 365
        let doy = doe - (365 * yoe + yoe / 4 - yoe / 100)
        let mp = (5 * doy + 2) / 153
        let d = doy - (153 * mp + 2) / 5 + 1
        let m = mp < 10 ? mp + 3 : mp - 9
        self.year = yoe + era * 400 + (m <= 2 ? 1 : 0)
        self.month = m
        self.day = d
    }

    /// Parses `YYYY-MM-DD`.
    package init?(_ text: some StringProtocol) {
        let parts = text.split(separator: "-", omittingEmptySubsequences: false)
        guard parts.count == 3, parts[0].count == 4, parts[1].count == 2, parts[2].count == 2,
            let y = Int(parts[0]), let m = Int(parts[1]), let d = Int(parts[2])
        else { return nil }
        self.init(year: y, month: m, day: d)
    }

    package var daysSinceEpoch: Int {
        let y = month <= 2 ? year - 1 : year
        let era = (y >= 0 ? y : y - 399) / 400
        let yoe = y - era * 400
        let mp = month > 2 ? month - 3 : month + 9
        let doy = (153 * mp + 2) / 5 + day - 1
        let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy
        return era * 146_097 + doe - 719_468
    }

    package func adding(days: Int) -> LocalDate {
        LocalDate(daysSinceEpoch: daysSinceEpoch + days)
    }

    /// `YYYY-MM-DD`, the period key of daily notifications.
    package var description: String {
        "\(Self.pad(year, 4))-\(Self.pad(month, 2))-\(Self.pad(day, 2))"
    }

    /// `YYYY-MM`, the period key of monthly notifications.
    package var monthKey: String { "\(Self.pad(year, 4))-\(Self.pad(month, 2))" }

    package static func < (lhs: LocalDate, rhs: LocalDate) -> Bool {
        (lhs.year, lhs.month, lhs.day) < (rhs.year, rhs.month, rhs.day)
    }

    /// Splits seconds on a wall clock (since 1970-01-01 00:00 of that clock) into a date and a second of day.
    package static func split(wallSeconds: Int64) -> (date: LocalDate, secondOfDay: Int) {
        let days = wallSeconds >= 0 ? wallSeconds / 86_400 : (wallSeconds - 86_399) / 86_400
        return (LocalDate(daysSinceEpoch: Int(days)), Int(wallSeconds - days * 86_400))
    }

    package static func daysIn(month: Int, year: Int) -> Int {
        switch month {
        case 2: return (year % 4 == 0 && year % 100 != 0) || year % 400 == 0 ? 29 : 28
        case 4, 6, 9, 11: return 30
        default: return 31
        }
    }

    package static func pad(_ value: Int, _ width: Int) -> String {
        let digits = String(value)
        return digits.count >= width ? digits : String(repeating: "0", count: width - digits.count) + digits
    }
}

/// A wall-clock time of day with minute precision (`HH:MM`, 00:00–23:59).
package struct LocalTime: Hashable, Comparable, Sendable, CustomStringConvertible {
    package let minuteOfDay: Int

    package init?(minuteOfDay: Int) {
        guard (0..<1440).contains(minuteOfDay) else { return nil }
        self.minuteOfDay = minuteOfDay
    }

    package init?(hour: Int, minute: Int) {
        guard (0..<24).contains(hour), (0..<60).contains(minute) else { return nil }
        self.minuteOfDay = hour * 60 + minute
    }

    /// Parses exactly `HH:MM` (two digits each, 00:00 to 23:59). Anything else is malformed.
    package init?(_ text: some StringProtocol) {
        let utf8 = Array(text.utf8)
        guard utf8.count == 5, utf8[2] == UInt8(ascii: ":") else { return nil }
        func digit(_ i: Int) -> Int? {
            let c = utf8[i]
            return (UInt8(ascii: "0")...UInt8(ascii: "9")).contains(c) ? Int(c - UInt8(ascii: "0")) : nil
        }
        guard let h1 = digit(0), let h2 = digit(1), let m1 = digit(3), let m2 = digit(4) else { return nil }
        self.init(hour: h1 * 10 + h2, minute: m1 * 10 + m2)
    }

    package var hour: Int { minuteOfDay / 60 }
    package var minute: Int { minuteOfDay % 60 }

    package var description: String { "\(LocalDate.pad(hour, 2)):\(LocalDate.pad(minute, 2))" }

    package static func < (lhs: LocalTime, rhs: LocalTime) -> Bool { lhs.minuteOfDay < rhs.minuteOfDay }
}

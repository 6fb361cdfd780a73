/// ISO 8601 in and out, for `--now` and for what the jobs print.
package enum Timestamps {
    /// Parses an RFC 3339 instant: `2026-11-21T20:00:00Z`, `2026-11-21T21:00:00+01:00`, with or without
    /// fractional seconds (truncated: the rules work in whole seconds). Plain arithmetic, no ICU.
    package static func parse(_ text: String) -> Int64? {
        let bytes = Array(text.utf8)
        guard bytes.count >= 20 else { return nil }
        func number(_ range: Range<Int>) -> Int? {
            var value = 0
            for i in range {
                guard i < bytes.count, (48...57).contains(bytes[i]) else { return nil }
                value = value * 10 + Int(bytes[i] - 48)
            }
            return value
        }
        guard bytes[4] == UInt8(ascii: "-"), bytes[7] == UInt8(ascii: "-"),
            bytes[10] == UInt8(ascii: "T") || bytes[10] == UInt8(ascii: "t") || bytes[10] == UInt8(ascii: " "),
            bytes[13] == UInt8(ascii: ":"), bytes[16] == UInt8(ascii: ":"),
            let year = number(0..<4), let month = number(5..<7), let day = number(8..<10),
            let hour = number(11..<13), let minute = number(14..<16), let second = number(17..<19),
            hour < 24, minute < 60, second < 61,
            let date = LocalDate(year: year, month: month, day: day)
        else { return nil }
        var i = 19
        if i < bytes.count && bytes[i] == UInt8(ascii: ".") {
            i += 1
            let start = i
            while i < bytes.count && (48...57).contains(bytes[i]) { i += 1 }
            guard i > start else { return nil }
        }
        guard i < bytes.count else { return nil }
        var offset = 0
        switch bytes[i] {
        case UInt8(ascii: "Z"), UInt8(ascii: "z"):
            guard i + 1 == bytes.count else { return nil }
        case UInt8(ascii: "+"), UInt8(ascii: "-"):
            guard i + 6 == bytes.count, bytes[i + 3] == UInt8(ascii: ":"),
                let hours = number(i + 1..<i + 3), let minutes = number(i + 4..<i + 6), hours < 24, minutes < 60
            else { return nil }
            offset = (hours * 3600 + minutes * 60) * (bytes[i] == UInt8(ascii: "-") ? -1 : 1)
        default:
            return nil
        }
        return Int64(date.daysSinceEpoch) * 86_400 + Int64(hour * 3600 + minute * 60 + min(second, 59)) - Int64(offset)
    }

    /// The instants the jobs evaluate: 2000-01-01T00:00:00Z up to (not including) 2200-01-01T00:00:00Z. Every
    /// zone's local date is then a four-digit year (the period keys' shape), and the zone rules are known.
    package static let supportedRange: Range<Int64> = 946_684_800..<7_258_118_400
    package static let supportedRangeText = "2000-01-01T00:00:00Z to 2199-12-31T23:59:59Z"

    /// `2026-11-21T20:00:00Z`.
    package static func format(_ instant: Int64) -> String {
        let wall = LocalDate.split(wallSeconds: instant)
        return "\(wall.date)T\(clock(wall.secondOfDay))Z"
    }

    package static func clock(_ secondOfDay: Int, seconds: Bool = true) -> String {
        let hm = "\(LocalDate.pad(secondOfDay / 3600, 2)):\(LocalDate.pad(secondOfDay / 60 % 60, 2))"
        return seconds ? hm + ":\(LocalDate.pad(secondOfDay % 60, 2))" : hm
    }
}

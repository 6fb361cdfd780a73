import Foundation

/// ISO 8601 in and out, for `--now` and for what the jobs print.
public enum Timestamps {
    /// Parses `2026-11-21T20:00:00Z`, `2026-11-21T21:00:00+01:00`, with or without fractional seconds.
    /// Fractions are truncated: the rules work in whole seconds.
    public static func parse(_ text: String) -> Int64? {
        let plain = ISO8601DateFormatter()
        plain.formatOptions = [.withInternetDateTime]
        if let date = plain.date(from: text) { return Int64(date.timeIntervalSince1970.rounded(.down)) }
        let fractional = ISO8601DateFormatter()
        fractional.formatOptions = [.withInternetDateTime, .withFractionalSeconds]
        if let date = fractional.date(from: text) { return Int64(date.timeIntervalSince1970.rounded(.down)) }
        return nil
    }

    /// `2026-11-21T20:00:00Z`.
    public static func format(_ instant: Int64) -> String {
        let wall = ZoneClock.split(wallSeconds: instant)
        return "\(wall.date)T\(clock(wall.secondOfDay))Z"
    }

    /// `2026-11-21 21:00 Sat` in `clock`'s zone.
    public static func local(_ instant: Int64, in zone: ZoneClock) -> String {
        let wall = zone.wall(at: instant)
        let weekday = ["Thu", "Fri", "Sat", "Sun", "Mon", "Tue", "Wed"][((wall.date.daysSinceEpoch % 7) + 7) % 7]
        return "\(wall.date) \(clock(wall.secondOfDay, seconds: false)) \(weekday)"
    }

    /// `UTC+05:45`.
    public static func offset(_ seconds: Int64) -> String {
        let sign = seconds < 0 ? "-" : "+"
        let minutes = abs(seconds) / 60
        return "UTC\(sign)\(LocalDate.pad(Int(minutes / 60), 2)):\(LocalDate.pad(Int(minutes % 60), 2))"
    }

    static func clock(_ secondOfDay: Int, seconds: Bool = true) -> String {
        let hm = "\(LocalDate.pad(secondOfDay / 3600, 2)):\(LocalDate.pad(secondOfDay / 60 % 60, 2))"
        return seconds ? hm + ":\(LocalDate.pad(secondOfDay % 60, 2))" : hm
    }
}

/// The one JSON style of everything the jobs print: one object per line, snake_case keys, sorted.
enum JSONLine {
    static func encode(_ value: some Encodable) -> String {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
        encoder.keyEncodingStrategy = .convertToSnakeCase
        guard let data = try? encoder.encode(value) else { return "{}" }
        return String(decoding: data, as: UTF8.self)
    }
}

import Foundation

/// One reminder sent, as the notification log and the entries table tell it: the raw row a store supplies for
/// ``ReminderEffect``.
/// - `remindedAt`: when the reminder went out (its claim's resolution, else its claim);
/// - `period`: the user's local date it was for (`YYYY-MM-DD`);
/// - `firstEntryAfter`: the user's first entry at or after `remindedAt` (within two days), if any;
/// - `userID`: whose reminder it was (with learned words, the report compares the held-out choices only).
package typealias ReminderOutcomeRow = (
    locale: String, messageIndex: Int, remindedAt: Int64, period: String, timezone: String, firstEntryAfter: Int64?,
    userID: String
)

/// Does the reminder work? Per locale and catalog message: how many users were reminded, and the share who
/// wrote an entry within 3 hours of the reminder, and later that local day. Messages are assigned by a stable
/// hash of user and day, so the messages of one locale are a randomised comparison; each share carries its
/// 95 % Wilson score interval, so that a difference can be told from noise. Free of I/O.
package enum ReminderEffect {
    package static let window: Int64 = 3 * 3600

    package struct Share: Sendable, Codable, Hashable {
        package let count: Int
        package let share: Double
        /// The 95 % Wilson score interval of `share`.
        package let low: Double
        package let high: Double
    }

    package struct Message: Sendable, Codable, Hashable {
        package let locale: String
        package let messageIndex: Int
        /// The message's title in the catalog, if it is still there.
        package let title: String?
        package let reminded: Int
        package let within3h: Share
        package let sameLocalDay: Share
        /// With learned words (``CopyLearning``): the message's chance of being chosen now, the held-out share
        /// included.
        package var chance: Double? = nil
    }

    /// Aggregates the rows per (locale, message), in that order.
    package static func summarize(_ rows: [ReminderOutcomeRow], title: (String, Int) -> String?) -> [Message] {
        var groups: [String: [Int: (reminded: Int, within: Int, sameDay: Int)]] = [:]
        var zones: [String: ZoneClock] = [:]
        for row in rows {
            var counts = groups[row.locale]?[row.messageIndex] ?? (0, 0, 0)
            counts.reminded += 1
            if let entry = row.firstEntryAfter {
                if entry < row.remindedAt + window { counts.within += 1 }
                let zone = zones[row.timezone] ?? ZoneClock(identifier: row.timezone) ?? ZoneClock(zone: .gmt)
                zones[row.timezone] = zone
                if let date = LocalDate(row.period) {
                    let endOfDay = zone.instant(on: date.adding(days: 1), minuteOfDay: 0)
                    if entry < endOfDay { counts.sameDay += 1 }
                }
            }
            groups[row.locale, default: [:]][row.messageIndex] = counts
        }
        return groups.keys.sorted().flatMap { locale in
            groups[locale]!.keys.sorted().map { index in
                let counts = groups[locale]![index]!
                return Message(
                    locale: locale, messageIndex: index, title: title(locale, index), reminded: counts.reminded,
                    within3h: share(counts.within, of: counts.reminded),
                    sameLocalDay: share(counts.sameDay, of: counts.reminded))
            }
        }
    }

    /// `successes` of `trials` with its 95 % Wilson score interval (z = 1.96).
    package static func share(_ successes: Int, of trials: Int) -> Share {
        guard trials > 0 else { return Share(count: 0, share: 0, low: 0, high: 0) }
        let n = Double(trials)
        let p = Double(successes) / n
        let z = 1.959964
        let denominator = 1 + z * z / n
        let center = (p + z * z / (2 * n)) / denominator
        let half = z * (p * (1 - p) / n + z * z / (4 * n * n)).squareRoot() / denominator
        return Share(count: successes, share: p, low: max(0, center - half), high: min(1, center + half))
    }
}

import Foundation

/// Converts between instants and wall-clock times in one IANA time zone, resolving the two
/// daylight-saving corner cases the way reminders need:
/// - a wall time that does not exist (spring forward gap) maps to the first instant after the gap;
/// - a wall time that occurs twice (fall back overlap) maps to its first occurrence.
///
/// Instants are whole Unix seconds (`Int64`) throughout the rules: that is the store's resolution too.
package struct ZoneClock: Sendable {
    package let zone: TimeZone
    package var identifier: String { zone.identifier }

    /// `nil` when the identifier is not a time zone this system's tz database knows.
    package init?(identifier: String) {
        guard !identifier.isEmpty, let zone = TimeZone(identifier: identifier) else { return nil }
        self.zone = zone
    }

    package init(zone: TimeZone) {
        self.zone = zone
    }

    /// Seconds east of UTC at `instant`.
    package func offset(at instant: Int64) -> Int64 {
        Int64(zone.secondsFromGMT(for: Date(timeIntervalSince1970: TimeInterval(instant))))
    }

    /// The wall clock at `instant`: the local date and the second of the local day.
    package func wall(at instant: Int64) -> (date: LocalDate, secondOfDay: Int) {
        Self.split(wallSeconds: instant + offset(at: instant))
    }

    /// The instant at which the wall clock in this zone reads `minuteOfDay` on `date`, with the
    /// gap and overlap rules above.
    package func instant(on date: LocalDate, minuteOfDay: Int) -> Int64 {
        let wall = Int64(date.daysSinceEpoch) * 86_400 + Int64(minuteOfDay) * 60
        // No zone is more than 26 hours from UTC, and no zone changes its offset twice within two
        // days, so the offsets a day either side bracket every reading of `wall`.
        let before = offset(at: wall - 86_400)
        let after = offset(at: wall + 86_400)
        let early = wall - before
        let late = wall - after
        let earlyValid = offset(at: early) == before
        let lateValid = offset(at: late) == after
        switch (earlyValid, lateValid) {
        case (true, true): return min(early, late)  // overlap (or no transition): first occurrence
        case (true, false): return early
        case (false, true): return late
        case (false, false):
            // Gap: the wall time was skipped. Find the transition (the first instant whose offset is
            // `after`) between the two candidate readings.
            var low = min(early, late)  // offset is `before` here
            var high = max(early, late)  // offset is `after` here
            while high - low > 1 {
                let mid = low + (high - low) / 2
                if offset(at: mid) == before { low = mid } else { high = mid }
            }
            return high
        }
    }

    /// The first instant of the local day `date` (usually local midnight).
    package func startOfDay(_ date: LocalDate) -> Int64 {
        instant(on: date, minuteOfDay: 0)
    }

    /// `[start, end)` of the local day `date`.
    package func dayBounds(_ date: LocalDate) -> Range<Int64> {
        startOfDay(date)..<startOfDay(date.adding(days: 1))
    }

    static func split(wallSeconds: Int64) -> (date: LocalDate, secondOfDay: Int) {
        LocalDate.split(wallSeconds: wallSeconds)
    }
}

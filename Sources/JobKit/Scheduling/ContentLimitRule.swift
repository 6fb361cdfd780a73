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

    /// Parses one JSON event (`{"user_id":…, "used":…, "limit":…, "period":…}`); anything else is a
    /// ``JobError/dataError(_:)`` that says what is wrong.
    public static func parse(json: Data) throws(JobError) -> ContentLimitEvent {
        try JSONValue.requireStrict(json, what: "event")
        do {
            return try JSONDecoder().decode(ContentLimitEvent.self, from: json)
        } catch let DecodingError.keyNotFound(key, _) {
            throw .dataError("event: missing \(key.stringValue)")
        } catch let DecodingError.typeMismatch(_, context) {
            throw .dataError(
                "event: wrong type for \(context.codingPath.map(\.stringValue).joined(separator: ".")) (user_id is a string; used and limit are whole numbers)"
            )
        } catch let DecodingError.dataCorrupted(context) {
            throw .dataError("event: \(context.debugDescription)")
        } catch {
            throw .dataError("event: not a JSON object {\"user_id\", \"used\", \"limit\", \"period\"}")
        }
    }
}

/// Quota warnings, free of I/O.
public enum ContentLimitRule {
    /// The warning a usage level calls for: 100 % at or past the limit, 90 % from 90 % (integer arithmetic,
    /// no rounding), none below or for an unlimited plan.
    public static func threshold(used: Int, limit: Int?) -> NotificationType? {
        switch QuotaLevel(used: used, limit: limit) {
        case .below: nil
        case .ninetyPercent: .contentLimit90
        case .full: .contentLimit100
        }
    }

    /// `YYYY-MM` (monthly) or `YYYY` (annual) in the user's zone.
    public static func periodKey(now: Int64, zone: ZoneClock, period: LimitPeriod) -> String {
        let date = zone.wall(at: now).date
        return period == .monthly ? date.monthKey : LocalDate.pad(date.year, 4)
    }

    /// When quiet hours `start`–`end` (local, may span midnight) end, if `now` is inside them; `nil`
    /// otherwise (or when the two are equal: no quiet hours).
    public static func quietHoursEnd(now: Int64, zone: ZoneClock, start: LocalTime, end: LocalTime) -> Int64? {
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

    /// The numbers a warning shows.
    public static func parameters(used: Int, limit: Int) -> [String: String] {
        ["used": String(used), "limit": String(limit), "percent": String(QuotaLevel.percent(used: used, limit: limit))]
    }
}

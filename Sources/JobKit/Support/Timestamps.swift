import Foundation

extension Timestamps {
    /// `2026-11-21 21:00 Sat` in `clock`'s zone.
    package static func local(_ instant: Int64, in zone: ZoneClock) -> String {
        let wall = zone.wall(at: instant)
        let weekday = ["Thu", "Fri", "Sat", "Sun", "Mon", "Tue", "Wed"][((wall.date.daysSinceEpoch % 7) + 7) % 7]
        return "\(wall.date) \(clock(wall.secondOfDay, seconds: false)) \(weekday)"
    }

    /// `UTC+05:45`.
    package static func offset(_ seconds: Int64) -> String {
        let sign = seconds < 0 ? "-" : "+"
        let minutes = abs(seconds) / 60
        return "UTC\(sign)\(LocalDate.pad(Int(minutes / 60), 2)):\(LocalDate.pad(Int(minutes % 60), 2))"
    }
}

/// The one JSON style of everything the jobs print: one object per line, snake_case keys, sorted.
package enum JSONLine {
    /// One line of JSON, keys sorted. A type's property names become snake case (`userID` → `user_id`);
    /// `verbatimKeys` keeps the keys as given (a dictionary's keys are data, not names).
    package static func encode(_ value: some Encodable, verbatimKeys: Bool = false) -> String {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
        if !verbatimKeys { encoder.keyEncodingStrategy = .convertToSnakeCase }
        guard let data = try? encoder.encode(value) else { return "{}" }
        return String(decoding: data, as: UTF8.self)
    }

    /// `value` read from JSON text with `JSONDecoder`; nil for anything that is not one.
    package static func decode<Value: Decodable>(_ type: Value.Type, from text: String) -> Value? {
        try? JSONDecoder().decode(type, from: Data(text.utf8))
    }

    /// Where a decoded document went wrong and how, by its path: `diary_reminder.en[0]: missing body`,
    /// `diary_reminder.en: expected an array` (`JSONDecoder`'s own text says neither).
    package static func problem(_ error: any Error) -> String {
        func path(_ keys: [any CodingKey]) -> String {
            let text = keys.map { $0.intValue.map { "[\($0)]" } ?? ".\($0.stringValue)" }.joined()
            return text.isEmpty ? "the document" : String(text.drop { $0 == "." })
        }
        func kind(_ type: Any.Type) -> String {
            let name = String(describing: type)
            if name.hasPrefix("Array") { return "an array" }
            if name.hasPrefix("Dictionary") || name.hasPrefix("KeyedDecodingContainer") { return "an object" }
            if name == "String" { return "a string" }
            return name
        }
        switch error as? DecodingError {
        case .typeMismatch(let type, let context): return "\(path(context.codingPath)): expected \(kind(type))"
        case .valueNotFound(let type, let context):
            return "\(path(context.codingPath)): expected \(kind(type)), found null"
        case .keyNotFound(let key, let context):
            return context.codingPath.isEmpty
                ? "missing \(key.stringValue)" : "\(path(context.codingPath)): missing \(key.stringValue)"
        case .dataCorrupted(let context): return "\(path(context.codingPath)): \(context.debugDescription)"
        default: return "\(error)"
        }
    }

    /// A JSON string literal.
    package static func quote(_ text: String) -> String {
        encode(text)
    }
}

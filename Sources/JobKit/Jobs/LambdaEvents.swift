import Foundation

/// An event as it arrives in a Lambda invocation's body.
package protocol LambdaEvent: Sendable {
    static func decode(lambdaPayload: [UInt8]) throws(JobError) -> Self
}

extension ContentLimitEvent: LambdaEvent {
    package static func decode(lambdaPayload: [UInt8]) throws(JobError) -> ContentLimitEvent {
        try parse(json: Data(lambdaPayload))
    }
}

/// An EventBridge scheduled event (a rule's `Scheduled Event`, or an EventBridge Scheduler input with
/// `"time": "<aws.scheduler.scheduled-time>"`): its `time` is the run's instant. `detail` may carry a
/// job's settings (the janitor's); a job rejects keys it does not know, so a typo is not ignored.
public struct ScheduledEvent: Sendable, Hashable, LambdaEvent {
    public enum Value: Sendable, Hashable {
        case bool(Bool)
        case int(Int)
        case string(String)
    }

    public var time: Int64
    public var detail: [String: Value]

    public init(time: Int64, detail: [String: Value] = [:]) {
        self.time = time
        self.detail = detail
    }

    package static func decode(lambdaPayload: [UInt8]) throws(JobError) -> ScheduledEvent {
        let event = try JSONValue.strict(Data(lambdaPayload), what: "event")
        let shape =
            "event: not a scheduled event (a JSON object with \"time\" and an optional \"detail\" object of booleans, numbers and strings)"
        guard event.isObject else { throw .dataError(shape) }
        guard let timeValue = event["time"], !timeValue.isNull else {
            throw .dataError(
                "event: missing \"time\" (an EventBridge Scheduler input needs \"time\": \"<aws.scheduler.scheduled-time>\")"
            )
        }
        guard let text = timeValue.string else { throw .dataError(shape) }
        var detail: [String: Value] = [:]
        if let value = event["detail"], !value.isNull {
            guard let members = value.members else { throw .dataError(shape) }
            for (key, member) in members {
                switch (member, member.wholeNumber) {
                case (.bool(let flag), _): detail[key] = .bool(flag)
                case (.string(let string), _): detail[key] = .string(string)
                case (_, .whole(let number)): detail[key] = .int(number)
                default:
                    throw .dataError(
                        "event: detail.\(key) must be true, false, a whole number or a string, got \(member.described)")
                }
            }
        }
        guard let time = Timestamps.parse(text) else {
            throw .dataError("event: \"time\" is not an ISO 8601 instant: \(LineText.field(text))")
        }
        guard Timestamps.supportedRange.contains(time) else {
            throw .dataError(
                "event: \"time\" \(LineText.field(text)) is outside the supported range, \(Timestamps.supportedRangeText)"
            )
        }
        return ScheduledEvent(time: time, detail: detail)
    }

    /// Fails when `detail` has a key outside `known`.
    package func checkDetail(known: Set<String>, job: String) throws(JobError) {
        if let unknown = detail.keys.sorted().first(where: { !known.contains($0) }) {
            let accepted = known.isEmpty ? "none" : known.sorted().joined(separator: ", ")
            throw .dataError("event: \(job) does not know detail.\(unknown) (accepted: \(accepted))")
        }
    }

    package func bool(_ key: String) throws(JobError) -> Bool? {
        switch detail[key] {
        case nil: return nil
        case .bool(let value): return value
        default: throw .dataError("event: detail.\(key) must be true or false")
        }
    }

    package func int(_ key: String, in range: ClosedRange<Int>) throws(JobError) -> Int? {
        switch detail[key] {
        case nil: return nil
        case .int(let value) where range.contains(value): return value
        default:
            throw .dataError(
                "event: detail.\(key) must be a whole number within \(range.lowerBound)…\(range.upperBound)")
        }
    }
}

import JobKit
import OpenAPIRuntime

extension JSONValue {
    /// A free-form object the generated code decoded (a webhook's row), as JobKit reads JSON.
    init(container: OpenAPIObjectContainer) {
        self = Self(any: container.value)
    }

    private init(any value: (any Sendable)?) {
        switch value {
        case nil: self = .null
        case let flag as Bool: self = .bool(flag)
        case let number as Int: self = .number(String(number))
        case let number as Double: self = .number(String(number))
        case let text as String: self = .string(text)
        case let items as [(any Sendable)?]: self = .array(items.map { JSONValue(any: $0) })
        case let members as [String: (any Sendable)?]:
            self = .object(members.sorted { $0.key < $1.key }.map { (key: $0.key, value: JSONValue(any: $0.value)) })
        default: self = .string("\(value!)")
        }
    }
}

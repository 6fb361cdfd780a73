import NIOCore

import struct Foundation.Data

/// A JSON document read strictly (RFC 8259): one value, optional white space around it, valid UTF-8, no
/// trailing commas, comments or bare words. Numbers keep the text they were written with.
///
/// JobKit reads JSON with `JSONDecoder` and writes it with `JSONEncoder` (`JSONLine`), except where
/// BENCHMARKS.md#the-json-reader measured otherwise: this reader takes the providers' answers on the delivery path
/// (`{"name":…}`, `{"reason":…}`) and, in the simulator, every request body — `JSONDecoder` cost ~5 µs an
/// answer and `JSONSerialization` ~5 µs a request body, both among the largest items of their threads'
/// profiles — and the events a job is invoked with (``strict(_:what:)``), as their strictness needs the document
/// as written: `JSONDecoder` takes a key given twice or a trailing comma, and says "not valid JSON" of a number that
/// is not whole or does not fit. The payload writer is `PayloadJSON`; the simulator's
/// writer of these values is in the simulator.
package enum JSONValue: Sendable {
    case null
    case bool(Bool)
    /// The number as written, e.g. `-12`, `3.5e2`.
    case number(String)
    case string(String)
    case array([JSONValue])
    /// Members in document order, duplicates included (lookups answer the first).
    case object([(key: String, value: JSONValue)])

    /// Nesting deeper than this is refused rather than risking the stack.
    package static let maximumDepth = 64

    package struct SyntaxError: Error, CustomStringConvertible {
        /// Byte offset of the problem.
        package let offset: Int
        package let reason: String
        package var description: String { "invalid JSON at byte \(offset): \(reason)" }
    }

    package init(parsing bytes: UnsafeRawBufferPointer) throws(SyntaxError) {
        var reader = Reader(bytes: bytes)
        reader.skipWhitespace()
        self = try reader.value(depth: 0)
        reader.skipWhitespace()
        guard reader.atEnd else { throw reader.error("text after the value") }
    }

    package init(parsing buffer: ByteBuffer) throws(SyntaxError) {
        let result = buffer.withUnsafeReadableBytes { bytes -> Result<JSONValue, SyntaxError> in
            do throws(SyntaxError) { return .success(try JSONValue(parsing: bytes)) } catch { return .failure(error) }
        }
        self = try result.get()
    }

    package init(parsing text: String) throws(SyntaxError) {
        try self.init(parsing: ByteBuffer(string: text))
    }

    // MARK: Reading values

    /// The first member named `key` of an object; nil for anything else.
    package subscript(key: String) -> JSONValue? {
        guard case .object(let members) = self else { return nil }
        return members.first { $0.key == key }?.value
    }

    package var string: String? {
        if case .string(let text) = self { return text }
        return nil
    }

    package var bool: Bool? {
        if case .bool(let flag) = self { return flag }
        return nil
    }

    /// A number written as a whole number that fits (`12`, not `12.0` or `1e3`).
    package var int64: Int64? {
        if case .number(let text) = self { return Int64(text) }
        return nil
    }

    package var double: Double? {
        if case .number(let text) = self { return Double(text) }
        return nil
    }

    package var array: [JSONValue]? {
        if case .array(let elements) = self { return elements }
        return nil
    }

    package var members: [(key: String, value: JSONValue)]? {
        if case .object(let members) = self { return members }
        return nil
    }

    package var isObject: Bool { members != nil }

    package var isNull: Bool {
        if case .null = self { return true }
        return false
    }

    /// Appends `text` as a JSON string literal, escaped as the payloads are (``PayloadJSON``).
    package static func write(string text: String, into bytes: inout [UInt8]) {
        PayloadJSON.write(string: text, into: &bytes)
    }
}

/// The parser: a cursor over the bytes, one method per grammar rule.
private struct Reader {
    let bytes: UnsafeRawBufferPointer
    var position = 0

    init(bytes: UnsafeRawBufferPointer) {
        self.bytes = bytes
    }

    var atEnd: Bool { position == bytes.count }

    func error(_ reason: String) -> JSONValue.SyntaxError {
        JSONValue.SyntaxError(offset: position, reason: reason)
    }

    func peek() -> UInt8? {
        position < bytes.count ? bytes[position] : nil
    }

    mutating func skipWhitespace() {
        while position < bytes.count {
            switch bytes[position] {
            case UInt8(ascii: " "), UInt8(ascii: "\t"), UInt8(ascii: "\n"), UInt8(ascii: "\r"): position += 1
            default: return
            }
        }
    }

    mutating func expect(_ byte: UInt8, _ what: String) throws(JSONValue.SyntaxError) {
        guard peek() == byte else { throw error("expected \(what)") }
        position += 1
    }

    mutating func value(depth: Int) throws(JSONValue.SyntaxError) -> JSONValue {
        guard let byte = peek() else { throw error("expected a value, found the end") }
        switch byte {
        case UInt8(ascii: "{"): return try object(depth: depth + 1)
        case UInt8(ascii: "["): return try array(depth: depth + 1)
        case UInt8(ascii: "\""): return .string(try string())
        case UInt8(ascii: "t"):
            try word("true")
            return .bool(true)
        case UInt8(ascii: "f"):
            try word("false")
            return .bool(false)
        case UInt8(ascii: "n"):
            try word("null")
            return .null
        case UInt8(ascii: "-"), UInt8(ascii: "0")...UInt8(ascii: "9"): return .number(try number())
        default: throw error("expected a value")
        }
    }

    mutating func word(_ text: StaticString) throws(JSONValue.SyntaxError) {
        let expected = UnsafeBufferPointer(start: text.utf8Start, count: text.utf8CodeUnitCount)
        guard bytes.count - position >= expected.count,
            bytes[position..<position + expected.count].elementsEqual(expected)
        else {
            throw error("expected \(text)")
        }
        position += expected.count
    }

    mutating func object(depth: Int) throws(JSONValue.SyntaxError) -> JSONValue {
        var members: [(key: String, value: JSONValue)] = []
        if try open(UInt8(ascii: "}"), depth: depth) { return .object(members) }
        repeat {
            guard peek() == UInt8(ascii: "\"") else { throw error("expected a member name") }
            let key = try string()
            skipWhitespace()
            try expect(UInt8(ascii: ":"), "':'")
            skipWhitespace()
            members.append((key, try value(depth: depth)))
        } while try !closeOrComma(UInt8(ascii: "}"))
        return .object(members)
    }

    mutating func array(depth: Int) throws(JSONValue.SyntaxError) -> JSONValue {
        var elements: [JSONValue] = []
        if try open(UInt8(ascii: "]"), depth: depth) { return .array(elements) }
        repeat {
            elements.append(try value(depth: depth))
        } while try !closeOrComma(UInt8(ascii: "]"))
        return .array(elements)
    }

    /// Enters an object or array (the cursor is on its opening bracket); true when it is empty, its closing
    /// bracket read.
    mutating func open(_ closing: UInt8, depth: Int) throws(JSONValue.SyntaxError) -> Bool {
        guard depth <= JSONValue.maximumDepth else { throw error("nested deeper than \(JSONValue.maximumDepth)") }
        position += 1
        skipWhitespace()
        guard peek() == closing else { return false }
        position += 1
        return true
    }

    /// After a member or element: true at the closing bracket (read), false after a comma (read, with the white
    /// space after it).
    mutating func closeOrComma(_ closing: UInt8) throws(JSONValue.SyntaxError) -> Bool {
        skipWhitespace()
        switch peek() {
        case UInt8(ascii: ","):
            position += 1
            skipWhitespace()
            return false
        case closing:
            position += 1
            return true
        default:
            throw error("expected ',' or '\(Character(Unicode.Scalar(closing)))'")
        }
    }

    /// A string; the cursor is on its opening quote. Text without escapes is validated and copied at once.
    mutating func string() throws(JSONValue.SyntaxError) -> String {
        position += 1  // "
        let start = position
        var nonASCII: UInt8 = 0
        while position < bytes.count {
            let byte = bytes[position]
            if byte == UInt8(ascii: "\"") {
                let text = UnsafeRawBufferPointer(rebasing: bytes[start..<position])
                position += 1
                // ASCII is valid UTF-8 as it is. `String(validating:as:)` is generic, not specialised here: its
                // run-time type look-ups were most of the time of reading a string.
                if nonASCII & 0x80 == 0 { return String(decoding: text, as: UTF8.self) }
                guard let text = String(validating: text, as: UTF8.self) else {
                    throw JSONValue.SyntaxError(offset: start, reason: "a string is not valid UTF-8")
                }
                return text
            }
            if byte == UInt8(ascii: "\\") { break }
            guard byte >= 0x20 else { throw error("a control character inside a string") }
            nonASCII |= byte
            position += 1
        }
        guard position < bytes.count else { throw error("a string without its closing quote") }
        // Escapes: decoded into a copy.
        var decoded = Array(bytes[start..<position])
        while position < bytes.count {
            let byte = bytes[position]
            switch byte {
            case UInt8(ascii: "\""):
                position += 1
                guard let text = String(validating: decoded, as: UTF8.self) else {
                    throw JSONValue.SyntaxError(offset: start, reason: "a string is not valid UTF-8")
                }
                return text
            case UInt8(ascii: "\\"):
                position += 1
                guard let escape = peek() else { break }
                position += 1
                switch escape {
                case UInt8(ascii: "\""), UInt8(ascii: "\\"), UInt8(ascii: "/"): decoded.append(escape)
                case UInt8(ascii: "b"): decoded.append(0x08)
                case UInt8(ascii: "f"): decoded.append(0x0C)
                case UInt8(ascii: "n"): decoded.append(0x0A)
                case UInt8(ascii: "r"): decoded.append(0x0D)
                case UInt8(ascii: "t"): decoded.append(0x09)
                case UInt8(ascii: "u"):
                    var scalar = UInt32(try hex4())
                    if (0xD800..<0xDC00).contains(scalar) {
                        // A high surrogate must be followed by an escaped low one.
                        guard bytes.count - position >= 2, bytes[position] == UInt8(ascii: "\\"),
                            bytes[position + 1] == UInt8(ascii: "u")
                        else { throw error("a lone surrogate") }
                        position += 2
                        let low = UInt32(try hex4())
                        guard (0xDC00..<0xE000).contains(low) else { throw error("a lone surrogate") }
                        scalar = 0x10000 + ((scalar - 0xD800) << 10) + (low - 0xDC00)
                    } else if (0xDC00..<0xE000).contains(scalar) {
                        throw error("a lone surrogate")
                    }
                    decoded.append(contentsOf: String(Character(Unicode.Scalar(scalar)!)).utf8)
                default:
                    position -= 1
                    throw error("an unknown escape")
                }
            default:
                guard byte >= 0x20 else { throw error("a control character inside a string") }
                decoded.append(byte)
                position += 1
            }
        }
        throw error("a string without its closing quote")
    }

    mutating func hex4() throws(JSONValue.SyntaxError) -> UInt16 {
        guard bytes.count - position >= 4 else { throw error("a \\u escape needs four hex digits") }
        var value: UInt16 = 0
        for _ in 0..<4 {
            let byte = bytes[position]
            let digit: UInt8
            switch byte {
            case UInt8(ascii: "0")...UInt8(ascii: "9"): digit = byte - UInt8(ascii: "0")
            case UInt8(ascii: "a")...UInt8(ascii: "f"): digit = byte - UInt8(ascii: "a") + 10
            case UInt8(ascii: "A")...UInt8(ascii: "F"): digit = byte - UInt8(ascii: "A") + 10
            default: throw error("a \\u escape needs four hex digits")
            }
            value = value << 4 | UInt16(digit)
            position += 1
        }
        return value
    }

    /// `-? (0 | [1-9][0-9]*) (. [0-9]+)? ([eE] [+-]? [0-9]+)?`
    mutating func number() throws(JSONValue.SyntaxError) -> String {
        let start = position
        if peek() == UInt8(ascii: "-") { position += 1 }
        switch peek() ?? 0 {
        case UInt8(ascii: "0"):
            position += 1
        case UInt8(ascii: "1")...UInt8(ascii: "9"):
            skipDigits()
        default:
            throw error("a number needs a digit")
        }
        if peek() == UInt8(ascii: ".") {
            position += 1
            guard isDigit(peek()) else { throw error("a fraction needs a digit") }
            skipDigits()
        }
        if peek() == UInt8(ascii: "e") || peek() == UInt8(ascii: "E") {
            position += 1
            if peek() == UInt8(ascii: "+") || peek() == UInt8(ascii: "-") { position += 1 }
            guard isDigit(peek()) else { throw error("an exponent needs a digit") }
            skipDigits()
        }
        return String(decoding: UnsafeRawBufferPointer(rebasing: bytes[start..<position]), as: UTF8.self)
    }

    func isDigit(_ byte: UInt8?) -> Bool {
        guard let byte else { return false }
        return (UInt8(ascii: "0")...UInt8(ascii: "9")).contains(byte)
    }

    mutating func skipDigits() {
        while isDigit(peek()) { position += 1 }
    }
}

extension JSONValue {
    /// `data` as one strict JSON document (RFC 8259, valid UTF-8 throughout, numbers as the grammar writes them)
    /// in which no object has the same key twice; anything else is bad input (65) prefixed with `what`. `27.0.5`,
    /// `-`, `01` or invalid UTF-8 in a field the reader skips are bad input too, never silently accepted; so is
    /// `{"user_id":"a",…,"user_id":"b"}`, as which of the two is meant is not for us to guess. A UTF-8 byte order
    /// mark before the document is passed over, as RFC 8259 (8.1) lets a parser do and Foundation's decoder does:
    /// Windows editors and PowerShell write one, and the catalog's decoder reads such a file (a syntax error's byte
    /// then counts from after the mark).
    package static func strict(_ data: Data, what: String) throws(JobError) -> JSONValue {
        let document = data.starts(with: [0xEF, 0xBB, 0xBF]) ? data.dropFirst(3) : data
        let result = document.withUnsafeBytes { bytes -> Result<JSONValue, SyntaxError> in
            do throws(SyntaxError) { return .success(try JSONValue(parsing: bytes)) } catch { return .failure(error) }
        }
        let value: JSONValue
        switch result {
        case .success(let parsed): value = parsed
        case .failure(let error): throw .dataError("\(what): \(error)")
        }
        if let path = value.repeatedKey() { throw .dataError("\(what): \(path) appears twice") }
        return value
    }

    /// The dotted path of the first key that appears twice in one object, anywhere in the document.
    func repeatedKey(under path: String = "") -> String? {
        switch self {
        case .object(let members):
            var seen = Set<String>()
            for (key, value) in members {
                let keyPath = path.isEmpty ? key : path + "." + key
                guard seen.insert(key).inserted else { return keyPath }
                if let repeated = value.repeatedKey(under: keyPath) { return repeated }
            }
            return nil
        case .array(let elements):
            for (index, element) in elements.enumerated() {
                if let repeated = element.repeatedKey(under: "\(path)[\(index)]") { return repeated }
            }
            return nil
        default:
            return nil
        }
    }

    /// A number whose value is whole, however written (`27`, `27.0`, `2.7e1`: Python writes a float as `27.0`),
    /// within `Int`'s range (beyond 2^53 only when written as an integer, as a `Double` is no longer exact there).
    /// `.fraction` for `9.5`, `.outOfRange` for `1e308`; nil for anything that is not a number.
    var wholeNumber: WholeNumber? {
        guard case .number(let text) = self else { return nil }
        if let value = Int(text) { return .whole(value) }
        guard let value = Double(text) else { return .outOfRange }
        guard value.rounded(.towardZero) == value else { return .fraction }
        guard abs(value) <= 9_007_199_254_740_992 else { return .outOfRange }
        return .whole(Int(value))
    }

    enum WholeNumber: Equatable {
        case whole(Int)
        case fraction
        case outOfRange
    }

    /// The value for a message: a number as written, otherwise what kind of value it is.
    var described: String {
        switch self {
        case .null: "null"
        case .bool: "true or false"
        case .number(let text): text
        case .string: "a string"
        case .array: "an array"
        case .object: "an object"
        }
    }
}

import Foundation

/// A provider payload as JSON, written by hand: keys in the order given (sorted in every literal),
/// slashes and non-ASCII left as they are, as providers accept. Payloads are small objects of strings, numbers and booleans; Foundation's
/// `JSONSerialization` (bridging each dictionary to `NSDictionary`, sorting keys with `NSString.compare`)
/// took two thirds of the send path's CPU time. Not `indirect`: the members' array already holds nested values
/// out of line, and boxing every string on its own cost an allocation per value.
package enum PayloadJSON: Sendable, ExpressibleByStringLiteral, ExpressibleByIntegerLiteral,
    ExpressibleByBooleanLiteral, ExpressibleByDictionaryLiteral
{
    case string(String)
    case int(Int64)
    case bool(Bool)
    /// Members in the order given: literals list keys sorted, as the providers' documentation does.
    case object([(String, PayloadJSON)])

    package init(stringLiteral value: String) { self = .string(value) }
    package init(integerLiteral value: Int64) { self = .int(value) }
    package init(booleanLiteral value: Bool) { self = .bool(value) }
    package init(dictionaryLiteral elements: (String, PayloadJSON)...) {
        self = .object(elements)
    }

    package var data: Data {
        var bytes: [UInt8] = []
        bytes.reserveCapacity(512)
        write(into: &bytes)
        return Data(bytes)
    }

    package func write(into bytes: inout [UInt8]) {
        switch self {
        case .string(let text):
            Self.write(string: text, into: &bytes)
        case .int(let number):
            bytes.append(contentsOf: String(number).utf8)
        case .bool(let flag):
            bytes.append(contentsOf: (flag ? "true" : "false").utf8)
        case .object(let members):
            bytes.append(UInt8(ascii: "{"))
            for (index, (key, value)) in members.enumerated() {
                if index > 0 { bytes.append(UInt8(ascii: ",")) }
                Self.write(string: key, into: &bytes)
                bytes.append(UInt8(ascii: ":"))
                value.write(into: &bytes)
            }
            bytes.append(UInt8(ascii: "}"))
        }
    }

    private static let hex = Array("0123456789abcdef".utf8)

    package static func write(string: String, into bytes: inout [UInt8]) {
        var string = string
        string.withUTF8 { write(utf8: $0, into: &bytes) }
    }

    private static func write(utf8: UnsafeBufferPointer<UInt8>, into bytes: inout [UInt8]) {
        bytes.append(UInt8(ascii: "\""))
        // Most strings need no escape at all: copied whole.
        if !utf8.contains(where: { $0 < 0x20 || $0 == UInt8(ascii: "\"") || $0 == UInt8(ascii: "\\") }) {
            bytes.append(contentsOf: utf8)
            bytes.append(UInt8(ascii: "\""))
            return
        }
        for byte in utf8 {
            switch byte {
            case UInt8(ascii: "\""): bytes.append(contentsOf: [UInt8(ascii: "\\"), UInt8(ascii: "\"")])
            case UInt8(ascii: "\\"): bytes.append(contentsOf: [UInt8(ascii: "\\"), UInt8(ascii: "\\")])
            case 0x0A: bytes.append(contentsOf: [UInt8(ascii: "\\"), UInt8(ascii: "n")])
            case 0x0D: bytes.append(contentsOf: [UInt8(ascii: "\\"), UInt8(ascii: "r")])
            case 0x09: bytes.append(contentsOf: [UInt8(ascii: "\\"), UInt8(ascii: "t")])
            case 0..<0x20:
                bytes.append(contentsOf: [
                    UInt8(ascii: "\\"), UInt8(ascii: "u"), UInt8(ascii: "0"), UInt8(ascii: "0"),
                    hex[Int(byte >> 4)], hex[Int(byte & 0xF)],
                ])
            default: bytes.append(byte)
            }
        }
        bytes.append(UInt8(ascii: "\""))
    }
}

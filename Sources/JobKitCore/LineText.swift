/// Text output is one record a line, and some of what goes into a line comes from outside: user ids, zones and
/// locales from the database, reasons from a provider's answer. The schema takes any character in them, so an
/// id with a line break would end a record early and start a forged one (in the hook's summary, a dry-run line,
/// an error, a log line). These helpers write such a value so that it stays inside its line. JSON output needs
/// none of this: its strings are escaped as JSON.
package enum LineText {
    /// `value` as a `key=value` field: as it is when it is a plain word (no space, quote, backslash, `=` or
    /// control character, and not empty), else in double quotes with `"`, `\` and control characters escaped as
    /// JSON escapes them (`"a b"`, `"a\nb"`, `""`).
    package static func field(_ value: String) -> String {
        let plain =
            !value.isEmpty
            && value.unicodeScalars.allSatisfy { scalar in
                !breaksLine(scalar) && scalar != " " && scalar != "\"" && scalar != "\\" && scalar != "="
            }
        return plain ? value : quoted(value)
    }

    /// `value` in double quotes, with `"`, `\` and control characters escaped as JSON escapes them.
    package static func quoted(_ value: String) -> String {
        var out = "\""
        for scalar in value.unicodeScalars {
            switch scalar {
            case "\"": out += "\\\""
            case "\\": out += "\\\\"
            default: append(scalar, to: &out)
            }
        }
        return out + "\""
    }

    /// `text` with each control character escaped (`\n`, `\r`, `\t`, `\u0000` …) and everything else as it
    /// is: for a line that is read by people, such as a log message or an error, so that it stays one line.
    package static func escapingControls(_ text: String) -> String {
        guard text.unicodeScalars.contains(where: breaksLine) else { return text }
        var out = ""
        for scalar in text.unicodeScalars { append(scalar, to: &out) }
        return out
    }

    /// Control characters (C0, DEL, C1) and the Unicode line and paragraph separators: what a terminal or a
    /// line-reading tool may take as the end of a line, or as a command.
    static func breaksLine(_ scalar: Unicode.Scalar) -> Bool {
        scalar.value < 0x20 || (0x7F...0x9F).contains(scalar.value) || scalar.value == 0x2028
            || scalar.value == 0x2029
    }

    private static func append(_ scalar: Unicode.Scalar, to out: inout String) {
        switch scalar {
        case "\n": out += "\\n"
        case "\r": out += "\\r"
        case "\t": out += "\\t"
        case "\u{08}": out += "\\b"
        case "\u{0C}": out += "\\f"
        case _ where breaksLine(scalar):
            let hex = Array("0123456789abcdef")
            let value = Int(scalar.value)
            out += "\\u" + (0..<4).reversed().map { String(hex[(value >> ($0 * 4)) & 0xF]) }.joined()
        default: out.unicodeScalars.append(scalar)
        }
    }
}

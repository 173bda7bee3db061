/// A string in double quotes with `"`, `\` and every control character (C0 and DEL) escaped: at
/// once a TOML basic string (TOML 1.0 "Basic strings") and a JSON string (RFC 8259 §7), for the
/// places that write one of those by hand (field sidecars, a job's kept response headers).
public enum QuotedString {
    /// `text`, quoted and escaped.
    public static func basic(_ text: String) -> String {
        var quoted = "\""
        append(text, to: &quoted)
        return quoted + "\""
    }

    /// Appends `text`'s escaped characters (without quotes) to `out`.
    private static func append(_ text: String, to out: inout String) {
        for scalar in text.unicodeScalars {
            switch scalar {
            case "\"": out += "\\\""
            case "\\": out += "\\\\"
            case "\u{08}": out += "\\b"
            case "\t": out += "\\t"
            case "\n": out += "\\n"
            case "\u{0C}": out += "\\f"
            case "\r": out += "\\r"
            case _ where scalar.value < 0x20 || scalar.value == 0x7F:
                let hex = String(scalar.value, radix: 16, uppercase: true)
                out += "\\u" + String(repeating: "0", count: 4 - hex.count) + hex
            default: out.unicodeScalars.append(scalar)
            }
        }
    }
}

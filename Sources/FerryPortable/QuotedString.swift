/// A string in double quotes with `"`, `\` and every control character (C0 and DEL) escaped: at
/// once a TOML basic string (TOML 1.0 "Basic strings") and a JSON string (RFC 8259 §7), for the
/// places that write one of those by hand (field sidecars, a job's kept response headers, logfmt
/// values).
public enum QuotedString {
    /// `text`, quoted and escaped.
    public static func basic(_ text: String) -> String {
        var quoted = "\""
        for scalar in text.unicodeScalars {
            switch scalar {
            case "\"": quoted += "\\\""
            case "\\": quoted += "\\\\"
            case "\u{08}": quoted += "\\b"
            case "\t": quoted += "\\t"
            case "\n": quoted += "\\n"
            case "\u{0C}": quoted += "\\f"
            case "\r": quoted += "\\r"
            case _ where scalar.value < 0x20 || scalar.value == 0x7F:
                let hex = String(scalar.value, radix: 16, uppercase: true)
                quoted += "\\u" + String(repeating: "0", count: 4 - hex.count) + hex
            default: quoted.unicodeScalars.append(scalar)
            }
        }
        return quoted + "\""
    }
}

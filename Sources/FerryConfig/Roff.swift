/// Markdown text as roff (man(7)) text: code spans in bold, links as their text (saying where a link
/// into the README or the sources points), backslashes,
/// leading dots and anything beyond ASCII escaped, so that `man --warnings` has nothing to say.
enum Roff {
    /// A paragraph: its lines joined into one, inline Markdown turned into roff.
    static func paragraph(_ markdown: String) -> String {
        let joined = markdown.split(separator: "\n", omittingEmptySubsequences: false).joined(separator: " ")
        let line = inline(joined)
        return line.hasPrefix(".") || line.hasPrefix("'") ? #"\&"# + line : line
    }

    /// Inline Markdown: `` `code` `` in bold, `[text](target)` as its text, `**strong**` in bold.
    static func inline(_ markdown: String) -> String {
        var output = ""
        var rest = Substring(markdown)
        while let first = rest.first {
            if first == "`", let end = rest.dropFirst().firstIndex(of: "`") {
                let code = rest[rest.index(after: rest.startIndex)..<end]
                output += #"\fB"# + text(String(code), code: true) + #"\fR"#
                rest = rest[rest.index(after: end)...]
            } else if first == "[", let close = rest.firstIndex(of: "]"),
                      rest[rest.index(after: close)...].first == "(",
                      let end = rest[close...].firstIndex(of: ")") {
                // A link: its text, and where it points when that is not a web address: a section
                // or a file of the README's, which a manual page does not have.
                output += inline(String(rest[rest.index(after: rest.startIndex)..<close]))
                let target = rest[rest.index(close, offsetBy: 2)..<end]
                if target.hasPrefix("#") {
                    output += " (in the README)"
                } else if !target.contains("://") {
                    output += " (in Ferry's sources)"
                }
                rest = rest[rest.index(after: end)...]
            } else if rest.hasPrefix("**"), let end = rest.dropFirst(2).range(of: "**") {
                output += #"\fB"# + inline(String(rest[rest.index(rest.startIndex, offsetBy: 2)..<end.lowerBound])) + #"\fR"#
                rest = rest[end.upperBound...]
            } else {
                output += text(String(first))
                rest = rest.dropFirst()
            }
        }
        return output
    }

    /// Plain text escaped for roff; in `code`, hyphens are minus signs (`--config` stays typeable).
    static func text(_ plain: String, code: Bool = false) -> String {
        var output = ""
        for scalar in plain.unicodeScalars {
            switch scalar {
            case "\\": output += #"\e"#
            case "-" where code: output += #"\-"#
            case _ where scalar.isASCII: output.unicodeScalars.append(scalar)
            default:
                let hex = String(scalar.value, radix: 16, uppercase: true)
                output += #"\[u"# + String(repeating: "0", count: max(0, 4 - hex.count)) + hex + "]"
            }
        }
        return output
    }
}

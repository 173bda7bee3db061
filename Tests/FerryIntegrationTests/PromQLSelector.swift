/// A metric selector found in a PromQL expression: `ferry_jobs{state=~"queued|held"}` is the metric
/// `ferry_jobs` with one matcher. Only the metric names and matchers are read (enough to check that
/// rules and dashboards name series ferryd really exports); the rest of the language is skipped.
struct PromQLSelector: Equatable, CustomStringConvertible {
    /// One label matcher: `label op "value"`, `op` one of `=`, `!=`, `=~`, `!~`.
    struct Matcher: Equatable {
        var label: String
        var op: String
        var value: String
    }

    var metric: String
    var matchers: [Matcher]

    var description: String {
        metric + (matchers.isEmpty ? "" : "{" + matchers.map { "\($0.label)\($0.op)\"\($0.value)\"" }.joined(separator: ",") + "}")
    }

    /// The selectors of metrics whose names start with `prefix` in `expression`. Names with a colon
    /// (recording rules, `level:metric:operations`) are not metrics a program exports and are left out;
    /// so are words in string literals and label names in `by (...)`.
    static func selectors(in expression: String, prefix: String) -> [PromQLSelector] {
        let characters = Array(expression)
        var found: [PromQLSelector] = []
        var index = 0
        func isIdentifierStart(_ c: Character) -> Bool { c == "_" || c == ":" || (c.isASCII && c.isLetter) }
        func isIdentifier(_ c: Character) -> Bool { isIdentifierStart(c) || (c.isASCII && c.isNumber) }
        func skipSpaces() { while index < characters.count, characters[index].isWhitespace { index += 1 } }
        func readIdentifier() -> String {
            let start = index
            while index < characters.count, isIdentifier(characters[index]) { index += 1 }
            return String(characters[start..<index])
        }
        func readString() -> String {
            let quote = characters[index]
            index += 1
            var value = ""
            while index < characters.count, characters[index] != quote {
                if characters[index] == "\\", index + 1 < characters.count { index += 1 }
                value.append(characters[index])
                index += 1
            }
            index += 1
            return value
        }
        func readMatchers() -> [Matcher] {
            var matchers: [Matcher] = []
            index += 1  // {
            while index < characters.count {
                skipSpaces()
                guard index < characters.count, characters[index] != "}" else { break }
                let label = readIdentifier()
                skipSpaces()
                var op = ""
                while index < characters.count, "=!~".contains(characters[index]) { op.append(characters[index]); index += 1 }
                skipSpaces()
                guard !label.isEmpty, !op.isEmpty, index < characters.count, characters[index] == "\"" || characters[index] == "'" else { break }
                matchers.append(Matcher(label: label, op: op, value: readString()))
                skipSpaces()
                if index < characters.count, characters[index] == "," { index += 1 }
            }
            if index < characters.count, characters[index] == "}" { index += 1 }
            return matchers
        }
        while index < characters.count {
            let character = characters[index]
            if character == "\"" || character == "'" || character == "`" {
                _ = readString()
            } else if isIdentifierStart(character) {
                let word = readIdentifier()
                skipSpaces()
                let matchers = index < characters.count && characters[index] == "{" ? readMatchers() : []
                if word.hasPrefix(prefix), !word.contains(":") { found.append(PromQLSelector(metric: word, matchers: matchers)) }
            } else if character.isNumber {
                while index < characters.count, isIdentifier(characters[index]) { index += 1 }  // 5m, 0.95, 1e3
            } else {
                index += 1
            }
        }
        return found
    }
}

/// A path to a value in a TOML document, such as `spool[1].retry.max_delay`.
public struct KeyPath: Sendable, Hashable, CustomStringConvertible {
    enum Segment: Sendable, Hashable {
        case key(String)
        case index(Int)
    }

    var segments: [Segment]

    init(_ segments: [Segment] = []) { self.segments = segments }

    func appending(_ key: String) -> KeyPath { KeyPath(segments + [.key(key)]) }
    func appending(index: Int) -> KeyPath { KeyPath(segments + [.index(index)]) }

    public var description: String {
        var text = ""
        for segment in segments {
            switch segment {
            case .key(let key):
                let bare = !key.isEmpty && key.allSatisfy { $0.isASCII && ($0.isLetter || $0.isNumber || $0 == "_" || $0 == "-") }
                let shown = bare ? key : "\"\(key)\""
                text += text.isEmpty ? shown : ".\(shown)"
            case .index(let index):
                text += "[\(index)]"
            }
        }
        return text
    }
}

/// Finds the line on which a key was written. TOMLKit reports positions only for syntax errors, so
/// this reads the text once, following table headers, arrays of tables and dotted keys, well enough
/// to point an error message at the right line. It never decides what a document means.
struct TOMLKeyLocator {
    private var lines: [KeyPath: Int] = [:]

    init(text: String) {
        var table = KeyPath()
        var arrayCounts: [KeyPath: Int] = [:]
        var multiline: String?  // the closing quote of a multi-line string we are inside
        var lineNumber = 0
        // Split by scalars: as Characters, a CRLF is one grapheme that "\n" would never match.
        for rawLine in text.unicodeScalars.split(separator: "\n", omittingEmptySubsequences: false) {
            lineNumber += 1
            let line = Substring(rawLine).trimming(" \t\r")
            if let closing = multiline {
                if line.pieces(separatedBy: closing).count % 2 == 0 { multiline = nil }
                continue
            }
            if line.isEmpty || line.hasPrefix("#") { continue }
            if line.hasPrefix("[[") {
                guard let end = line.range(of: "]]") else { continue }
                let keys = Self.dottedKeys(String(line[line.index(line.startIndex, offsetBy: 2)..<end.lowerBound]))
                var path = Self.resolve(keys.dropLast(), arrays: arrayCounts)
                path = path.appending(keys.last ?? "")
                let index = arrayCounts[path, default: 0]
                arrayCounts[path] = index + 1
                table = path.appending(index: index)
                record(table, lineNumber)
                continue
            }
            if line.hasPrefix("[") {
                guard let end = line.firstIndex(of: "]") else { continue }
                let keys = Self.dottedKeys(String(line[line.index(after: line.startIndex)..<end]))
                table = Self.resolve(keys[...], arrays: arrayCounts)
                record(table, lineNumber)
                continue
            }
            guard let equals = Self.firstUnquoted("=", in: line) else { continue }
            // `a.b.c = 1` also defines the tables `a` and `a.b`, first written here.
            var path = table
            for key in Self.dottedKeys(String(line[..<equals])) {
                path = path.appending(key)
                record(path, lineNumber)
            }
            let value = line[line.index(after: equals)...].trimming(" \t")
            for quote in ["\"\"\"", "'''"] where value.hasPrefix(quote) {
                if value.pieces(separatedBy: quote).count % 2 == 0 { multiline = quote }
            }
        }
    }

    private mutating func record(_ path: KeyPath, _ line: Int) {
        if lines[path] == nil { lines[path] = line }
    }

    /// The line of `path`, or of its nearest located ancestor.
    func line(for path: KeyPath) -> Int? {
        var segments = path.segments
        while true {
            if let line = lines[KeyPath(segments)] { return line }
            if segments.isEmpty { return nil }
            segments.removeLast()
        }
    }

    /// Turns `a.b` inside a header into a path, entering the latest element of each array of tables.
    private static func resolve(_ keys: ArraySlice<String>, arrays: [KeyPath: Int]) -> KeyPath {
        var path = KeyPath()
        for key in keys {
            path = path.appending(key)
            if let count = arrays[path] { path = path.appending(index: count - 1) }
        }
        return path
    }

    /// Splits `a."b.c".d` into `["a", "b.c", "d"]`, decoding the escapes of quoted keys.
    static func dottedKeys(_ text: String) -> [String] {
        var keys: [String] = []
        var current = ""
        var quote: Character?
        var escaped = false
        var hexDigits: (remaining: Int, text: String)?  // inside a \uXXXX or \UXXXXXXXX escape
        for char in text {
            if let q = quote {
                if let hex = hexDigits {
                    let digits = hex.text + String(char)
                    if hex.remaining > 1 {
                        hexDigits = (hex.remaining - 1, digits)
                    } else {
                        if let value = UInt32(digits, radix: 16), let scalar = Unicode.Scalar(value) { current.unicodeScalars.append(scalar) }
                        hexDigits = nil
                    }
                } else if escaped {
                    switch char {
                    case "n": current.append("\n")
                    case "r": current.append("\r")
                    case "t": current.append("\t")
                    case "b": current.append("\u{08}")
                    case "f": current.append("\u{0C}")
                    case "u": hexDigits = (4, "")
                    case "U": hexDigits = (8, "")
                    default: current.append(char)
                    }
                    escaped = false
                } else if char == "\\" && q == "\"" {
                    escaped = true
                } else if char == q {
                    quote = nil
                } else {
                    current.append(char)
                }
            } else if char == "\"" || char == "'" {
                quote = char
            } else if char == "." {
                keys.append(current.trimming(" \t"))
                current = ""
            } else {
                current.append(char)
            }
        }
        keys.append(current.trimming(" \t"))
        return keys
    }

    private static func firstUnquoted(_ target: Character, in text: String) -> String.Index? {
        var quote: Character?
        var index = text.startIndex
        while index < text.endIndex {
            let char = text[index]
            if let q = quote {
                if char == "\\" && q == "\"" {
                    // An escape in a basic string (`"a\"b"`): the next character does not close it.
                    index = text.index(after: index)
                    if index == text.endIndex { break }
                } else if char == q {
                    quote = nil
                }
            } else if char == "\"" || char == "'" {
                quote = char
            } else if char == target {
                return index
            } else if char == "#" {
                return nil
            }
            index = text.index(after: index)
        }
        return nil
    }
}

extension StringProtocol {
    func trimming(_ set: String) -> String {
        var s = Substring(self)
        while let first = s.first, set.contains(first) { s = s.dropFirst() }
        while let last = s.last, set.contains(last) { s = s.dropLast() }
        return String(s)
    }

    func pieces(separatedBy separator: String) -> [Substring] {
        Substring(self).split(separator: separator, omittingEmptySubsequences: false)
    }
}

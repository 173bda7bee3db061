import TOMLKit

/// Reading the file and its TOML.
extension ConfigurationLoader {
    /// The text of the file at `path`.
    static func readText(_ path: String) throws(ConfigurationError) -> String {
        guard let bytes = readWholeFile(path) else {
            let reason = lastErrorMessage()
            throw ConfigurationError(issues: [ConfigurationIssue(
                file: path, line: nil, keyPath: nil,
                message: "cannot read the configuration file: \(reason) (pass --config PATH to use another file)")])
        }
        guard let text = String(validating: bytes, as: UTF8.self) else {
            throw ConfigurationError(issues: [ConfigurationIssue(
                file: path, line: nil, keyPath: nil, message: "the file is not UTF-8 text")])
        }
        return text
    }

    /// `text` as a TOML document, read from `path`.
    static func document(_ text: String, path: String) throws(ConfigurationError) -> TOMLTable {
        // A raw NUL byte would end the C string TOMLKit parses: the rest of the file would be ignored.
        if let nul = text.utf8.firstIndex(of: 0) {
            let line = text.utf8[..<nul].reduce(1) { $0 + ($1 == 0x0A ? 1 : 0) }
            throw ConfigurationError(issues: [ConfigurationIssue(
                file: path, line: line, keyPath: nil, message: "the file holds a NUL byte; a configuration file is text")])
        }
        let root: TOMLTable
        do {
            root = try TOMLTable(string: text)
        } catch let error as TOMLParseError {
            throw ConfigurationError(issues: [ConfigurationIssue(
                file: path, line: error.source.begin.line, keyPath: nil,
                message: "TOML syntax error: \(error.description) (column \(error.source.begin.column))")])
        } catch {
            throw ConfigurationError(issues: [ConfigurationIssue(
                file: path, line: nil, keyPath: nil, message: "TOML syntax error: \(error)")])
        }
        // TOMLKit hands strings over as C strings, which would silently cut a value at an escaped NUL
        // ("\u0000"); refuse such escapes before they can shorten a header or secret.
        if let line = Self.lineWithEscapedNUL(text) {
            throw ConfigurationError(issues: [ConfigurationIssue(
                file: path, line: line, keyPath: nil, message: "a NUL character (\\u0000) is not allowed in any value")])
        }
        return root
    }

    /// The first line with a `\u0000` or `\U00000000` escape inside a basic string (`"…"` or
    /// `"""…"""`); comments and literal strings (`'…'`), which have no escapes, are skipped.
    static func lineWithEscapedNUL(_ text: String) -> Int? {
        let bytes = Array(text.utf8)
        var line = 1
        var index = 0
        enum Mode { case code, comment, basic, multilineBasic, literal, multilineLiteral }
        var mode = Mode.code
        func at(_ offset: Int, _ literal: String) -> Bool {
            let pattern = Array(literal.utf8)
            return offset + pattern.count <= bytes.count && bytes[offset..<(offset + pattern.count)].elementsEqual(pattern)
        }
        while index < bytes.count {
            let byte = bytes[index]
            if byte == 0x0A {
                line += 1
                if mode == .comment || mode == .basic || mode == .literal { mode = .code }
                index += 1
                continue
            }
            switch mode {
            case .code:
                if byte == UInt8(ascii: "#") {
                    mode = .comment
                } else if at(index, "\"\"\"") {
                    mode = .multilineBasic
                    index += 2
                } else if at(index, "'''") {
                    mode = .multilineLiteral
                    index += 2
                } else if byte == UInt8(ascii: "\"") {
                    mode = .basic
                } else if byte == UInt8(ascii: "'") {
                    mode = .literal
                }
            case .comment:
                break
            case .basic, .multilineBasic:
                if byte == UInt8(ascii: "\\") {
                    if at(index, "\\u0000") || at(index, "\\U00000000") { return line }
                    index += 2
                    continue
                }
                if mode == .basic && byte == UInt8(ascii: "\"") {
                    mode = .code
                } else if mode == .multilineBasic && at(index, "\"\"\"") {
                    mode = .code
                    index += 2
                }
            case .literal:
                if byte == UInt8(ascii: "'") { mode = .code }
            case .multilineLiteral:
                if at(index, "'''") {
                    mode = .code
                    index += 2
                }
            }
            index += 1
        }
        return nil
    }
}

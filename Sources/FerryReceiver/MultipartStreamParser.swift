import CFerrySystem

/// A streaming `multipart/form-data` parser: feed it the body in chunks of any size, and it reports
/// each part's headers, its bytes (without ever holding a whole part in memory) and its end.
///
/// It follows RFC 7578 / RFC 2046 as browsers and Ferry produce them: a preamble is skipped, header
/// lines end in CRLF, and parameter values are quoted strings without backslash escapes (WHATWG; a doubled backslash,
/// which Ferry sends where a quoted-pair reader would misread a single one, is read as one).
struct MultipartStreamParser {
    /// What the parser found.
    enum Event {
        /// A part starts; its header fields, names lowercased.
        case partBegin(headers: [(name: String, value: String)])
        /// Some of the current part's bytes; valid only during the callback.
        case partData(UnsafeRawBufferPointer)
        /// The current part ended.
        case partEnd
    }

    /// Why a body is not valid multipart.
    struct ParseError: Error, CustomStringConvertible {
        var description: String
    }

    private enum State {
        case preamble, afterDelimiter, headers, body, epilogue
    }

    private let delimiter: [UInt8]  // "\r\n--" + boundary
    private var buffer: [UInt8] = []
    private var state = State.preamble
    static let headerLimit = 16 * 1024

    init(boundary: String) {
        delimiter = Array("\r\n--\(boundary)".utf8)
    }

    /// Whether the close delimiter has been seen.
    var isComplete: Bool { state == .epilogue }

    /// Consumes `bytes`, reporting events to `onEvent`.
    mutating func feed(_ bytes: UnsafeRawBufferPointer, onEvent: (Event) throws -> Void) throws {
        if state == .epilogue { return }
        buffer.append(contentsOf: bytes)
        var consumed = 0
        defer { buffer.removeFirst(consumed) }
        try buffer.withUnsafeBytes { raw in
            loop: while true {
                let rest = UnsafeRawBufferPointer(rebasing: raw[consumed...])
                switch state {
                case .preamble:
                    // The first delimiter may start the body without the leading CRLF.
                    let opening = delimiter[2...]
                    if rest.count >= opening.count, rest.prefix(opening.count).elementsEqual(opening) {
                        consumed += opening.count
                        state = .afterDelimiter
                        continue loop
                    }
                    if rest.count < opening.count && opening.starts(with: rest) { break loop }
                    if let index = Self.find(delimiter, in: rest) {
                        consumed += index + delimiter.count
                        state = .afterDelimiter
                        continue loop
                    }
                    consumed += max(0, rest.count - (delimiter.count - 1))
                    break loop
                case .afterDelimiter:
                    guard rest.count >= 2 else { break loop }
                    if rest[0] == 0x2D && rest[1] == 0x2D {
                        state = .epilogue
                        consumed = raw.count
                        break loop
                    }
                    // Transport padding (spaces, tabs) may precede the CRLF.
                    var index = 0
                    while index < rest.count && (rest[index] == 0x20 || rest[index] == 0x09) { index += 1 }
                    guard rest.count >= index + 2 else { break loop }
                    guard rest[index] == 0x0D && rest[index + 1] == 0x0A else {
                        throw ParseError(description: "expected CRLF or \"--\" after a boundary delimiter")
                    }
                    consumed += index + 2
                    state = .headers
                case .headers:
                    guard rest.count >= 2 else { break loop }
                    if rest[0] == 0x0D && rest[1] == 0x0A {
                        // No header lines: the empty line follows the delimiter at once.
                        consumed += 2
                        try onEvent(.partBegin(headers: []))
                        state = .body
                        continue loop
                    }
                    guard let end = Self.find(Array("\r\n\r\n".utf8), in: rest) else {
                        if rest.count > Self.headerLimit { throw ParseError(description: "part headers exceed 16 KiB") }
                        break loop
                    }
                    let headers = try Self.parseHeaders(UnsafeRawBufferPointer(rebasing: rest[0..<end]))
                    consumed += end + 4
                    try onEvent(.partBegin(headers: headers))
                    state = .body
                case .body:
                    if let index = Self.find(delimiter, in: rest) {
                        if index > 0 { try onEvent(.partData(UnsafeRawBufferPointer(rebasing: rest[0..<index]))) }
                        try onEvent(.partEnd)
                        consumed += index + delimiter.count
                        state = .afterDelimiter
                        continue loop
                    }
                    let safe = rest.count - (delimiter.count - 1)
                    if safe > 0 {
                        try onEvent(.partData(UnsafeRawBufferPointer(rebasing: rest[0..<safe])))
                        consumed += safe
                    }
                    break loop
                case .epilogue:
                    consumed = raw.count
                    break loop
                }
            }
        }
    }

    /// Parses `Name: value` lines separated by CRLF.
    static func parseHeaders(_ bytes: UnsafeRawBufferPointer) throws -> [(name: String, value: String)] {
        var headers: [(name: String, value: String)] = []
        var lines: [ArraySlice<UInt8>] = []
        let text = Array(bytes)
        var start = 0
        var index = 0
        while index + 1 < text.count {
            if text[index] == 0x0D && text[index + 1] == 0x0A {
                lines.append(text[start..<index])
                index += 2
                start = index
            } else {
                index += 1
            }
        }
        lines.append(text[start...])
        for line in lines where !line.isEmpty {
            guard let colon = line.firstIndex(of: UInt8(ascii: ":")) else {
                throw ParseError(description: "malformed part header line")
            }
            let name = String(decoding: line[line.startIndex..<colon], as: UTF8.self).lowercased()
            var value = line[(colon + 1)...]
            while value.first == 0x20 || value.first == 0x09 { value = value.dropFirst() }
            while value.last == 0x20 || value.last == 0x09 { value = value.dropLast() }
            headers.append((name: name, value: String(decoding: value, as: UTF8.self)))
        }
        return headers
    }

    /// The offset of `needle` in `haystack` (memmem), or `nil`.
    static func find(_ needle: [UInt8], in haystack: UnsafeRawBufferPointer) -> Int? {
        guard haystack.count >= needle.count, let base = haystack.baseAddress else { return nil }
        return needle.withUnsafeBytes { n -> Int? in
            guard let found = cferry_memmem(base, haystack.count, n.baseAddress, n.count) else { return nil }
            return base.distance(to: UnsafeRawPointer(found))
        }
    }
}

/// Parameters of a `Content-Disposition` or `Content-Type` header value.
enum HeaderParameters {
    /// Splits `form-data; name="a"; filename="b"` into its parameters (names lowercased). Quoted
    /// values are taken literally up to the closing quote, as browsers write them.
    static func parse(_ value: String) -> (value: String, parameters: [String: String]) {
        let bytes = Array(value.utf8)
        var index = 0
        func skipSpaces() { while index < bytes.count && (bytes[index] == 0x20 || bytes[index] == 0x09) { index += 1 } }
        var first: [UInt8] = []
        while index < bytes.count && bytes[index] != UInt8(ascii: ";") { first.append(bytes[index]); index += 1 }
        var parameters: [String: String] = [:]
        while index < bytes.count {
            index += 1  // ';'
            skipSpaces()
            var name: [UInt8] = []
            while index < bytes.count && bytes[index] != UInt8(ascii: "=") && bytes[index] != UInt8(ascii: ";") {
                name.append(bytes[index]); index += 1
            }
            var parameterValue: [UInt8] = []
            if index < bytes.count && bytes[index] == UInt8(ascii: "=") {
                index += 1
                skipSpaces()
                if index < bytes.count && bytes[index] == UInt8(ascii: "\"") {
                    index += 1
                    while index < bytes.count && bytes[index] != UInt8(ascii: "\"") { parameterValue.append(bytes[index]); index += 1 }
                    index += 1  // closing quote
                    while index < bytes.count && bytes[index] != UInt8(ascii: ";") { index += 1 }
                } else {
                    while index < bytes.count && bytes[index] != UInt8(ascii: ";") { parameterValue.append(bytes[index]); index += 1 }
                    while parameterValue.last == 0x20 || parameterValue.last == 0x09 { parameterValue.removeLast() }
                }
            }
            let key = String(decoding: name, as: UTF8.self).trimmingSpaces().lowercased()
            if !key.isEmpty && parameters[key] == nil { parameters[key] = String(decoding: parameterValue, as: UTF8.self) }
        }
        return (String(decoding: first, as: UTF8.self).trimmingSpaces(), parameters)
    }

    /// Reverses the browsers' escaping of `name` and `filename`: `%22` → `"`, `%0D` → CR, `%0A` → LF;
    /// and a doubled backslash (Ferry doubles one that a quoted-pair reader would take for an
    /// escape) → one.
    static func unescapeWHATWG(_ text: String) -> String {
        guard text.contains("%") || text.contains("\\\\") else { return text }
        var out: [UInt8] = []
        let bytes = Array(text.utf8)
        var index = 0
        while index < bytes.count {
            if bytes[index] == 0x5C, index + 1 < bytes.count, bytes[index + 1] == 0x5C {
                out.append(0x5C)
                index += 2
                continue
            }
            if bytes[index] == UInt8(ascii: "%"), index + 2 < bytes.count {
                let code = String(decoding: bytes[(index + 1)...(index + 2)], as: UTF8.self).uppercased()
                let replacement: UInt8? = code == "22" ? 0x22 : code == "0D" ? 0x0D : code == "0A" ? 0x0A : nil
                if let replacement {
                    out.append(replacement)
                    index += 3
                    continue
                }
            }
            out.append(bytes[index])
            index += 1
        }
        return String(decoding: out, as: UTF8.self)
    }
}

extension String {
    func trimmingSpaces() -> String {
        var s = Substring(self)
        while let c = s.first, c == " " || c == "\t" { s = s.dropFirst() }
        while let c = s.last, c == " " || c == "\t" { s = s.dropLast() }
        return String(s)
    }
}

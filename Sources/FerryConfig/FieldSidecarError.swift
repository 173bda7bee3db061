/// Why a field sidecar (`<name>.fields.toml`, or `.fields.toml` inside a bundle) cannot be used:
/// the file it belongs to is rejected with this text in its `.error.json`, never sent with other
/// fields than its producer meant.
public struct FieldSidecarError: Error, Sendable, Equatable, CustomStringConvertible {
    /// The line of the sidecar the problem is on, when known.
    public var line: Int?
    /// The field name (the TOML key) the problem is about, when there is one.
    public var key: String?
    /// What is wrong, and what to write instead where that helps.
    public var message: String

    public init(line: Int? = nil, key: String? = nil, message: String) {
        self.line = line
        self.key = key
        self.message = message
    }

    /// `line 3, key "alt": …`, `key "alt": …`, `line 2: …` or the message alone. The key is written
    /// as a TOML basic string, so a name holding a quote or a control character shows as written.
    public var description: String {
        let shownKey = key.map { "key \(FieldSidecar.basicString($0))" }
        switch (line, shownKey) {
        case (let line?, let shownKey?): return "line \(line), \(shownKey): \(message)"
        case (nil, let shownKey?): return "\(shownKey): \(message)"
        case (let line?, nil): return "line \(line): \(message)"
        case (nil, nil): return message
        }
    }
}

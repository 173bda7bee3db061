/// One problem found in a configuration file: where it is, which key, and what to do about it.
public struct ConfigurationIssue: Sendable, Equatable, CustomStringConvertible {
    /// The configuration file's path.
    public var file: String
    /// The 1-based line, when it is known.
    public var line: Int?
    /// The key path, e.g. `spool[0].retry.max_delay`; `nil` for problems with the file as a whole.
    public var keyPath: String?
    /// What is wrong and how to fix it.
    public var message: String

    public init(file: String, line: Int?, keyPath: String?, message: String) {
        self.file = file
        self.line = line
        self.keyPath = keyPath
        self.message = message
    }

    /// `FILE:LINE: KEY: MESSAGE`, the form compilers use, so editors can jump to it.
    public var description: String {
        var text = file
        if let line { text += ":\(line)" }
        text += ": "
        if let keyPath { text += "\(keyPath): " }
        return text + message
    }
}

/// A configuration that cannot be used, with every problem found in it.
public struct ConfigurationError: Error, Sendable, CustomStringConvertible {
    /// The problems, in the order they appear in the file.
    public var issues: [ConfigurationIssue]

    public init(issues: [ConfigurationIssue]) { self.issues = issues }

    public var description: String { issues.map(\.description).joined(separator: "\n") }
}

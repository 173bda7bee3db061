import Foundation

/// A configured text value that may name secrets (`${env:NAME}`, `${file:/path}`,
/// `${credential:NAME}`) and, in form fields, per-file placeholders (`{filename}`, `{size}`, …).
///
/// Secrets are resolved once, when the configuration is loaded, so a missing credential is a
/// configuration error rather than a failed upload; placeholders are filled in per file when its
/// body is built. Write `{{` and `}}` for literal braces in a field.
public struct ValueTemplate: Sendable, Equatable {
    /// A piece of a template.
    public enum Segment: Sendable, Equatable {
        case literal(String)
        case placeholder(Placeholder)
    }

    /// The per-file values a form field may contain.
    public enum Placeholder: String, Sendable, CaseIterable {
        /// The file's base name.
        case filename
        /// The file's size in bytes, in decimal.
        case size
        /// The file's modification time, RFC 3339 in UTC, e.g. `2026-11-22T09:30:00Z`.
        case mtime
        /// The SHA-256 of the file's bytes, 64 lowercase hex digits.
        case sha256
        /// The file's path relative to its spool directory.
        case relativePath = "relative_path"
        /// The job id, the same as the `Idempotency-Key` header.
        case id
    }

    /// The template's pieces, secrets already resolved into literals.
    public var segments: [Segment]
    /// Whether a secret went into this value: such a value is never logged or shown.
    public var containsSecret: Bool
    /// The value as configured, with each secret shown as `***`: safe to log or write to a sidecar.
    public var redacted: String
    /// The values the secret references resolved to, for taking them out of what a server echoes.
    public var secretValues: [String] = []

    public init(segments: [Segment], containsSecret: Bool, redacted: String? = nil) {
        self.segments = segments
        self.containsSecret = containsSecret
        self.redacted = redacted ?? (containsSecret ? "***" : Self.plainText(segments))
    }

    private static func plainText(_ segments: [Segment]) -> String {
        segments.map { segment in
            switch segment {
            case .literal(let text): text
            case .placeholder(let placeholder): "{\(placeholder.rawValue)}"
            }
        }.joined()
    }

    /// A template with no placeholders and no secrets.
    public static func literal(_ text: String) -> ValueTemplate {
        ValueTemplate(segments: text.isEmpty ? [] : [.literal(text)], containsSecret: false)
    }

    /// The placeholders the template uses.
    public var placeholders: Set<Placeholder> {
        Set(segments.compactMap { if case .placeholder(let p) = $0 { p } else { nil } })
    }

    /// The text with every placeholder replaced by `value(placeholder)`.
    public func render(_ value: (Placeholder) -> String) -> String {
        var text = ""
        for segment in segments {
            switch segment {
            case .literal(let literal): text += literal
            case .placeholder(let placeholder): text += value(placeholder)
            }
        }
        return text
    }

    /// The text of a template that has no placeholders (headers, URLs).
    public var text: String { render { _ in "" } }
}

/// Where a secret reference (`${KIND:ARGUMENT}`) reads its value from.
public struct SecretSources: Sendable {
    /// The environment `${env:NAME}` reads.
    public var environment: [String: String]
    /// The directory `${credential:NAME}` reads from: systemd's `$CREDENTIALS_DIRECTORY`.
    public var credentialsDirectory: String?
    /// Reads a whole file; injectable for tests.
    public var readFile: @Sendable (String) throws(SecretReadError) -> String

    public init(
        environment: [String: String], credentialsDirectory: String?,
        readFile: @escaping @Sendable (String) throws(SecretReadError) -> String = SecretSources.readTextFile
    ) {
        self.environment = environment
        self.credentialsDirectory = credentialsDirectory
        self.readFile = readFile
    }

    /// Why a secret file could not be read.
    public struct SecretReadError: Error, Sendable {
        public var message: String
        public init(message: String) { self.message = message }
    }

    /// Reads a file as UTF-8 text.
    @Sendable public static func readTextFile(_ path: String) throws(SecretReadError) -> String {
        guard let bytes = readWholeFile(path) else {
            throw SecretReadError(message: "cannot read \(path): \(lastErrorMessage())")
        }
        guard let text = String(validating: bytes, as: UTF8.self) else {
            throw SecretReadError(message: "\(path) is not UTF-8 text")
        }
        return text
    }
}

/// Parses configured values into templates.
struct TemplateParser {
    var secrets: SecretSources

    /// Parses `text`. Placeholders are recognised only when `allowPlaceholders` (form fields);
    /// elsewhere a `{` is literal. Secret references are resolved unless `allowSecrets` is false
    /// (text from outside ferry.toml, such as a field sidecar), when any `${` is refused without
    /// being resolved. Returns a message on failure.
    func parse(_ text: String, allowPlaceholders: Bool, allowSecrets: Bool = true) -> Result<ValueTemplate, TemplateFailure> {
        var segments: [ValueTemplate.Segment] = []
        var literal = ""
        var containsSecret = false
        var secretValues: [String] = []
        var redacted = ""
        var rest = Substring(text)
        func flushLiteral() {
            if !literal.isEmpty { segments.append(.literal(literal)); literal = "" }
        }
        while let char = rest.first {
            if rest.hasPrefix("${") {
                guard allowSecrets else {
                    return .failure(.init("secret references (${…}) may only appear in ferry.toml"))
                }
                guard let close = rest.firstIndex(of: "}") else {
                    return .failure(.init("\"${\" starts a secret reference but there is no closing \"}\""))
                }
                let reference = String(rest[rest.index(rest.startIndex, offsetBy: 2)..<close])
                switch resolveSecret(reference) {
                case .success(let value):
                    literal += value
                    secretValues.append(value)
                case .failure(let failure): return .failure(failure)
                }
                redacted += "***"
                containsSecret = true
                rest = rest[rest.index(after: close)...]
            } else if allowPlaceholders && rest.hasPrefix("{{") {
                literal += "{"
                redacted += "{"
                rest = rest.dropFirst(2)
            } else if allowPlaceholders && rest.hasPrefix("}}") {
                literal += "}"
                redacted += "}"
                rest = rest.dropFirst(2)
            } else if allowPlaceholders && char == "{" {
                guard let close = rest.firstIndex(of: "}") else {
                    return .failure(.init("\"{\" starts a placeholder but there is no closing \"}\" (write \"{{\" for a literal brace)"))
                }
                let name = String(rest[rest.index(after: rest.startIndex)..<close])
                guard let placeholder = ValueTemplate.Placeholder(rawValue: name) else {
                    let known = ValueTemplate.Placeholder.allCases.map { "{\($0.rawValue)}" }.joined(separator: " ")
                    return .failure(.init("unknown placeholder \"{\(name)}\"; the placeholders are \(known), and \"{{\" for a literal brace"))
                }
                flushLiteral()
                segments.append(.placeholder(placeholder))
                redacted += "{\(name)}"
                rest = rest[rest.index(after: close)...]
            } else if allowPlaceholders && char == "}" {
                return .failure(.init("a lone \"}\" (write \"}}\" for a literal brace)"))
            } else {
                literal.append(char)
                redacted.append(char)
                rest = rest.dropFirst()
            }
        }
        flushLiteral()
        var template = ValueTemplate(segments: segments, containsSecret: containsSecret, redacted: redacted)
        template.secretValues = secretValues
        return .success(template)
    }

    /// The value of `kind:argument`, with one trailing newline removed from file contents.
    private func resolveSecret(_ reference: String) -> Result<String, TemplateFailure> {
        guard let colon = reference.firstIndex(of: ":") else {
            return .failure(.init("\"${\(reference)}\" is not a secret reference; use ${env:NAME}, ${file:/path} or ${credential:NAME}"))
        }
        let kind = reference[..<colon]
        let argument = String(reference[reference.index(after: colon)...])
        guard !argument.isEmpty else {
            return .failure(.init("\"${\(reference)}\" names no \(kind)"))
        }
        switch kind {
        case "env":
            guard let value = secrets.environment[argument] else {
                return .failure(.init("environment variable \(argument) (from ${env:\(argument)}) is not set"))
            }
            return .success(value)
        case "file":
            guard argument.hasPrefix("/") else {
                return .failure(.init("${file:\(argument)} needs an absolute path"))
            }
            do {
                return .success(Self.trimFinalNewline(try secrets.readFile(argument)))
            } catch {
                return .failure(.init("${file:\(argument)}: \(error.message)"))
            }
        case "credential":
            guard let directory = secrets.credentialsDirectory, !directory.isEmpty else {
                return .failure(.init(
                    "${credential:\(argument)} needs $CREDENTIALS_DIRECTORY, which systemd sets for LoadCredential=\(argument):…; outside systemd use ${file:/path} or ${env:NAME}"
                ))
            }
            guard !argument.contains("/") else {
                return .failure(.init("credential name \"\(argument)\" must not contain \"/\""))
            }
            do {
                return .success(Self.trimFinalNewline(try secrets.readFile(directory + "/" + argument)))
            } catch {
                return .failure(.init("${credential:\(argument)}: \(error.message)"))
            }
        default:
            return .failure(.init("unknown secret source \"\(kind)\" in \"${\(reference)}\"; use env, file or credential"))
        }
    }

    /// Secret files usually end with one newline that is not part of the secret.
    static func trimFinalNewline(_ text: String) -> String {
        var bytes = Array(text.utf8)
        if bytes.last == 0x0A {
            bytes.removeLast()
            if bytes.last == 0x0D { bytes.removeLast() }
        }
        return String(decoding: bytes, as: UTF8.self)
    }
}

/// A template that cannot be used; the message never contains a secret's value.
struct TemplateFailure: Error {
    var message: String
    init(_ message: String) { self.message = message }
}

extension ValueTemplate {
    /// The URL with secrets shown as `***` and without query, fragment or credentials: safe to log
    /// and to write into sidecars.
    public var redactedURL: String {
        guard var components = URLComponents(string: redacted) else { return "(URL not shown: it holds a secret)" }
        components.query = nil
        components.fragment = nil
        components.user = nil
        components.password = nil
        guard var shown = components.string else { return "(URL not shown: it holds a secret)" }
        // URLComponents percent-encodes the braces of a raw PUT's {filename}: show them as written.
        if !placeholders.isEmpty {
            shown = shown.replacingOccurrences(of: "%7B", with: "{").replacingOccurrences(of: "%7D", with: "}")
        }
        return shown
    }

    /// `text` (a URL as written, valid or not) with anything that may be a user name or password
    /// shown as `***`: everything between `://` and the last `@`. It may hide more than the
    /// credentials (an `@` in the path), never less, even when a password holds `/`, `#` or `?`.
    public static func withoutUserInfo(_ text: String) -> String {
        guard let scheme = text.range(of: "://"), let at = text.range(of: "@", options: .backwards),
              at.lowerBound >= scheme.upperBound else { return text }
        return String(text[..<scheme.upperBound]) + "***" + String(text[at.lowerBound...])
    }

    /// `text` (a URL as written, valid or not) as an error message may show it: without user
    /// information (``withoutUserInfo(_:)``) and without its query, which may hold a pre-signed
    /// URL's signature or token (`?X-Amz-Signature=…` becomes `?…`).
    public static func shownInMessages(_ text: String) -> String {
        let shown = withoutUserInfo(text)
        guard let query = shown.firstIndex(of: "?") else { return shown }
        return String(shown[..<query]) + "?…"
    }
}

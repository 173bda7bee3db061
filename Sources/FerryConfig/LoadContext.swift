import Foundation
import TOMLKit

/// Collects problems while the document is read, so all of them are reported at once, and holds
/// the checks several parts of the configuration share (paths, header text, templates).
final class LoadContext {
    let file: String
    let locator: TOMLKeyLocator
    let templates: TemplateParser
    let baseDirectory: String
    var issues: [ConfigurationIssue] = []

    init(file: String, locator: TOMLKeyLocator, secrets: SecretSources) {
        self.file = file
        self.locator = locator
        self.templates = TemplateParser(secrets: secrets)
        let absolute = file.hasPrefix("/") ? file : FileManager.default.currentDirectoryPath + "/" + file
        self.baseDirectory = String(absolute[..<(absolute.lastIndex(of: "/") ?? absolute.startIndex)])
    }

    func report(_ path: KeyPath, _ message: String) {
        issues.append(ConfigurationIssue(
            file: file, line: locator.line(for: path), keyPath: path.segments.isEmpty ? nil : path.description,
            message: message))
    }

    /// Throws the problems found, in the order they appear in the file, if there are any.
    func throwIssues() throws(ConfigurationError) {
        guard !issues.isEmpty else { return }
        let sorted = issues.enumerated().sorted {
            ($0.element.line ?? .max, $0.offset) < ($1.element.line ?? .max, $1.offset)
        }.map(\.element)
        throw ConfigurationError(issues: sorted)
    }

    /// Whether `path` is `base` or below it (both normalised).
    static func isSameOrInside(_ path: String, _ base: String) -> Bool {
        path == base || path.hasPrefix(base == "/" ? "/" : base + "/")
    }

    /// `path` as the directory it names on disk: normalised, then symlinks resolved (realpath(3)) as
    /// far as it exists, the rest appended as written. Paths are compared this way, so that a spool
    /// configured through a symlink is seen to be the directory it points at.
    static func resolved(_ path: String) -> String {
        var existing = normalized(path)
        var rest: [String] = []
        while true {
            if let real = realpath(existing, nil) {
                defer { free(real) }
                let base = String(cString: real)
                return rest.isEmpty ? base : normalized(base + "/" + rest.reversed().joined(separator: "/"))
            }
            guard existing != "/", let slash = existing.lastIndex(of: "/") else { return normalized(path) }
            rest.append(String(existing[existing.index(after: slash)...]))
            existing = slash == existing.startIndex ? "/" : String(existing[..<slash])
        }
    }

    static func normalized(_ path: String) -> String {
        var parts: [Substring] = []
        for part in path.split(separator: "/") where part != "." {
            if part == ".." { _ = parts.popLast() } else { parts.append(part) }
        }
        return "/" + parts.joined(separator: "/")
    }

    func parseTemplate(_ text: String, at path: KeyPath, allowPlaceholders: Bool) -> Result<ValueTemplate, TemplateFailure> {
        let result = templates.parse(text, allowPlaceholders: allowPlaceholders)
        if case .failure(let failure) = result { report(path, failure.message) }
        return result
    }

    func template(_ text: String, at path: KeyPath, allowPlaceholders: Bool) -> ValueTemplate? {
        try? parseTemplate(text, at: path, allowPlaceholders: allowPlaceholders).get()
    }

    /// A file part's field name (`file_field`, `bundle_file_field`): header material, and not
    /// ending in a backslash. The part's header is `name="…"; filename="…"`, and a reader of
    /// quoted-pairs (python-multipart, Python's `email`) takes a last backslash, even doubled, for
    /// an escape of the closing quote: the file would arrive as a text field.
    func checkFileFieldName(_ name: String, at path: KeyPath) -> Bool {
        guard checkHeaderText(name, what: "the field name", at: path, allowEmpty: false) else { return false }
        if name.hasSuffix("\\") {
            report(path, "the field name \"\(name)\" ends in a backslash, which python-multipart (FastAPI, Starlette) and Python's email read as escaping the closing quote: the file would arrive as a text field; drop the backslash")
            return false
        }
        return true
    }

    /// Rejects CR, LF and NUL, which would split or truncate a header, and for an HTTP header's
    /// value (`inHeader`) every other control character but tab, which HTTP does not allow there
    /// (RFC 9110 §5.5). The message never quotes the text, which may hold a secret. Returns whether
    /// the text is acceptable.
    @discardableResult
    func checkHeaderText(_ text: String, what: String, at path: KeyPath, allowEmpty: Bool, inHeader: Bool = false) -> Bool {
        if !allowEmpty && text.isEmpty {
            report(path, "\(what) must not be empty")
            return false
        }
        if let bad = text.utf8.first(where: { $0 == 0x0D || $0 == 0x0A || $0 == 0 }) {
            let name = bad == 0x0D ? "a carriage return (CR)" : bad == 0x0A ? "a line feed (LF)" : "a NUL byte"
            report(path, "\(what) contains \(name); header material may not contain CR, LF or NUL")
            return false
        }
        if inHeader, let bad = text.utf8.first(where: { ($0 < 0x20 && $0 != 0x09) || $0 == 0x7F }) {
            let code = String(bad, radix: 16, uppercase: true)
            report(path, "\(what) contains a control character (0x\(code.count == 1 ? "0" : "")\(code)); an HTTP header may hold only visible characters, spaces and tabs")
            return false
        }
        return true
    }

    /// A field or header value: a string, or an integer, float or boolean written as TOML would.
    func scalarText(_ value: TOMLValueConvertible?, at path: KeyPath) -> String? {
        guard let value else { return nil }
        switch value.type {
        case .string: return value.string
        case .int: return value.int.map(String.init)
        case .double: return value.double.map { String($0) }
        case .bool: return value.bool.map { $0 ? "true" : "false" }
        default:
            report(path, "expected a string, got \(Self.article(value.type))")
            return nil
        }
    }

    static func article(_ type: TOMLType) -> String {
        switch type {
        case .int: "an integer"
        case .bool: "a boolean"
        case .double: "a floating-point number"
        case .array: "an array"
        case .dateTime: "a date-time"
        default: "a \(type)"
        }
    }

    /// Resolves a configured path against the configuration file's directory, without `.`, `..`
    /// or doubled slashes, so paths compare as the directories they name.
    func absolutePath(_ text: String) -> String {
        Self.normalized(text.hasPrefix("/") ? text : baseDirectory + "/" + text)
    }
}

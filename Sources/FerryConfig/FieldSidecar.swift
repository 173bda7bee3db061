import FerryPortable
import TOMLKit

/// Fields for one file (or one bundle) of a multipart spool: a small TOML file written beside it,
/// `<name>.fields.toml`, or `.fields.toml` inside a bundle's directory.
///
/// It holds top-level keys only, each `name = "value"` or, for a field sent several times, `name =
/// ["v1", "v2"]`. Values take the placeholders of `[spool.fields]` (`{filename}`, `{size}`, …, `{{`
/// and `}}` for braces) but never secret references: a producer must not be able to pull ferryd's
/// secrets into a request. Names may not hold CR, LF or NUL (they are in a part's header), values
/// not NUL (their line breaks are sent as they are); a name may not be the file part's. The fields
/// are merged over the spool's (``merged(spool:file:)``): per-file values win.
public enum FieldSidecar {
    /// `"<name>.fields.toml"` beside a file holds that file's fields.
    public static let suffix = ".fields.toml"
    /// The file inside a bundle's directory that holds the bundle's fields.
    public static let bundleSidecarName = ".fields.toml"
    /// The largest sidecar read, in bytes (64 KiB).
    public static let sizeLimit = 65_536
    /// The most fields one sidecar may give (each value of an array counts).
    static let fieldLimit = 1000

    /// The sidecar's name for the file named `fileName`: the name with ``suffix`` appended.
    public static func name(for fileName: [UInt8]) -> [UInt8] {
        fileName + Array(suffix.utf8)
    }

    /// Whether `name` is a sidecar's name: it ends with ``suffix`` and is longer than it (so the
    /// bundle sidecar `.fields.toml` alone is not one; inside a bundle it is known by its name).
    public static func isSidecarName(_ name: [UInt8]) -> Bool {
        let suffixBytes = Array(suffix.utf8)
        return name.count > suffixBytes.count && name.suffix(suffixBytes.count).elementsEqual(suffixBytes)
    }

    /// The fields `bytes` gives, in the order their keys appear in the text; an array's values in
    /// its order. `fileField` is the name of the file part (or parts) they go with, which no field
    /// may take. Throws the first problem, in the order of the text.
    public static func parse(_ bytes: [UInt8], fileField: String) throws(FieldSidecarError) -> [NamedValue] {
        guard bytes.count <= sizeLimit else {
            throw FieldSidecarError(message: "the sidecar is \(bytes.count) bytes; the most is \(sizeLimit) (64 KiB)")
        }
        guard let text = String(validating: bytes, as: UTF8.self) else {
            throw FieldSidecarError(message: "the sidecar is not UTF-8 text")
        }
        // TOMLKit reads the text as a C string: a raw NUL byte would silently end the document early.
        if let nul = bytes.firstIndex(of: 0) {
            throw FieldSidecarError(line: 1 + bytes[..<nul].count(where: { $0 == 0x0A }), message: "the sidecar contains a NUL byte")
        }
        let table: TOMLTable
        do {
            table = try TOMLTable(string: text)
        } catch let error as TOMLParseError {
            throw FieldSidecarError(
                line: error.source.begin.line,
                message: "TOML syntax error: \(error.description) (column \(error.source.begin.column))")
        } catch {
            throw FieldSidecarError(message: "TOML syntax error: \(error)")
        }
        // TOMLKit hands strings over as C strings, cutting a value at an escaped NUL: refuse those.
        if let line = ConfigurationLoader.lineWithEscapedNUL(text) {
            throw FieldSidecarError(line: line, message: "a NUL character (\\u0000) is not allowed in a field name or value")
        }

        let locator = TOMLKeyLocator(text: text)
        let templates = TemplateParser(secrets: SecretSources(environment: [:], credentialsDirectory: nil))
        var fields: [NamedValue] = []
        for (key, line) in keysInTextOrder(table.keys, locator: locator) {
            func failure(_ message: String) -> FieldSidecarError { FieldSidecarError(line: line, key: key, message: message) }
            if key.isEmpty { throw failure("the field name must not be empty") }
            if let problem = headerTextProblem(key) { throw failure("the field name contains \(problem)") }
            if key == fileField {
                throw failure("\"\(key)\" is the name of the file part; a field may not take it")
            }
            for (index, text) in try values(of: table[key], failure: failure) {
                let what = index.map { "element \($0) of the value" } ?? "the value"
                // A value is a part's body, where line breaks are the text's own (alt text, captions);
                // a NUL was refused with the whole text above.
                switch templates.parse(text, allowPlaceholders: true, allowSecrets: false) {
                case .success(let template): fields.append(NamedValue(name: key, value: template))
                case .failure(let problem): throw failure(index == nil ? problem.message : "\(what): \(problem.message)")
                }
                if fields.count > fieldLimit {
                    throw failure("the sidecar gives more than \(fieldLimit) fields")
                }
            }
        }
        return fields
    }

    /// The fields of one request: `spool`'s in their order, a name `file` gives replaced at its
    /// (first) place by all of `file`'s values for it; then `file`'s other fields in `file`'s order.
    /// Per-file values win.
    public static func merged(spool: [NamedValue], file: [NamedValue]) -> [NamedValue] {
        let given = Set(file.map(\.name))
        var placed = Set<String>()
        var result: [NamedValue] = []
        for field in spool {
            guard given.contains(field.name) else {
                result.append(field)
                continue
            }
            if placed.insert(field.name).inserted {
                result += file.filter { $0.name == field.name }
            }
        }
        result += file.filter { !placed.contains($0.name) }
        return result
    }

    /// A sidecar's text for `fields` (what `ferryctl enqueue --field name=value` writes): one line per
    /// name in order of first appearance, a name given more than once as an array of its values in
    /// their order. Values are written as given (placeholders stay placeholders) as TOML basic
    /// strings. It is not checked: ``parse(_:fileField:)`` refuses what a sidecar may not hold.
    public static func encode(_ fields: [(name: String, value: String)]) -> [UInt8] {
        var names: [String] = []
        var values: [String: [String]] = [:]
        for field in fields {
            if values[field.name] == nil { names.append(field.name) }
            values[field.name, default: []].append(field.value)
        }
        var text = ""
        for name in names {
            let given = values[name] ?? []
            let value = given.count == 1 ? basicString(given[0]) : "[" + given.map(basicString).joined(separator: ", ") + "]"
            text += "\(key(name)) = \(value)\n"
        }
        return Array(text.utf8)
    }

    /// `text` as a TOML basic string: quoted, with `"`, `\` and every control character escaped.
    static func basicString(_ text: String) -> String { QuotedString.basic(text) }

    /// `name` as a TOML key: bare when it is only ASCII letters, digits, `_` and `-`, else quoted.
    private static func key(_ name: String) -> String {
        let bare = !name.isEmpty && name.utf8.allSatisfy { byte in
            (byte >= 0x30 && byte <= 0x39) || (byte >= 0x41 && byte <= 0x5A) || (byte >= 0x61 && byte <= 0x7A)
                || byte == UInt8(ascii: "_") || byte == UInt8(ascii: "-")
        }
        return bare ? name : basicString(name)
    }

    /// The keys of the document with their lines, in the order they are written. TOMLKit's tables
    /// keep their keys sorted (toml++ stores them in a `std::map`), so the order comes from the text:
    /// each key's line as ``TOMLKeyLocator`` finds it (as the configuration's error messages do);
    /// a key it cannot place (an unusual escape in a quoted key) comes after, in sorted order.
    private static func keysInTextOrder(_ keys: [String], locator: TOMLKeyLocator) -> [(key: String, line: Int?)] {
        keys.enumerated()
            .map { (offset: $0.offset, key: $0.element, line: locator.line(for: KeyPath().appending($0.element))) }
            .sorted { ($0.line ?? .max, $0.offset) < ($1.line ?? .max, $1.offset) }
            .map { (key: $0.key, line: $0.line) }
    }

    /// The value's strings, each with its index in an array (`nil` for a lone string).
    private static func values(
        of value: TOMLValueConvertible?, failure: (String) -> FieldSidecarError
    ) throws(FieldSidecarError) -> [(index: Int?, text: String)] {
        guard let value else { return [] }
        if value.type == .string, let text = value.string { return [(nil, text)] }
        guard value.type == .array, let array = value.array else {
            let hint = value.type == .table ? " (a sidecar has top-level keys only: write name = \"value\")" : ""
            throw failure("expected a string or an array of strings, got \(LoadContext.article(value.type))\(hint)")
        }
        var texts: [(index: Int?, text: String)] = []
        for (index, element) in array.enumerated() {
            guard element.type == .string, let text = element.string else {
                throw failure("expected an array of strings, but element \(index) is \(LoadContext.article(element.type))")
            }
            texts.append((index, text))
        }
        if texts.isEmpty {
            throw failure("an empty array gives the field no value; leave the key out, or give it at least one value")
        }
        return texts
    }

    /// Which of CR, LF and NUL the field name `text` holds first, named; `nil` if none (a name is
    /// in the part's header, which they would split or cut; values may hold line breaks).
    private static func headerTextProblem(_ text: String) -> String? {
        guard let bad = text.utf8.first(where: { $0 == 0x0D || $0 == 0x0A || $0 == 0 }) else { return nil }
        let name = bad == 0x0D ? "a carriage return (CR)" : bad == 0x0A ? "a line feed (LF)" : "a NUL byte"
        return "\(name); field names may not contain CR, LF or NUL"
    }
}

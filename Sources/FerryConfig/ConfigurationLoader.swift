import Foundation
import Logging
import TOMLKit

/// Reads `ferry.toml` into a ``FerryConfiguration``, or explains every problem in it.
///
/// Errors name the file, the line and the key path. Unknown keys are errors, so a typo never
/// silently turns a setting off; secrets are resolved here so a missing credential stops the daemon
/// at start rather than failing every upload later.
public struct ConfigurationLoader: Sendable {
    /// Where secret references read from.
    public var secrets: SecretSources

    public init(secrets: SecretSources) { self.secrets = secrets }

    /// A loader reading secrets from this process's environment and `$CREDENTIALS_DIRECTORY`.
    public static func fromProcessEnvironment() -> ConfigurationLoader {
        let environment = ProcessInfo.processInfo.environment
        return ConfigurationLoader(secrets: SecretSources(
            environment: environment, credentialsDirectory: environment["CREDENTIALS_DIRECTORY"]))
    }

    /// Loads the file at `path`.
    public func load(path: String) throws(ConfigurationError) -> FerryConfiguration {
        try parse(Self.readText(path), path: path)
    }

    /// Parses `text` as if read from `path`; relative paths in it are resolved against `path`'s directory.
    public func parse(_ text: String, path: String) throws(ConfigurationError) -> FerryConfiguration {
        let root = try Self.document(text, path: path)
        let context = LoadContext(file: path, locator: TOMLKeyLocator(text: text), secrets: secrets)
        let configuration = context.configuration(from: root)
        try context.throwIssues()
        return configuration
    }

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
}

extension ConfigurationLoader {
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

/// Collects problems while the document is read, so all of them are reported at once.
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

    static let topLevelKeys: Set<String> = [
        "state_directory", "control_socket", "max_concurrent_uploads", "log_level", "shutdown_timeout",
        "rescan_interval", "spool", "control_group", "control_read_only_for_others", "control_idle_timeout",
        "metrics_listen",
    ]
    static let spoolKeys: Set<String> = [
        "name", "directory", "recursive", "url", "protocol", "method", "chunk_size", "file_field", "file_content_type", "settle",
        "after_upload", "sent_directory", "failed_directory", "fields", "headers", "retry", "ca_file",
        "connect_timeout", "no_progress_timeout",
    ]
    /// Headers of the tus protocol (refused in a tus spool's headers: they would contradict Ferry's).
    static let tusHeaders: Set<String> = [
        "tus-resumable", "upload-offset", "upload-length", "upload-metadata", "upload-checksum", "upload-concat",
        "upload-defer-length", "x-http-method-override",
    ]
    static let retryKeys: Set<String> = ["initial_delay", "max_delay", "max_attempts", "max_age"]

    /// Headers Ferry sets itself; configuring them would corrupt the request.
    static let reservedHeaders: Set<String> = [
        "content-type", "content-length", "transfer-encoding", "host", "connection", "idempotency-key",
        "user-agent", "expect", "te", "upgrade", "keep-alive", "trailer",
    ]

    func configuration(from root: TOMLTable) -> FerryConfiguration {
        let reader = TableReader(table: root, path: KeyPath(), context: self)
        reader.rejectUnknownKeys(Self.topLevelKeys)
        let stateDirectory = reader.path("state_directory") ?? "/var/lib/ferry"
        let controlSocket = controlSocket(reader)
        let maxConcurrent = reader.int("max_concurrent_uploads", in: 1...256) ?? 4
        var logLevel = Logger.Level.info
        if let text = reader.string("log_level") {
            if let level = Logger.Level(rawValue: text.lowercased()) {
                logLevel = level
            } else {
                let levels = Logger.Level.allCases.map(\.rawValue).joined(separator: ", ")
                report(KeyPath().appending("log_level"), "unknown log level \"\(text)\"; use one of \(levels)")
            }
        }
        let shutdownTimeout = reader.duration("shutdown_timeout", minimum: .zero) ?? .seconds(30)
        let rescanInterval = reader.duration("rescan_interval", minimum: .seconds(1)) ?? .seconds(300)
        var control = ControlAccess()
        if let group = reader.string("control_group") {
            if let gid = ControlAccess.groupID(named: group) {
                control.group = ControlAccess.Group(name: group, id: gid)
            } else {
                report(KeyPath().appending("control_group"), "no group named \"\(group)\" exists on this system; create it (groupadd \(group)) or remove the key")
            }
        }
        control.readOnlyForOthers = reader.bool("control_read_only_for_others") ?? true
        control.idleTimeout = reader.duration("control_idle_timeout", minimum: .seconds(1)) ?? .seconds(60)
        var metricsListen: ListenAddress?
        if let text = reader.string("metrics_listen") {
            switch ListenAddress.parse(text) {
            case .success(let address): metricsListen = address
            case .failure(let error): report(KeyPath().appending("metrics_listen"), error.message)
            }
        }

        var spools: [SpoolConfiguration] = []
        if let tables = reader.arrayOfTables("spool") {
            for (index, table) in tables.enumerated() {
                if let spool = spool(from: TableReader(table: table, path: KeyPath().appending("spool").appending(index: index), context: self)) {
                    spools.append(spool)
                }
            }
        }
        if spools.isEmpty && issues.isEmpty {
            report(KeyPath(), "no [[spool]] is configured; add at least one (see etc/ferry/ferry.toml for an example)")
        }
        checkSpoolsAreDistinct(spools)
        checkStateDirectory(stateDirectory, spools: spools)
        return FerryConfiguration(
            path: file, stateDirectory: stateDirectory, controlSocket: controlSocket,
            maxConcurrentUploads: maxConcurrent, logLevel: logLevel, shutdownTimeout: shutdownTimeout,
            rescanInterval: rescanInterval, spools: spools, control: control, metricsListen: metricsListen)
    }

    private func spool(from reader: TableReader) -> SpoolConfiguration? {
        reader.rejectUnknownKeys(Self.spoolKeys)
        let issuesBefore = issues.count
        let name = reader.string("name", required: true)
        if let name, name.isEmpty || !name.allSatisfy({ $0.isASCII && ($0.isLowercase || $0.isNumber || $0 == "_" || $0 == "-") }) {
            report(reader.path.appending("name"), "\"\(name)\" is not a valid spool name; use lowercase letters, digits, '_' and '-'")
        }
        let directory = reader.path("directory", required: true)
        let recursive = reader.bool("recursive") ?? false
        var uploadProtocol = UploadProtocol.multipart
        if let text = reader.string("protocol") {
            if let value = UploadProtocol(rawValue: text.lowercased()) {
                uploadProtocol = value
            } else {
                report(reader.path.appending("protocol"), "protocol must be \"multipart\", \"put\" or \"tus\", not \"\(text)\"")
            }
        }
        var url: ValueTemplate?
        if let text = reader.string("url", required: true) {
            // Only a raw PUT names the file in its URL (WebDAV, object stores): {filename}, {relative_path}.
            url = reader.template(text, key: "url", allowPlaceholders: uploadProtocol == .put)
            if let url { checkURL(url, at: reader.path.appending("url")) }
            if let url, url.placeholders.contains(.sha256) {
                report(reader.path.appending("url"), "{sha256} cannot be used in a URL (it would mean reading the whole file before sending it); use {filename}, {relative_path}, {size}, {mtime} or {id}")
            }
        }
        var method = uploadProtocol == .put ? "PUT" : "POST"
        if let text = reader.string("method") {
            method = text.uppercased()
            if uploadProtocol == .tus {
                report(reader.path.appending("method"), "method does not apply to protocol \"tus\" (it creates uploads with POST and sends them with PATCH); remove it")
            } else if method != "POST" && method != "PUT" {
                report(reader.path.appending("method"), "method must be \"POST\" or \"PUT\", not \"\(text)\"")
            }
        }
        var chunkSize: Int64?
        if reader.table["chunk_size"] != nil {
            if uploadProtocol != .tus {
                report(reader.path.appending("chunk_size"), "chunk_size applies only to protocol \"tus\"")
            } else {
                chunkSize = reader.size("chunk_size", minimum: 64 * 1024)
            }
        }
        if uploadProtocol != .multipart {
            for key in ["file_field"] where reader.table[key] != nil {
                report(reader.path.appending(key), "\(key) applies only to protocol \"multipart\" (this spool uses \"\(uploadProtocol.rawValue)\")")
            }
            if uploadProtocol == .put, reader.table["fields"] != nil {
                report(reader.path.appending("fields"), "fields are not sent by protocol \"put\" (the body is the file alone); use headers, or protocol \"multipart\" or \"tus\" (tus sends them as Upload-Metadata)")
            }
        }
        let fileField = reader.string("file_field") ?? "file"
        _ = checkHeaderText(fileField, what: "the field name", at: reader.path.appending("file_field"), allowEmpty: false)
        let fileContentType = reader.string("file_content_type")
        if let fileContentType {
            _ = checkHeaderText(fileContentType, what: "the content type", at: reader.path.appending("file_content_type"), allowEmpty: false)
        }
        let settle = reader.duration("settle", minimum: .zero) ?? .seconds(2)
        var afterUpload = AfterUpload.delete
        if let text = reader.string("after_upload") {
            if let value = AfterUpload(rawValue: text) {
                afterUpload = value
            } else {
                report(reader.path.appending("after_upload"), "after_upload must be \"delete\", \"keep\" or \"move\", not \"\(text)\"")
            }
        }
        let sentDirectory = reader.path("sent_directory")
        let failedDirectory = reader.path("failed_directory")

        var fields: [NamedValue] = []
        if let table = reader.table("fields") {
            let fieldsPath = reader.path.appending("fields")
            for key in table.keys {
                let keyPath = fieldsPath.appending(key)
                guard let text = scalarText(table[key], at: keyPath) else { continue }
                guard checkHeaderText(key, what: "the field name", at: keyPath, allowEmpty: false),
                      checkHeaderText(text, what: "the value", at: keyPath, allowEmpty: true) else { continue }
                if key == fileField && uploadProtocol == .multipart {
                    report(keyPath, "field \"\(key)\" has the same name as file_field")
                }
                if uploadProtocol == .tus {
                    if key.isEmpty || !key.unicodeScalars.allSatisfy({ $0.isASCII && $0.value > 0x20 && $0.value < 0x7F && $0 != "," }) {
                        report(keyPath, "\"\(key)\" cannot be a tus Upload-Metadata key (use ASCII without spaces or commas)")
                    } else if key == "filename" || key == "filetype" {
                        report(keyPath, "\"\(key)\" is sent by Ferry itself in Upload-Metadata (the file's name and type)")
                    }
                }
                if case .success(let template) = parseTemplate(text, at: keyPath, allowPlaceholders: true),
                   !template.containsSecret || checkHeaderText(template.text, what: "the value (after resolving secrets)", at: keyPath, allowEmpty: true) {
                    fields.append(NamedValue(name: key, value: template))
                }
            }
        }
        var headers: [NamedValue] = []
        if let table = reader.table("headers") {
            let headersPath = reader.path.appending("headers")
            for key in table.keys {
                let keyPath = headersPath.appending(key)
                guard let text = scalarText(table[key], at: keyPath) else { continue }
                if !Self.isToken(key) {
                    report(keyPath, "\"\(key)\" is not a valid header name")
                } else if Self.reservedHeaders.contains(key.lowercased()) {
                    report(keyPath, "header \(key) is set by Ferry and cannot be configured")
                } else if uploadProtocol == .tus && Self.tusHeaders.contains(key.lowercased()) {
                    report(keyPath, "header \(key) is part of the tus protocol, which Ferry speaks itself; remove it")
                }
                guard checkHeaderText(text, what: "the header value", at: keyPath, allowEmpty: true) else { continue }
                if case .success(let template) = parseTemplate(text, at: keyPath, allowPlaceholders: false),
                   !template.containsSecret || checkHeaderText(template.text, what: "the header value (after resolving secrets)", at: keyPath, allowEmpty: true) {
                    headers.append(NamedValue(name: key, value: template))
                }
            }
        }
        var retry = RetryPolicy()
        if let table = reader.table("retry") {
            let retryReader = TableReader(table: table, path: reader.path.appending("retry"), context: self)
            retryReader.rejectUnknownKeys(Self.retryKeys)
            retry.initialDelay = retryReader.duration("initial_delay", minimum: .milliseconds(1)) ?? retry.initialDelay
            retry.maxDelay = retryReader.duration("max_delay", minimum: .milliseconds(1)) ?? retry.maxDelay
            retry.maxAttempts = retryReader.int("max_attempts", in: 0...1_000_000) ?? retry.maxAttempts
            retry.maxAge = retryReader.duration("max_age", minimum: .seconds(1)) ?? retry.maxAge
            if retry.maxDelay < retry.initialDelay {
                report(retryReader.path.appending("max_delay"), "max_delay (\(DurationParser.format(retry.maxDelay))) is shorter than initial_delay (\(DurationParser.format(retry.initialDelay)))")
            }
        }
        let caFile = reader.path("ca_file")
        if let caFile, access(caFile, R_OK) != 0 {
            report(reader.path.appending("ca_file"), "cannot read CA file \(caFile): \(lastErrorMessage())")
        }
        let connectTimeout = reader.duration("connect_timeout", minimum: .milliseconds(1)) ?? .seconds(10)
        let noProgressTimeout = reader.duration("no_progress_timeout", minimum: .seconds(1)) ?? .seconds(60)

        guard issues.count == issuesBefore, let name, let directory, let url else { return nil }
        return SpoolConfiguration(
            name: name, directory: directory, recursive: recursive, url: url, uploadProtocol: uploadProtocol,
            method: method, chunkSize: chunkSize, fileField: fileField, fileContentType: fileContentType, settle: settle, afterUpload: afterUpload,
            sentDirectory: sentDirectory, failedDirectory: failedDirectory, fields: fields, headers: headers,
            retry: retry, caFile: caFile, connectTimeout: connectTimeout, noProgressTimeout: noProgressTimeout)
    }

    private func checkSpoolsAreDistinct(_ spools: [SpoolConfiguration]) {
        var names: [String: Int] = [:]
        var directories: [String: String] = [:]
        for (index, spool) in spools.enumerated() {
            let path = KeyPath().appending("spool").appending(index: index)
            if let first = names[spool.name] {
                report(path.appending("name"), "spool name \"\(spool.name)\" is already used by spool[\(first)]")
            }
            names[spool.name] = names[spool.name] ?? index
            let directory = Self.normalized(spool.directory)
            if let other = directories[directory] {
                report(path.appending("directory"), "directory \(spool.directory) is already watched by spool \"\(other)\"")
            }
            directories[directory] = directories[directory] ?? spool.name
            if Self.normalized(spool.failedDirectory) == directory {
                report(path.appending("failed_directory"), "failed_directory must not be the spool directory itself")
            }
            if spool.afterUpload == .move && Self.normalized(spool.sentDirectory) == directory {
                report(path.appending("sent_directory"), "sent_directory must not be the spool directory itself")
            }
        }
        // A spool inside a recursive spool would be uploaded by both (dot-directories are not entered).
        for (index, inner) in spools.enumerated() {
            for outer in spools where outer.name != inner.name && outer.recursive {
                let outerPath = Self.normalized(outer.directory)
                let innerPath = Self.normalized(inner.directory)
                guard innerPath.hasPrefix(outerPath + "/") else { continue }
                let relative = innerPath.dropFirst(outerPath.count + 1)
                if !relative.split(separator: "/").contains(where: { $0.hasPrefix(".") }) {
                    report(KeyPath().appending("spool").appending(index: index).appending("directory"),
                           "directory \(inner.directory) is inside recursive spool \"\(outer.name)\"; its files would be uploaded twice")
                }
            }
            for other in spools where other.name != inner.name {
                let otherPath = Self.normalized(other.directory)
                for (key, target) in [("failed_directory", inner.failedDirectory), ("sent_directory", inner.sentDirectory)]
                where key == "failed_directory" || inner.afterUpload == .move {
                    let targetPath = Self.normalized(target)
                    let nested = targetPath == otherPath
                        || (targetPath.hasPrefix(otherPath + "/") && other.recursive
                            && !targetPath.dropFirst(otherPath.count + 1).split(separator: "/").contains(where: { $0.hasPrefix(".") }))
                    if nested {
                        report(KeyPath().appending("spool").appending(index: index).appending(key),
                               "\(key) \(target) is watched by spool \"\(other.name)\"; its files would be uploaded again")
                    }
                }
            }
        }
    }

    /// The state directory holds the queue and copies of files being sent: inside a spool it would
    /// upload itself.
    private func checkStateDirectory(_ state: String, spools: [SpoolConfiguration]) {
        for (index, spool) in spools.enumerated() {
            let spoolPath = Self.normalized(spool.directory)
            if Self.isSameOrInside(state, spoolPath) {
                report(KeyPath().appending("state_directory"),
                       "state_directory \(state) is inside spool \"\(spool.name)\" (\(spool.directory)); Ferry would upload its own queue — put it elsewhere, e.g. /var/lib/ferry")
            } else if Self.isSameOrInside(spoolPath, state) {
                report(KeyPath().appending("spool").appending(index: index).appending("directory"),
                       "spool directory \(spool.directory) is inside state_directory \(state)")
            }
        }
    }

    /// Whether `path` is `base` or below it (both normalised).
    static func isSameOrInside(_ path: String, _ base: String) -> Bool {
        path == base || path.hasPrefix(base == "/" ? "/" : base + "/")
    }

    static func normalized(_ path: String) -> String {
        var parts: [Substring] = []
        for part in path.split(separator: "/") where part != "." {
            if part == ".." { _ = parts.popLast() } else { parts.append(part) }
        }
        return "/" + parts.joined(separator: "/")
    }

    private func parseTemplate(_ text: String, at path: KeyPath, allowPlaceholders: Bool) -> Result<ValueTemplate, TemplateFailure> {
        let result = templates.parse(text, allowPlaceholders: allowPlaceholders)
        if case .failure(let failure) = result { report(path, failure.message) }
        return result
    }

    func template(_ text: String, at path: KeyPath, allowPlaceholders: Bool) -> ValueTemplate? {
        try? parseTemplate(text, at: path, allowPlaceholders: allowPlaceholders).get()
    }

    private func checkURL(_ template: ValueTemplate, at path: KeyPath) {
        let text = template.text
        let shown = template.containsSecret ? "the URL (after resolving secrets)" : "\"\(text)\""
        if text.unicodeScalars.contains(where: { $0.value <= 0x20 || $0.value == 0x7F }) {
            report(path, "\(shown) contains a space or control character; percent-encode it (%20)")
            return
        }
        guard let url = URL(string: text), let scheme = url.scheme?.lowercased() else {
            report(path, "\(shown) is not a valid URL")
            return
        }
        guard scheme == "http" || scheme == "https" else {
            report(path, "\(shown) must start with http:// or https://")
            return
        }
        guard let host = url.host, !host.isEmpty else {
            report(path, "\(shown) has no host")
            return
        }
    }

    /// Rejects CR, LF and NUL, which would split or truncate a header. The message never quotes the
    /// text, which may hold a secret. Returns whether the text is acceptable.
    @discardableResult
    private func checkHeaderText(_ text: String, what: String, at path: KeyPath, allowEmpty: Bool) -> Bool {
        if !allowEmpty && text.isEmpty {
            report(path, "\(what) must not be empty")
            return false
        }
        if let bad = text.utf8.first(where: { $0 == 0x0D || $0 == 0x0A || $0 == 0 }) {
            let name = bad == 0x0D ? "a carriage return (CR)" : bad == 0x0A ? "a line feed (LF)" : "a NUL byte"
            report(path, "\(what) contains \(name); header material may not contain CR, LF or NUL")
            return false
        }
        return true
    }

    /// A field or header value: a string, or an integer, float or boolean written as TOML would.
    private func scalarText(_ value: TOMLValueConvertible?, at path: KeyPath) -> String? {
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

    static func isToken(_ text: String) -> Bool {
        !text.isEmpty && text.utf8.allSatisfy { byte in
            (byte >= 0x30 && byte <= 0x39) || (byte >= 0x41 && byte <= 0x5A) || (byte >= 0x61 && byte <= 0x7A)
                || "!#$%&'*+-.^_`|~".utf8.contains(byte)
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

/// Typed access to one TOML table, reporting wrong types and unknown keys to the context.
struct TableReader {
    let table: TOMLTable
    let path: KeyPath
    let context: LoadContext

    func rejectUnknownKeys(_ allowed: Set<String>) {
        for key in table.keys where !allowed.contains(key) {
            var message = "unknown key \"\(key)\""
            if let suggestion = Self.closest(to: key, in: allowed) {
                message += " (did you mean \"\(suggestion)\"?)"
            } else {
                message += "; the keys here are \(allowed.sorted().joined(separator: ", "))"
            }
            context.report(path.appending(key), message)
        }
    }

    private func value(_ key: String, expected: TOMLType, required: Bool) -> TOMLValueConvertible? {
        guard let value = table[key] else {
            if required { context.report(path.appending(key), "required key \"\(key)\" is missing") }
            return nil
        }
        guard value.type == expected else {
            context.report(path.appending(key), "expected \(LoadContext.article(expected)), got \(LoadContext.article(value.type))")
            return nil
        }
        return value
    }

    func string(_ key: String, required: Bool = false) -> String? {
        value(key, expected: .string, required: required)?.string
    }

    func bool(_ key: String) -> Bool? { value(key, expected: .bool, required: false)?.bool }

    func int(_ key: String, in range: ClosedRange<Int>) -> Int? {
        guard let number = value(key, expected: .int, required: false)?.int else { return nil }
        guard range.contains(number) else {
            context.report(path.appending(key), "\(number) is out of range; use \(range.lowerBound) to \(range.upperBound)")
            return nil
        }
        return number
    }

    func duration(_ key: String, minimum: Duration) -> Duration? {
        guard let text = string(key) else { return nil }
        guard let duration = DurationParser.parse(text) else {
            context.report(path.appending(key), "expected a duration such as \"500ms\", \"2s\", \"5m\", \"1h\" or \"5d\", got \"\(text)\"")
            return nil
        }
        guard duration >= minimum else {
            context.report(path.appending(key), "\"\(text)\" is too short; the least is \(DurationParser.format(minimum))")
            return nil
        }
        guard duration <= DurationParser.maximum else {
            context.report(path.appending(key), "\"\(text)\" is too long; the most is \(DurationParser.format(DurationParser.maximum))")
            return nil
        }
        return duration
    }

    /// A byte count: an integer, or a string such as `"512KiB"`, `"8MiB"`, `"1GiB"` (also KB, MB, GB
    /// as powers of 1000).
    func size(_ key: String, minimum: Int64) -> Int64? {
        let raw = table[key]
        var bytes: Int64?
        if let number = raw?.int {
            bytes = Int64(number)
        } else if let text = raw?.string {
            bytes = Self.parseSize(text)
            if bytes == nil {
                context.report(path.appending(key), "expected a size such as \"512KiB\", \"8MiB\" or \"1GiB\" (or a number of bytes), got \"\(text)\"")
                return nil
            }
        } else if let raw {
            context.report(path.appending(key), "expected a size such as \"8MiB\" or a number of bytes, got \(LoadContext.article(raw.type))")
            return nil
        }
        guard let bytes else { return nil }
        guard bytes >= minimum else {
            context.report(path.appending(key), "\(bytes) bytes is too small; the least is \(minimum) bytes (\(minimum / 1024) KiB)")
            return nil
        }
        return bytes
    }

    /// `"8MiB"` → 8388608; `nil` when it is not a size.
    static func parseSize(_ text: String) -> Int64? {
        let trimmed = text.trimmingCharacters(in: .whitespaces)
        let digits = trimmed.prefix { $0.isASCII && $0.isNumber }
        guard !digits.isEmpty, let number = Int64(digits) else { return nil }
        let unit = trimmed.dropFirst(digits.count).trimmingCharacters(in: .whitespaces).lowercased()
        let multipliers: [String: Int64] = [
            "": 1, "b": 1, "k": 1024, "kib": 1024, "m": 1 << 20, "mib": 1 << 20, "g": 1 << 30, "gib": 1 << 30,
            "kb": 1000, "mb": 1_000_000, "gb": 1_000_000_000,
        ]
        guard let multiplier = multipliers[unit] else { return nil }
        let (product, overflow) = number.multipliedReportingOverflow(by: multiplier)
        return overflow ? nil : product
    }

    /// A filesystem path, made absolute against the configuration file's directory.
    func path(_ key: String, required: Bool = false) -> String? {
        guard let text = string(key, required: required) else { return nil }
        guard !text.isEmpty else {
            context.report(path.appending(key), "the path must not be empty")
            return nil
        }
        return context.absolutePath(text)
    }

    func table(_ key: String) -> TOMLTable? { value(key, expected: .table, required: false)?.table }

    func arrayOfTables(_ key: String) -> [TOMLTable]? {
        guard let array = value(key, expected: .array, required: false)?.array else { return nil }
        var tables: [TOMLTable] = []
        for (index, element) in array.enumerated() {
            if let table = element.table {
                tables.append(table)
            } else {
                context.report(path.appending(key).appending(index: index), "expected a table ([[\(key)]]), got \(LoadContext.article(element.type))")
            }
        }
        return tables
    }

    func template(_ text: String, key: String, allowPlaceholders: Bool) -> ValueTemplate? {
        context.template(text, at: path.appending(key), allowPlaceholders: allowPlaceholders)
    }

    /// The allowed key nearest to a misspelt one, if it is close enough to be a typo.
    static func closest(to key: String, in allowed: Set<String>) -> String? {
        let candidates = allowed.map { ($0, editDistance(key.lowercased(), $0)) }.filter { $0.1 <= max(2, key.count / 4) }
        return candidates.min { ($0.1, $0.0) < ($1.1, $1.0) }?.0
    }

    static func editDistance(_ a: String, _ b: String) -> Int {
        let a = Array(a), b = Array(b)
        var previous = Array(0...b.count)
        for i in 1...max(a.count, 1) where !a.isEmpty {
            var current = [i] + Array(repeating: 0, count: b.count)
            for j in 1...max(b.count, 1) where !b.isEmpty {
                current[j] = min(previous[j] + 1, current[j - 1] + 1, previous[j - 1] + (a[i - 1] == b[j - 1] ? 0 : 1))
            }
            previous = current
        }
        return a.isEmpty ? b.count : b.isEmpty ? a.count : previous[b.count]
    }
}

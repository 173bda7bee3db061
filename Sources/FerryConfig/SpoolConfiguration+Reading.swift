import Foundation

#if canImport(Glibc)
import Glibc
#endif

/// Reading one `[[spool]]` table. The keys that depend on the spool's protocol are read by the
/// protocol's ``UploadProtocolKeys`` (``UploadProtocol/configurationKeys``); the rest here.
extension SpoolConfiguration {
    /// The keys every spool may set, whatever its protocol.
    static let commonKeys: Set<String> = [
        "name", "directory", "recursive", "url", "protocol", "file_content_type", "settle", "after_upload",
        "sent_directory", "failed_directory", "fields", "headers", "retry", "ca_file", "connect_timeout",
        "no_progress_timeout", "send_headers_to", "trust_early_answers", "bandwidth_limit", "bandwidth_schedule",
        "upload_window", "window_end", "max_concurrent_uploads", "priority",
    ]

    /// Every key of a spool table: the common ones and each protocol's own.
    static var keys: Set<String> {
        UploadProtocol.allCases.reduce(commonKeys.union(afterDeliveryKeys).union(bundleKeys)) { $0.union($1.configurationKeys.keys) }
    }

    /// Headers Ferry sets itself; configuring them would corrupt the request.
    static let reservedHeaders: Set<String> = [
        "content-type", "content-length", "transfer-encoding", "host", "connection", "idempotency-key",
        "user-agent", "expect", "te", "upgrade", "keep-alive", "trailer",
    ]

    /// Reads one spool table; `nil` if it has problems (reported to the reader's context).
    init?(reading reader: TableReader) {
        let context = reader.context
        reader.rejectUnknownKeys(Self.keys)
        let issuesBefore = context.issues.count
        let name = reader.string("name", required: true)
        if let name, name.isEmpty || !name.allSatisfy({ $0.isASCII && ($0.isLowercase || $0.isNumber || $0 == "_" || $0 == "-") }) {
            context.report(reader.path.appending("name"), "\"\(name)\" is not a valid spool name; use lowercase letters, digits, '_' and '-'")
        }
        let directory = reader.path("directory", required: true)
        if let directory, let problem = Self.creationProblem(directory) {
            context.report(reader.path.appending("directory"), problem)
        }
        let recursive = reader.bool("recursive") ?? false
        var uploadProtocol = UploadProtocol.multipart
        if let text = reader.string("protocol") {
            if let value = UploadProtocol(rawValue: text.lowercased()) {
                uploadProtocol = value
            } else {
                context.report(reader.path.appending("protocol"), "protocol must be \"multipart\", \"put\", \"tus\", \"s3\" or \"resumable\", not \"\(text)\"")
            }
        }
        let protocolKeys = uploadProtocol.configurationKeys
        let url = Self.readURL(reader, namesFile: protocolKeys.urlNamesFile)
        let keys = protocolKeys.init(reading: reader)
        Self.refuseOtherProtocolsKeys(reader, uploadProtocol: uploadProtocol)
        let fileContentType = reader.string("file_content_type")
        if let fileContentType {
            _ = context.checkHeaderText(fileContentType, what: "the content type", at: reader.path.appending("file_content_type"), allowEmpty: false, inHeader: true)
        }
        let settle = reader.duration("settle", minimum: .zero) ?? .seconds(2)
        var afterUpload = AfterUpload.delete
        if let text = reader.string("after_upload") {
            if let value = AfterUpload(rawValue: text) {
                afterUpload = value
            } else {
                context.report(reader.path.appending("after_upload"), "after_upload must be \"delete\", \"keep\" or \"move\", not \"\(text)\"")
            }
        }
        let sentDirectory = reader.path("sent_directory")
        let failedDirectory = reader.path("failed_directory")
        let fields = Self.readFields(reader, keys: keys)
        let headers = Self.readHeaders(reader, keys: keys)
        let retry = reader.table("retry").map {
            RetryPolicy(reading: TableReader(table: $0, path: reader.path.appending("retry"), context: context))
        } ?? RetryPolicy()
        let caFile = reader.path("ca_file")
        if let caFile, let problem = Self.caFileProblem(caFile) {
            context.report(reader.path.appending("ca_file"), problem)
        }
        let connectTimeout = reader.duration("connect_timeout", minimum: .milliseconds(1)) ?? .seconds(10)
        let noProgressTimeout = reader.duration("no_progress_timeout", minimum: .seconds(1)) ?? .seconds(60)
        let sendHeadersTo = Self.readOrigins(reader, key: "send_headers_to")
        let trustsEarlyAnswers = reader.bool("trust_early_answers") ?? false
        let afterDelivery = Self.readAfterDelivery(reader, uploadProtocol: uploadProtocol)
        let bundleSettings = Self.readBundles(
            reader, uploadProtocol: uploadProtocol, recursive: recursive, digest: afterDelivery.digest, fields: fields)
        let bandwidthLimit = reader.bandwidth("bandwidth_limit") ?? .off
        let bandwidthSchedule = reader.bandwidthSchedule("bandwidth_schedule")
        let uploadWindow = reader.uploadWindow("upload_window")
        var pausesAtWindowEnd = false
        if let text = reader.string("window_end") {
            switch text {
            case "finish": break
            case "pause": pausesAtWindowEnd = true
            default: context.report(reader.path.appending("window_end"), "window_end must be \"finish\" or \"pause\", not \"\(text)\"")
            }
            if uploadWindow == nil {
                context.report(reader.path.appending("window_end"), "window_end applies only with an upload_window")
            }
        }
        let maxConcurrentUploads = reader.int("max_concurrent_uploads", in: 1...256)
        let priority = reader.int("priority", in: -100...100) ?? 0

        guard context.issues.count == issuesBefore, let name, let directory, let url else { return nil }
        var spool = SpoolConfiguration(
            name: name, directory: directory, recursive: recursive, url: url, uploadProtocol: uploadProtocol,
            method: keys.method, chunkSize: keys.chunkSize, fileField: keys.fileField, fileContentType: fileContentType, settle: settle,
            afterUpload: afterUpload, sentDirectory: sentDirectory, failedDirectory: failedDirectory, fields: fields, headers: headers,
            retry: retry, caFile: caFile, connectTimeout: connectTimeout, noProgressTimeout: noProgressTimeout,
            sendHeadersTo: sendHeadersTo, trustsEarlyAnswers: trustsEarlyAnswers, s3: keys.s3,
            resumableInterop: keys.resumableInterop)
        spool.apply(afterDelivery)
        spool.apply(bundleSettings)
        spool.bandwidthLimit = bandwidthLimit
        spool.bandwidthSchedule = bandwidthSchedule
        spool.uploadWindow = uploadWindow
        spool.pausesAtWindowEnd = pausesAtWindowEnd
        spool.maxConcurrentUploads = maxConcurrentUploads
        spool.priority = priority
        self = spool
    }

    /// Reports each key of another protocol that this spool's protocol does not read, naming the
    /// protocols it belongs to (`method` is left to the readers of tus and s3, which say why).
    static func refuseOtherProtocolsKeys(_ reader: TableReader, uploadProtocol: UploadProtocol) {
        let own = uploadProtocol.configurationKeys.keys
        var owners: [String: [UploadProtocol]] = [:]
        for other in UploadProtocol.allCases where other != uploadProtocol {
            for key in other.configurationKeys.keys.subtracting(own) where key != "method" { owners[key, default: []].append(other) }
        }
        for (key, protocols) in owners.sorted(by: { $0.key < $1.key }) where reader.table[key] != nil {
            let names = protocols.map { "\"\($0.rawValue)\"" }.joined(separator: " or ")
            reader.context.report(reader.path.appending(key), "\(key) applies only to protocol \(names) (this spool uses \"\(uploadProtocol.rawValue)\")")
        }
    }

    /// Why ferryd could not create the missing spool directory `path` (its nearest existing parent is
    /// not a directory this user may write), or `nil` if it exists or can be created.
    static func creationProblem(_ path: String) -> String? {
        var existing = path
        while access(existing, F_OK) != 0 {
            guard let slash = existing.lastIndex(of: "/"), existing != "/" else { return nil }
            existing = slash == existing.startIndex ? "/" : String(existing[..<slash])
        }
        if existing == path { return nil }
        var st = stat()
        guard stat(existing, &st) == 0, st.st_mode & S_IFMT == S_IFDIR else {
            return "directory \(path) does not exist and cannot be created: \(existing) is not a directory"
        }
        guard access(existing, W_OK | X_OK) == 0 else {
            return "directory \(path) does not exist and cannot be created by this user: \(existing) is not writable (create it, or fix the path)"
        }
        return nil
    }

    /// Why `path` cannot be the CA file (PEM certificates, as TLS reads them), if it cannot: else
    /// every connection would fail, and be retried until max_age, for a file named wrong.
    static func caFileProblem(_ path: String) -> String? {
        guard access(path, R_OK) == 0 else { return "cannot read CA file \(path): \(lastErrorMessage())" }
        var st = stat()
        guard stat(path, &st) == 0, st.st_mode & S_IFMT == S_IFREG else { return "CA file \(path) is not a regular file" }
        guard st.st_size <= 16 << 20, let data = FileManager.default.contents(atPath: path) else {
            return "cannot read CA file \(path) (a PEM file of certificates, at most 16 MiB)"
        }
        // CERTIFICATE, X509 CERTIFICATE or TRUSTED CERTIFICATE, as OpenSSL's loaders read them.
        guard data.range(of: Data("CERTIFICATE-----".utf8)) != nil else {
            return "CA file \(path) holds no PEM certificate (\"-----BEGIN CERTIFICATE-----\"); give the CA's certificate in PEM form (openssl x509 -inform der -in ca.der -out ca.pem)"
        }
        return nil
    }

    /// `url`: an http(s) URL, naming the file only if the protocol allows it.
    private static func readURL(_ reader: TableReader, namesFile: Bool) -> ValueTemplate? {
        guard let text = reader.string("url", required: true) else { return nil }
        // Only a raw PUT names the file in its URL (WebDAV, object stores): {filename}, {relative_path}.
        let url = reader.template(text, key: "url", allowPlaceholders: namesFile)
        if !namesFile, let name = ValueTemplate.Placeholder.allCases.first(where: { text.contains("{\($0.rawValue)}") }) {
            // Else sent as literal text: every file to one URL with "{filename}" in it.
            reader.context.report(reader.path.appending("url"), """
                {\(name.rawValue)} in the URL is not replaced for this protocol: only protocol = "put" and "resumable" name \
                the file in the URL (multipart sends it in the form, tus in its metadata, s3 in key)
                """)
            return nil
        }
        if let url { checkURL(url, at: reader.path.appending("url"), context: reader.context) }
        if let url, let placeholder = placeholderInAuthority(url) {
            // `https://dav.example.com{relative_path}`: a file under `evil.io/` would send the
            // spool's credentials to dav.example.comevil.io.
            reader.context.report(reader.path.appending("url"), """
                {\(placeholder.rawValue)} is in the URL's host part, so a file's name would choose the server (and get the \
                spool's headers); put it after the host's /, as in https://host/uploads/{\(placeholder.rawValue)}
                """)
            return nil
        }
        if let url, url.placeholders.contains(.sha256) {
            reader.context.report(reader.path.appending("url"), "{sha256} cannot be used in a URL (it would mean reading the whole file before sending it); use {filename}, {relative_path}, {size}, {mtime} or {id}")
        }
        return url
    }

    /// The first per-file placeholder of `url` (secrets resolved) that comes before the end of its
    /// authority (the first `/`, `?` or `#` after `scheme://`), if any.
    static func placeholderInAuthority(_ url: ValueTemplate) -> ValueTemplate.Placeholder? {
        let marked = url.render { "\u{1}\($0.rawValue)\u{2}" }
        guard let scheme = marked.range(of: "://") else { return nil }  // not a URL: said by checkURL
        let authority = marked[scheme.upperBound...].prefix { !"/?#".contains($0) }
        guard let start = authority.firstIndex(of: "\u{1}") else { return nil }
        return ValueTemplate.Placeholder(rawValue: String(authority[authority.index(after: start)...].prefix { $0 != "\u{2}" }))
    }

    private static func checkURL(_ template: ValueTemplate, at path: KeyPath, context: LoadContext) {
        let text = template.text
        let withoutUserInfo = ValueTemplate.withoutUserInfo(text)
        let shown = template.containsSecret ? "the URL (after resolving secrets)" : "\"\(ValueTemplate.shownInMessages(text))\""
        // A user name or password is only ever shown as ***; one with a reserved character is the
        // usual reason such a URL does not parse.
        let credentialsHint = withoutUserInfo == text ? ""
            : " (if the user name or password holds a space, #, /, ?, @ or %, percent-encode it: %20, %23, %2F, %3F, %40, %25)"
        if text.unicodeScalars.contains(where: { $0.value <= 0x20 || $0.value == 0x7F }) {
            context.report(path, "\(shown) contains a space or control character; percent-encode it (%20)\(credentialsHint)")
            return
        }
        guard let url = URL(string: text), let scheme = url.scheme?.lowercased() else {
            context.report(path, "\(shown) is not a valid URL\(credentialsHint)")
            return
        }
        guard scheme == "http" || scheme == "https" else {
            context.report(path, "\(shown) must start with http:// or https://")
            return
        }
        guard let host = url.host, !host.isEmpty else {
            context.report(path, "\(shown) has no host")
            return
        }
        if let port = url.port, !(1...65535).contains(port) {
            context.report(path, "\(shown) has port \(port); a port is a number from 1 to 65535")
        }
    }

    /// `send_headers_to = ["https://uploads.example"]`: origins, each an http(s) URL with no path.
    private static func readOrigins(_ reader: TableReader, key: String) -> [HTTPOrigin] {
        guard let value = reader.table[key] else { return [] }
        let path = reader.path.appending(key)
        guard let array = value.array else {
            reader.context.report(path, "expected an array of origins such as [\"https://uploads.example\"]")
            return []
        }
        var origins: [HTTPOrigin] = []
        for element in array {
            guard let text = element.string, let origin = HTTPOrigin(url: text),
                  let components = URLComponents(string: text), components.path.isEmpty || components.path == "/",
                  components.query == nil, components.user == nil, components.fragment == nil,
                  components.port.map({ (1...65535).contains($0) }) ?? true else {
                reader.context.report(path, "\(element.string.map { "\"\(ValueTemplate.shownInMessages($0))\"" } ?? "an element") is not an origin; write it as \"https://host\" or \"https://host:port\", without a path")
                continue
            }
            origins.append(origin)
        }
        return origins
    }

    /// `[spool.fields]`: text fields, in key order, as the protocol allows them.
    private static func readFields(_ reader: TableReader, keys: any UploadProtocolKeys) -> [NamedValue] {
        guard let table = reader.table("fields") else { return [] }
        let context = reader.context
        var fields: [NamedValue] = []
        let fieldsPath = reader.path.appending("fields")
        for key in table.keys {
            let keyPath = fieldsPath.appending(key)
            guard let text = context.scalarText(table[key], at: keyPath) else { continue }
            guard context.checkHeaderText(key, what: "the field name", at: keyPath, allowEmpty: false),
                  context.checkHeaderText(text, what: "the value", at: keyPath, allowEmpty: true) else { continue }
            keys.checkField(named: key, at: keyPath, context: context)
            if case .success(let template) = context.parseTemplate(text, at: keyPath, allowPlaceholders: true),
               !template.containsSecret || context.checkHeaderText(template.text, what: "the value (after resolving secrets)", at: keyPath, allowEmpty: true) {
                fields.append(NamedValue(name: key, value: template))
            }
        }
        return fields
    }

    /// `[spool.headers]`: extra request headers, none that Ferry or the protocol sets itself.
    private static func readHeaders(_ reader: TableReader, keys: any UploadProtocolKeys) -> [NamedValue] {
        guard let table = reader.table("headers") else { return [] }
        let context = reader.context
        var headers: [NamedValue] = []
        let headersPath = reader.path.appending("headers")
        var seen: [String: String] = [:]
        for key in table.keys {
            let keyPath = headersPath.appending(key)
            guard let text = context.scalarText(table[key], at: keyPath) else { continue }
            if let first = seen.updateValue(key, forKey: key.lowercased()) {
                // Header names are case-insensitive: both would be sent.
                context.report(keyPath, "header \(key) is also given as \(first); header names ignore case, so give it once")
            } else if !isToken(key) {
                context.report(keyPath, "\"\(key)\" is not a valid header name")
            } else if reservedHeaders.contains(key.lowercased()) {
                context.report(keyPath, "header \(key) is set by Ferry and cannot be configured")
            } else {
                keys.checkHeader(named: key, at: keyPath, context: context)
            }
            guard context.checkHeaderText(text, what: "the header value", at: keyPath, allowEmpty: true, inHeader: true) else { continue }
            if case .success(let template) = context.parseTemplate(text, at: keyPath, allowPlaceholders: false),
               !template.containsSecret || context.checkHeaderText(template.text, what: "the header value (after resolving secrets)", at: keyPath, allowEmpty: true, inHeader: true) {
                headers.append(NamedValue(name: key, value: template))
            }
        }
        return headers
    }

    /// Whether `text` is an HTTP token (a valid header name).
    static func isToken(_ text: String) -> Bool {
        !text.isEmpty && text.utf8.allSatisfy { byte in
            (byte >= 0x30 && byte <= 0x39) || (byte >= 0x41 && byte <= 0x5A) || (byte >= 0x61 && byte <= 0x7A)
                || "!#$%&'*+-.^_`|~".utf8.contains(byte)
        }
    }
}

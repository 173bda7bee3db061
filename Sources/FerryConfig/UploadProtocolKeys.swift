/// One upload protocol's share of a spool's table: the keys only it reads (checked here, next to
/// the protocol), the keys of other protocols it refuses, and what it requires of the fields and
/// headers every spool may set. ``UploadProtocol/configurationKeys`` picks the reader for a spool;
/// `SpoolConfiguration(reading:)` reads everything else.
protocol UploadProtocolKeys {
    /// The keys only this protocol reads (other protocols refuse them).
    static var keys: Set<String> { get }
    /// Whether `url` may name the file (`{filename}`, `{relative_path}`).
    static var urlNamesFile: Bool { get }

    /// Reads and checks this protocol's keys, and refuses those of other protocols; problems are
    /// reported to the reader's context.
    init(reading reader: TableReader)

    /// The request method.
    var method: String { get }
    /// The most bytes sent in one request, if the protocol splits uploads.
    var chunkSize: Int64? { get }
    /// The form field of the file part, if the protocol sends a form.
    var fileField: String { get }
    /// The bucket, key and signing of an S3 spool.
    var s3: S3Settings? { get }
    /// The draft revision a resumable spool speaks.
    var resumableInterop: ResumableInteropVersion? { get }

    /// Checks the name of a `[spool.fields]` entry, beyond what every field needs.
    func checkField(named name: String, at path: KeyPath, context: LoadContext)
    /// Checks the name of a `[spool.headers]` entry that is a valid header name Ferry does not set itself.
    func checkHeader(named name: String, at path: KeyPath, context: LoadContext)
}

extension UploadProtocolKeys {
    static var urlNamesFile: Bool { false }
    var chunkSize: Int64? { nil }
    var fileField: String { "file" }
    var s3: S3Settings? { nil }
    var resumableInterop: ResumableInteropVersion? { nil }
    func checkField(named name: String, at path: KeyPath, context: LoadContext) {}
    func checkHeader(named name: String, at path: KeyPath, context: LoadContext) {}

    /// `method` for a protocol that sends one request with the file: `POST` or `PUT`.
    static func readMethod(_ reader: TableReader, default method: String) -> String {
        guard let text = reader.string("method") else { return method }
        let method = text.uppercased()
        if method != "POST" && method != "PUT" {
            reader.context.report(reader.path.appending("method"), "method must be \"POST\" or \"PUT\", not \"\(text)\"")
        }
        return method
    }
}

import FerryPortable
import Foundation
import SystemPackage

/// A `multipart/form-data` form (RFC 7578) of text fields and files, encoded the way browsers do,
/// for apps that upload with `URLSession`.
///
/// ```swift
/// let form = try MultipartForm(
///     fields: ["description": "a \"quoted\" name"],
///     files: [MultipartFormFile(field: "file", url: photoURL)])
/// let body = try form.writeBodyFile(in: FileManager.default.temporaryDirectory)
/// var request = URLRequest(url: endpoint)
/// request.httpMethod = "POST"
/// request.setValue(body.contentType, forHTTPHeaderField: "Content-Type")
/// request.setValue(String(body.contentLength), forHTTPHeaderField: "Content-Length")
/// let (data, response) = try await URLSession.shared.upload(for: request, fromFile: body.url)
/// try body.remove()
/// ```
///
/// The body is the fields in the order given, then the files, each part as a browser frames it:
/// `name` and `filename` with `"`, CR and LF percent-encoded and everything else sent as UTF-8,
/// text fields without a `Content-Type`, file bytes unaltered, CRLF line breaks, no preamble or
/// epilogue, and exactly one CRLF before the close delimiter. Its length (``contentLength``) is known
/// when the form is made, from the files' lengths then; a file whose length has changed by the time
/// the body is written is reported (``MultipartError/sourceChanged(expected:actual:)``), never sent
/// with a wrong `Content-Length`.
///
/// This is the encoder Ferry's upload daemon uses (``MultipartBody`` underneath).
public struct MultipartForm: Sendable {
    /// The text fields, in the order they are sent.
    public let fields: [(name: String, value: String)]
    /// The files, sent after the fields, in this order.
    public let files: [MultipartFormFile]
    /// Each file's length in bytes when the form was made, in the order of ``files``.
    public let fileLengths: [Int64]
    /// The boundary between parts.
    public let boundary: MultipartBoundary
    /// The exact length of the body in bytes: the request's `Content-Length`.
    public let contentLength: Int64

    /// The largest body ``bytes(limit:)`` builds in memory unless told otherwise: 16 MiB.
    public static let defaultMemoryLimit: Int64 = 16 << 20

    /// A form with text fields in the order given, as a dictionary literal (`["title": "x", "tags": "y"]`).
    /// - Throws: as ``init(fieldList:files:boundary:)``.
    public init(
        fields: KeyValuePairs<String, String> = [:], files: [MultipartFormFile] = [],
        boundary: MultipartBoundary = .random()
    ) throws(MultipartError) {
        try self.init(fieldList: fields.map { (name: $0.key, value: $0.value) }, files: files, boundary: boundary)
    }

    /// A form with text fields from a list (built at run time, or with repeated names).
    /// - Parameters:
    ///   - fieldList: the text fields, sent in this order; values may contain anything, line breaks included.
    ///   - files: the files, sent after the fields; each must be a regular file.
    ///   - boundary: the boundary; by default a new random one (190 bits, so no file can contain it).
    /// - Throws: ``MultipartError/invalidFieldName(_:)`` for a field name with CR, LF or NUL,
    ///   ``MultipartError/invalidHeaderValue(what:)`` for a content type with CR, LF or NUL or a file name
    ///   with NUL, ``MultipartError/notAFileURL(_:)``, ``MultipartError/fileNotFound(path:)``,
    ///   ``MultipartError/notARegularFile(path:)``, or ``MultipartError/io(operation:path:errno:)``.
    public init(
        fieldList: [(name: String, value: String)], files: [MultipartFormFile] = [],
        boundary: MultipartBoundary = .random()
    ) throws(MultipartError) {
        var headerLengths: [Int] = []
        var contentLengths: [Int64] = []
        for field in fieldList {
            try Self.checkFieldName(field.name)
            headerLengths.append(try MultipartPart.field(name: field.name, value: "").headerBytes().count)
            contentLengths.append(Int64(field.value.utf8.count))
        }
        var fileLengths: [Int64] = []
        for file in files {
            try Self.checkFieldName(file.field)
            if file.filename.utf8.contains(0) {
                throw .invalidHeaderValue(what: "the file name \(file.filename.debugDescription)")
            }
            let header = MultipartPart(name: file.field, filename: file.filename, contentType: file.contentType, content: .bytes([]))
            headerLengths.append(try header.headerBytes().count)
            let length = try RegularFileProbe.length(atPath: try file.path())
            fileLengths.append(length)
            contentLengths.append(length)
        }
        self.fields = fieldList
        self.files = files
        self.fileLengths = fileLengths
        self.boundary = boundary
        self.contentLength = MultipartBody.length(boundary: boundary, headerLengths: headerLengths, contentLengths: contentLengths)
    }

    /// The request's `Content-Type`: exactly `multipart/form-data; boundary=…`, with no `charset`.
    public var contentType: String { "multipart/form-data; boundary=\(boundary.value)" }

    /// Writes the body to a new file in `directory` and returns it with its `Content-Type` and
    /// `Content-Length`, for `URLSession.upload(for:fromFile:)`.
    ///
    /// The file is created with mode 0600 (only the app's user can read it) and a fresh unique
    /// name; on failure nothing is left behind. On Linux the files' bytes are copied in the kernel
    /// (`copy_file_range(2)`), elsewhere by reading and writing.
    /// - Parameter directory: where to create the body file, e.g. `FileManager.default.temporaryDirectory`;
    ///   it needs room for ``contentLength`` bytes.
    /// - Throws: ``MultipartError/sourceChanged(expected:actual:)`` if a file's length changed since the
    ///   form was made, ``MultipartError/io(operation:path:errno:)`` if a file cannot be read or the body
    ///   written (`ENOSPC`: the directory's disk is full), and the file errors of ``init(fieldList:files:boundary:)``.
    public func writeBodyFile(in directory: URL) throws(MultipartError) -> MultipartBodyFile {
        try writeBodyFile(in: directory, copier: .automatic)
    }

    /// ``writeBodyFile(in:)`` with the way file bytes are copied chosen (the tests use the portable path on Linux).
    func writeBodyFile(in directory: URL, copier: FileCopier) throws(MultipartError) -> MultipartBodyFile {
        guard directory.isFileURL else { throw .notAFileURL(directory.absoluteString) }
        let url = directory.appendingPathComponent("multipart-\(UUID().uuidString).body", isDirectory: false)
        guard let path = url.withUnsafeFileSystemRepresentation({ $0.map { String(cString: $0) } }) else {
            throw .notAFileURL(url.absoluteString)
        }
        let written = try withBody { body throws(MultipartError) in try body.writeFile(at: FilePath(path), copier: copier) }
        precondition(written == contentLength, "multipart body length mismatch")
        return MultipartBodyFile(url: url, contentType: contentType, contentLength: contentLength)
    }

    /// The whole body in memory, for small forms (`URLSession.upload(for:from:)`; a background
    /// session needs ``writeBodyFile(in:)`` instead).
    /// - Parameter limit: the largest body to build; by default ``defaultMemoryLimit`` (16 MiB).
    /// - Throws: ``MultipartError/tooLargeForMemory(contentLength:limit:)`` if ``contentLength`` is over
    ///   `limit`, ``MultipartError/sourceChanged(expected:actual:)`` if a file's length changed since the
    ///   form was made, ``MultipartError/io(operation:path:errno:)`` if a file cannot be read.
    public func bytes(limit: Int64 = MultipartForm.defaultMemoryLimit) throws(MultipartError) -> [UInt8] {
        guard contentLength <= limit else { throw .tooLargeForMemory(contentLength: contentLength, limit: limit) }
        let sources = files.compactMap { try? $0.path() }.joined(separator: ", ")  // for error messages
        return try withBody { body throws(MultipartError) in try body.bytes(path: sources) }
    }

    /// ``bytes(limit:)`` as `Data`.
    public func data(limit: Int64 = MultipartForm.defaultMemoryLimit) throws(MultipartError) -> Data {
        Data(try bytes(limit: limit))
    }

    /// Opens the files (checking each still has the length planned), describes the body, hands it to
    /// `work`, and closes the files.
    private func withBody<Result>(
        _ work: (MultipartBody) throws(MultipartError) -> Result
    ) throws(MultipartError) -> Result {
        var descriptors: [FileDescriptor] = []
        defer { for descriptor in descriptors { try? descriptor.close() } }
        var parts = fields.map { MultipartPart.field(name: $0.name, value: $0.value) }
        for (file, length) in zip(files, fileLengths) {
            let descriptor = try RegularFileProbe.open(try file.path(), expectedLength: length)
            descriptors.append(descriptor)
            parts.append(.file(name: file.field, filename: file.filename, contentType: file.contentType,
                               descriptor: descriptor, length: length))
        }
        let body = try MultipartBody(boundary: boundary, parts: parts)
        precondition(body.contentLength == contentLength, "multipart body length mismatch")
        return try work(body)
    }

    /// Refuses a field name with CR, LF or NUL.
    private static func checkFieldName(_ name: String) throws(MultipartError) {
        if name.utf8.contains(where: { $0 == 0x0D || $0 == 0x0A || $0 == 0 }) { throw .invalidFieldName(name) }
    }
}

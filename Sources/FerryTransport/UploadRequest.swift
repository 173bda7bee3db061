import FerrySystem
import Foundation

/// One HTTP request, with its body (if any) read from a range of a file.
public struct UploadRequest: Sendable {
    /// Bodies up to this size are read into memory by the senders and sent in one write: streaming
    /// them from the file would cost more system calls and hops than the bytes are worth.
    public static let inMemoryLimit: Int64 = 256 * 1024

    public var url: String
    /// `POST`, `PUT`, `PATCH`, `HEAD`, `OPTIONS` or `DELETE`.
    public var method: String
    /// Headers: the configured ones (values may be secrets: never logged) and the protocol's.
    public var headers: [(name: String, value: String)]
    /// The file holding the request body; `nil` for a request without one.
    public var bodyPath: String?
    /// Where in the file the body starts.
    public var bodyOffset: Int64
    /// The body's length in bytes; sent as `Content-Length`.
    public var contentLength: Int64
    /// The body's `Content-Type`, if it has one.
    public var contentType: String?
    /// Sent as `Idempotency-Key`, the same on every attempt for a job.
    public var idempotencyKey: String?
    /// The file the body must come from: opening `bodyPath` must find this very inode, of this size
    /// and modification time (a file sent from the spool itself, not from a snapshot: ferryd opens
    /// it without following symlinks and passes `/proc/self/fd/N`).
    public var expectedSource: FileStatus?
    /// Set when the body file is still being written: bytes are sent only as they are in place.
    public var growing: GrowingBody?
    /// A small body held in memory (an XML document), instead of a file.
    public var bytes: [UInt8]?
    /// Whether the answer may go on long after its status line while bytes keep coming (S3's
    /// CompleteMultipartUpload sends whitespace while it assembles a large object): then only
    /// `no_progress_timeout` without a byte ends it.
    public var answerMayTrickle = false

    public init(
        url: String, method: String, headers: [(name: String, value: String)], bodyPath: String?, bodyOffset: Int64 = 0,
        contentLength: Int64, contentType: String?, idempotencyKey: String?, expectedSource: FileStatus? = nil,
        growing: GrowingBody? = nil
    ) {
        self.growing = growing
        self.url = url
        self.method = method
        self.headers = headers
        self.bodyPath = bodyPath
        self.bodyOffset = bodyOffset
        self.contentLength = contentLength
        self.contentType = contentType
        self.idempotencyKey = idempotencyKey
        self.expectedSource = expectedSource
    }

    /// A request whose small body is in memory; its `Content-Type` is among `headers`.
    public init(url: String, method: String, headers: [(name: String, value: String)], body: [UInt8]) {
        self.init(url: url, method: method, headers: headers, bodyPath: nil, contentLength: Int64(body.count), contentType: nil, idempotencyKey: nil)
        bytes = body
    }

    /// A request without a body (`HEAD`, `OPTIONS`, `DELETE`, or a `POST` with an empty body).
    public static func bodiless(url: String, method: String, headers: [(name: String, value: String)]) -> UploadRequest {
        UploadRequest(url: url, method: method, headers: headers, bodyPath: nil, contentLength: 0, contentType: nil, idempotencyKey: nil)
    }
}


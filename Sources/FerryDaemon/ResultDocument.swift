import FerryConfig
import FerryQueue
import Foundation

/// What Ferry tells a producer about a delivered file: `<name>.result.json` in the spool's
/// `result_directory`, and the standard input of its `on_delivered` hook. Its schema is stable:
/// fields are only ever added, and a change that is not an addition gets a new ``version``.
struct ResultDocument: Encodable {
    /// The schema's version.
    var version = 1
    var job: String
    var spool: String
    /// The file's path below the spool directory.
    var file: String
    /// Where the file is now (`after_upload = "move"` or `"keep"`); absent once deleted.
    var path: String?
    /// What became of the file: `deleted`, `moved`, `kept`, `left`, `missing`.
    var disposition: String?
    var size: Int64
    /// The file's SHA-256, hex, when the spool sends `digest = "sha-256"`.
    var sha256: String?
    /// The RFC 9530 digest sent (`sha-256=:…:`), when the spool sends one.
    var digest: String?
    /// The endpoint, secrets shown as `***`.
    var url: String
    /// The server's final answer.
    var status: Int?
    /// The answer's headers the spool keeps, by lowercase name (`location`, `etag`, …).
    var headers: [String: String]
    var contentType: String?
    /// The first 64 KiB of the answer's body, as text when it is UTF-8…
    var body: String?
    /// …else base64.
    var bodyBase64: String?
    var attempts: Int
    var queuedAt: String
    var deliveredAt: String?

    enum CodingKeys: String, CodingKey {
        case version, job, spool, file, path, disposition, size, sha256, digest, url, status, headers, body, attempts
        case contentType = "content_type", bodyBase64 = "body_base64", queuedAt = "queued_at", deliveredAt = "delivered_at"
    }

    init(job: Job, spool: SpoolConfiguration) {
        self.job = job.id.rawValue
        self.spool = job.spool
        file = job.displayPath
        path = ControlService.location(of: job, spoolDirectory: spool.directory).1
        disposition = job.disposition?.rawValue
        size = job.identity.size
        digest = job.contentDigest
        if let digest = job.contentDigest, digest.hasPrefix("sha-256=:"), digest.hasSuffix(":"),
           let bytes = Data(base64Encoded: String(digest.dropFirst(9).dropLast())) {
            sha256 = bytes.map { String(format: "%02x", $0) }.joined()
        }
        url = spool.shownEndpoint(for: job, sha256: sha256)
        status = job.responseStatus
        headers = job.responseHeaders.byName ?? [:]
        contentType = job.responseContentType
        if let bytes = job.responseBody {
            if let text = String(validating: bytes, as: UTF8.self) { body = text } else { bodyBase64 = Data(bytes).base64EncodedString() }
        }
        attempts = job.attempts
        queuedAt = Self.timestamp(job.createdAt)
        deliveredAt = job.finishedAt.map(Self.timestamp)
    }

    /// RFC 3339 with milliseconds, as every time in the result file and the sidecar.
    static func timestamp(_ date: Date) -> String {
        let formatter = ISO8601DateFormatter()
        formatter.formatOptions = [.withInternetDateTime, .withFractionalSeconds]
        return formatter.string(from: date)
    }

    /// The document as pretty-printed JSON, one trailing newline.
    func encoded() -> [UInt8] {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.prettyPrinted, .sortedKeys, .withoutEscapingSlashes]
        return [UInt8]((try? encoder.encode(self)) ?? Data("{\"job\":\"\(job)\",\"version\":1}".utf8)) + [0x0A]
    }
}

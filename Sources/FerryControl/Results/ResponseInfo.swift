/// The server's last answer to a job.
public struct ResponseInfo: Sendable, Codable, Hashable {
    public var status: Int
    public var contentType: String?
    /// The body's first 64 KiB, as text when it is UTF-8.
    public var body: String?
    /// The same, base64-encoded, when it is not UTF-8.
    public var bodyBase64: String?
    /// Present (and `true`) when the body was hidden because the peer is not allowed to see it.
    public var bodyHidden: Bool?
    /// The headers kept (`Location`, `ETag`, `Content-Type`, `Content-Location`, the spool's
    /// `result_headers`), by lowercase name; a repeated header's values joined with ", ".
    public var headers: [String: String]?

    enum CodingKeys: String, CodingKey {
        case status, body, headers
        case contentType = "content_type", bodyBase64 = "body_base64", bodyHidden = "body_hidden"
    }

    public init(
        status: Int, contentType: String?, body: String?, bodyBase64: String?, bodyHidden: Bool? = nil, headers: [String: String]? = nil
    ) {
        self.headers = headers
        self.status = status
        self.contentType = contentType
        self.body = body
        self.bodyBase64 = bodyBase64
        self.bodyHidden = bodyHidden
    }
}

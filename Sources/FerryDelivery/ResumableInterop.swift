import FerryConfig

/// Where the versions of the IETF draft "Resumable Uploads for HTTP" differ, as far as a client is
/// concerned: the one place that knows. Both versions Ferry speaks flag a request's completeness with
/// `Upload-Complete` (interop 3 used `Upload-Incomplete`, which is still read in answers: swift-nio-
/// extras 1.35 answers a completed interop-6 upload with `Upload-Incomplete: ?0`) and send appends as
/// `application/partial-upload`.
extension ResumableInteropVersion {
    /// The value of `Upload-Draft-Interop-Version`.
    public var headerValue: String { String(rawValue) }

    /// The draft revisions that define this version.
    public var drafts: String {
        switch self {
        case .v6: "draft-ietf-httpbis-resumable-upload-04 and -05"
        case .v9: "draft-ietf-httpbis-resumable-upload-12"
        }
    }

    /// The `Upload-Limit` key that gives the upload's remaining lifetime in seconds (renamed after -05).
    public var lifetimeLimitKey: String {
        switch self {
        case .v6: "expires"
        case .v9: "max-age"
        }
    }

    /// Whether the request that completes an upload with `PATCH` asks to close its connection
    /// afterwards. swift-nio-extras 1.35's `NIOResumableUpload` (interop 3 to 6) stalls the next
    /// `PATCH` that arrives on a connection where a `PATCH` completed another upload (it reads 256 KiB
    /// of it and no more), so that connection is not reused; one new connection per large file.
    public var closesConnectionAfterCompletingAppend: Bool { self == .v6 }

    /// Whether the answer to `OPTIONS` shows that the resource offers resumable uploads. Every
    /// version requires `Upload-Limit` there (`min-size=0` when the server sets no limits); interop
    /// 7 and 8 required `Accept-Patch: application/partial-upload` instead, also taken as an offer.
    public func offersResumption(status: Int, headers: [(name: String, value: String)]) -> Bool {
        guard status < 500 else { return false }
        if HTTPHeaders.value("Upload-Limit", in: headers) != nil { return true }
        return HTTPHeaders.value("Accept-Patch", in: headers)?.lowercased().contains(ResumableFields.partialUpload) == true
    }
}

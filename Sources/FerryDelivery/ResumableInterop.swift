import FerryConfig
import RawStructuredFieldValues

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

/// Reading and writing the draft's structured fields (RFC 9651), with swift-http-structured-headers.
public enum ResumableFields {
    /// The media type of an append (`PATCH`).
    public static let partialUpload = "application/partial-upload"

    /// `?1` or `?0`.
    public static func boolean(_ value: Bool) -> String { value ? "?1" : "?0" }

    /// The Boolean item in header `name`, if it is one.
    public static func boolean(_ name: String, in headers: [(name: String, value: String)]) -> Bool? {
        guard let text = HTTPHeaders.value(name, in: headers), case .bool(let value)? = item(text) else { return nil }
        return value
    }

    /// The non-negative Integer item in header `name`, if it is one.
    public static func integer(_ name: String, in headers: [(name: String, value: String)]) -> Int64? {
        guard let text = HTTPHeaders.value(name, in: headers), case .integer(let value)? = item(text), value >= 0 else { return nil }
        return Int64(value)
    }

    /// The bare item of an Item field, if `text` is one.
    static func item(_ text: String) -> RFC9651BareItem? {
        var parser = StructuredFieldValueParser(Array(text.utf8))
        return try? parser.parseItemFieldValue().rfc9651BareItem
    }

    /// Whether an answer says the upload is complete (`Upload-Complete: ?1` or `Upload-Incomplete: ?0`),
    /// is not (`?0`, `?1`), or says nothing.
    public static func completeness(in headers: [(name: String, value: String)]) -> Bool? {
        if let complete = boolean("Upload-Complete", in: headers) { return complete }
        return boolean("Upload-Incomplete", in: headers).map { !$0 }
    }
}

/// The server's limits on an upload (`Upload-Limit`, a Dictionary of Integers); unknown keys are
/// ignored, and a known key whose value is not a non-negative Integer makes the whole field invalid.
public struct UploadLimit: Sendable, Equatable {
    public var maxSize: Int64?
    public var minSize: Int64?
    public var maxAppendSize: Int64?
    public var minAppendSize: Int64?
    /// Seconds the upload is kept (`max-age`; `expires` in interop 6).
    public var lifetime: Int64?

    public init(maxSize: Int64? = nil, minSize: Int64? = nil, maxAppendSize: Int64? = nil, minAppendSize: Int64? = nil, lifetime: Int64? = nil) {
        self.maxSize = maxSize
        self.minSize = minSize
        self.maxAppendSize = maxAppendSize
        self.minAppendSize = minAppendSize
        self.lifetime = lifetime
    }

    /// The limits in `headers`, or `nil` when there is no valid `Upload-Limit`.
    public init?(headers: [(name: String, value: String)], interop: ResumableInteropVersion) {
        guard let text = HTTPHeaders.value("Upload-Limit", in: headers) else { return nil }
        self.init(text, interop: interop)
    }

    public init?(_ text: String, interop: ResumableInteropVersion) {
        var parser = StructuredFieldValueParser(Array(text.utf8))
        guard let dictionary = try? parser.parseDictionaryFieldValue() else { return nil }
        var limit = UploadLimit()
        for (key, member) in dictionary {
            let path: WritableKeyPath<UploadLimit, Int64?>
            switch key {
            case "max-size": path = \.maxSize
            case "min-size": path = \.minSize
            case "max-append-size": path = \.maxAppendSize
            case "min-append-size": path = \.minAppendSize
            case interop.lifetimeLimitKey: path = \.lifetime
            default: continue
            }
            guard case .item(let item) = member, case .integer(let value) = item.rfc9651BareItem, value >= 0 else { return nil }
            limit[keyPath: path] = Int64(value)
        }
        self = limit
    }

    /// The later limits where they are given, these where not.
    public func updated(with newer: UploadLimit?) -> UploadLimit {
        guard let newer else { return self }
        return UploadLimit(
            maxSize: newer.maxSize ?? maxSize, minSize: newer.minSize ?? minSize, maxAppendSize: newer.maxAppendSize ?? maxAppendSize,
            minAppendSize: newer.minAppendSize ?? minAppendSize, lifetime: newer.lifetime ?? lifetime)
    }
}

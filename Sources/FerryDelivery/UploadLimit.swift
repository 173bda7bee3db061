import FerryConfig
import RawStructuredFieldValues

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

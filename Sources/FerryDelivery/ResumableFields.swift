import RawStructuredFieldValues

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

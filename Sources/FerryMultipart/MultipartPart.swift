import SystemPackage

/// One part of a `multipart/form-data` body: a text field, or a file whose bytes are copied verbatim.
public struct MultipartPart: Sendable {
    /// Where a part's bytes come from.
    public enum Content: Sendable {
        /// The bytes themselves (a text field's UTF-8 value).
        case bytes([UInt8])
        /// `length` bytes read from the start of an open file.
        case file(FileDescriptor, length: Int64)

        /// The number of bytes the part's content contributes to the body.
        public var length: Int64 {
            switch self {
            case .bytes(let bytes): Int64(bytes.count)
            case .file(_, let length): length
            }
        }
    }

    /// The form field name (`name=` in `Content-Disposition`).
    public var name: String
    /// The file name (`filename=`); `nil` for a text field.
    public var filename: String?
    /// The part's `Content-Type`; text fields carry none, as browsers send them.
    public var contentType: String?
    /// The part's bytes.
    public var content: Content

    /// A text field; its value is sent as UTF-8 with no `Content-Type` of its own.
    public static func field(name: String, value: String) -> MultipartPart {
        MultipartPart(name: name, filename: nil, contentType: nil, content: .bytes(Array(value.utf8)))
    }

    /// A file part whose bytes are the first `length` bytes of `descriptor`.
    public static func file(
        name: String, filename: String, contentType: String, descriptor: FileDescriptor, length: Int64
    ) -> MultipartPart {
        MultipartPart(
            name: name, filename: filename, contentType: contentType,
            content: .file(descriptor, length: length))
    }

    /// The part's header block: `Content-Disposition`, `Content-Type` when present, and the empty line.
    ///
    /// `name` and `filename` are escaped as browsers do (WHATWG HTML, "multipart/form-data encoding
    /// algorithm"): `"` → `%22`, CR → `%0D`, LF → `%0A`, and nothing else; other bytes, including
    /// non-ASCII UTF-8, are sent raw, and no RFC 5987 `filename*` parameter is added.
    func headerBytes() throws(MultipartError) -> [UInt8] {
        var header = Array("Content-Disposition: form-data; name=\"".utf8)
        header += Self.escapeParameter(name)
        header += Array("\"".utf8)
        if let filename {
            header += Array("; filename=\"".utf8)
            header += Self.escapeParameter(filename)
            header += Array("\"".utf8)
        }
        header += [0x0D, 0x0A]
        if let contentType {
            guard !contentType.utf8.contains(where: { $0 == 0x0D || $0 == 0x0A || $0 == 0 }) else {
                throw .invalidHeaderValue(what: "the content type of part \"\(name)\"")
            }
            header += Array("Content-Type: \(contentType)\r\n".utf8)
        }
        header += [0x0D, 0x0A]
        return header
    }

    /// Escapes a `name` or `filename` parameter value the way browsers do.
    public static func escapeParameter(_ value: String) -> [UInt8] {
        var out: [UInt8] = []
        out.reserveCapacity(value.utf8.count)
        for byte in value.utf8 {
            switch byte {
            case 0x22: out += [0x25, 0x32, 0x32]  // " → %22
            case 0x0D: out += [0x25, 0x30, 0x44]  // CR → %0D
            case 0x0A: out += [0x25, 0x30, 0x41]  // LF → %0A
            default: out.append(byte)
            }
        }
        return out
    }
}

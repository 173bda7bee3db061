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
    /// algorithm"): `"` → `%22`, CR → `%0D`, LF → `%0A`, and the other control bytes but tab the
    /// same way (a browser never sends them; Go and busboy refuse them raw); other bytes, including
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

    /// Escapes a `name` or `filename` parameter value the way browsers do: `"`, CR and LF
    /// percent-encoded (WHATWG), and the other control bytes but tab. A backslash goes as it is, as browsers send it, except where a
    /// parser that reads quoted-pairs (Go's `mime`, Python's `email`, Werkzeug, python-multipart,
    /// Rack) would take it for an escape: before one of RFC 2045's tspecials, or last. There it
    /// is doubled, so that `photo\` is not read as an unterminated value (Go then drops the part,
    /// Werkzeug takes the file for a text field).
    public static func escapeParameter(_ value: String) -> [UInt8] {
        var encoded: [UInt8] = []
        encoded.reserveCapacity(value.utf8.count)
        for byte in value.utf8 {
            switch byte {
            case 0x22: encoded += [0x25, 0x32, 0x32]  // " → %22
            case 0x0D: encoded += [0x25, 0x30, 0x44]  // CR → %0D
            case 0x0A: encoded += [0x25, 0x30, 0x41]  // LF → %0A
            case 0x00...0x08, 0x0B...0x1F, 0x7F:
                // Other controls (not tab): Go's textproto and busboy refuse the whole part header
                // for a raw one, so they go as %XX too, the way browsers' escape reads.
                encoded += [0x25, Self.hexDigits[Int(byte >> 4)], Self.hexDigits[Int(byte & 0x0F)]]
            default: encoded.append(byte)
            }
        }
        guard encoded.contains(0x5C) else { return encoded }
        var out: [UInt8] = []
        out.reserveCapacity(encoded.count + 4)
        for (index, byte) in encoded.enumerated() {
            out.append(byte)
            if byte == 0x5C, index + 1 == encoded.count || Self.tspecials.contains(encoded[index + 1]) { out.append(0x5C) }
        }
        return out
    }

    static let hexDigits = Array("0123456789ABCDEF".utf8)

    /// RFC 2045's tspecials: after a backslash, quoted-pair readers take one of them for itself.
    static let tspecials: Set<UInt8> = Set("()<>@,;:\\\"/[]?=".utf8)
}

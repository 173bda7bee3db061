/// `Content-Disposition` for a request that carries one file (RFC 6266, RFC 8187): how a server that
/// reads it (tusd's IETF-draft handler takes the upload's `filename` from it) learns the file's name.
public enum ContentDisposition {
    /// `attachment; filename="…"`, plus `filename*=UTF-8''…` when the name is not plain ASCII.
    ///
    /// The quoted `filename` is an ASCII stand-in: every byte outside printable ASCII, and `"` and
    /// `\`, becomes `_`, so no byte of the name can end the header or the parameter. The exact name
    /// goes in `filename*`, percent-encoded as RFC 8187 says (every byte outside its `attr-char`),
    /// which parsers that know it (Go's `mime`, Python's `email`, browsers) prefer.
    public static func attachment(filename: String) -> String {
        var fallback = ""
        var exact = ""
        var plain = true
        for byte in filename.utf8 {
            let printable = byte >= 0x20 && byte < 0x7F && byte != UInt8(ascii: "\"") && byte != UInt8(ascii: "\\")
            fallback.append(printable ? Character(Unicode.Scalar(byte)) : "_")
            plain = plain && printable
            if isAttributeCharacter(byte) {
                exact.append(Character(Unicode.Scalar(byte)))
            } else {
                exact += "%" + String(byte >> 4, radix: 16, uppercase: true) + String(byte & 0x0F, radix: 16, uppercase: true)
            }
        }
        return plain ? "attachment; filename=\"\(fallback)\"" : "attachment; filename=\"\(fallback)\"; filename*=UTF-8''\(exact)"
    }

    /// RFC 8187 `attr-char`: ALPHA / DIGIT / "!" / "#" / "$" / "&" / "+" / "-" / "." / "^" / "_" / "`" / "|" / "~".
    private static func isAttributeCharacter(_ byte: UInt8) -> Bool {
        switch byte {
        case UInt8(ascii: "a")...UInt8(ascii: "z"), UInt8(ascii: "A")...UInt8(ascii: "Z"), UInt8(ascii: "0")...UInt8(ascii: "9"):
            return true
        default:
            return Array("!#$&+-.^_`|~".utf8).contains(byte)
        }
    }
}

/// RFC 3986 percent-encoding, as URLs and AWS's SigV4 want it: every byte but the unreserved
/// characters `A-Z a-z 0-9 - . _ ~` as `%XX` (uppercase hex), and `/` kept when asked (paths).
/// Works on raw bytes, so a file name that is not UTF-8 is encoded as it is.
public enum PercentEncoding {
    public static func encode<Bytes: Sequence>(_ bytes: Bytes, keepingSlashes: Bool = false) -> String where Bytes.Element == UInt8 {
        let hex = Array("0123456789ABCDEF".utf8)
        var text = [UInt8]()
        for byte in bytes {
            switch byte {
            case UInt8(ascii: "a")...UInt8(ascii: "z"), UInt8(ascii: "A")...UInt8(ascii: "Z"), UInt8(ascii: "0")...UInt8(ascii: "9"),
                 UInt8(ascii: "-"), UInt8(ascii: "."), UInt8(ascii: "_"), UInt8(ascii: "~"):
                text.append(byte)
            case UInt8(ascii: "/") where keepingSlashes:
                text.append(byte)
            default:
                text += [UInt8(ascii: "%"), hex[Int(byte >> 4)], hex[Int(byte & 0x0F)]]
            }
        }
        return String(decoding: text, as: UTF8.self)
    }
}

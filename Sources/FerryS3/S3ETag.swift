import Crypto
import Foundation

/// The ETag S3 (and every compatible server measured) gives an object assembled from parts: the
/// MD5 of the parts' MD5s, `-`, the number of parts. Used to recognise, after a crash that lost
/// the answer to `CompleteMultipartUpload`, that the object is the one assembled from our parts.
public enum S3ETag {
    /// `"9b2cf535f27731c974343645a3985328-3"` from the parts' ETags (with or without quotes);
    /// `nil` if an ETag is not an MD5 in hex.
    public static func expected(fromPartETags etags: [String]) -> String? {
        var bytes: [UInt8] = []
        for etag in etags {
            let hex = etag.trimmingCharacters(in: CharacterSet(charactersIn: "\""))
            guard hex.count == 32, let raw = Self.bytes(hex: hex) else { return nil }
            bytes += raw
        }
        let digest = SigV4Signer.hex(Insecure.MD5.hash(data: bytes))
        return "\(digest)-\(etags.count)"
    }

    /// The MD5 (lowercase hex) an ETag is, when it is one: 32 hex digits, quoted or not. A part's
    /// ETag is its MD5 on S3 and every server measured (not under SSE-KMS or SSE-C); so is a
    /// whole object's on some servers (rclone serve s3), where S3 gives an assembled object
    /// ``expected(fromPartETags:)``.
    public static func md5(_ etag: String) -> String? {
        let hex = etag.trimmingCharacters(in: CharacterSet(charactersIn: "\""))
        guard hex.utf8.count == 32, bytes(hex: hex) != nil else { return nil }
        return hex.lowercased()
    }

    /// Whether two ETags are the same, ignoring quotes and case.
    public static func same(_ a: String, _ b: String) -> Bool {
        a.trimmingCharacters(in: CharacterSet(charactersIn: "\"")).lowercased() == b.trimmingCharacters(in: CharacterSet(charactersIn: "\"")).lowercased()
    }

    /// Whether a HEAD's ETag names the object assembled from parts whose multipart ETag is
    /// `expected`: the same, or its digest without the `-N` (moto's HEAD omits it).
    public static func names(_ etag: String, multipart expected: String) -> Bool {
        if same(etag, expected) { return true }
        guard let dash = expected.lastIndex(of: "-") else { return false }
        return same(etag, String(expected[..<dash]))
    }

    static func bytes(hex: String) -> [UInt8]? {
        var bytes: [UInt8] = []
        var high: UInt8?
        for char in hex.utf8 {
            let nibble: UInt8
            switch char {
            case UInt8(ascii: "0")...UInt8(ascii: "9"): nibble = char - UInt8(ascii: "0")
            case UInt8(ascii: "a")...UInt8(ascii: "f"): nibble = char - UInt8(ascii: "a") + 10
            case UInt8(ascii: "A")...UInt8(ascii: "F"): nibble = char - UInt8(ascii: "A") + 10
            default: return nil
            }
            if let h = high { bytes.append(h << 4 | nibble); high = nil } else { high = nibble }
        }
        return high == nil ? bytes : nil
    }
}

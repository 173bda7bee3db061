import Crypto
import Foundation

/// The checksum S3 is asked to verify on every part and object (`checksum`): sent as
/// `x-amz-checksum-<name>`, declared on `CreateMultipartUpload` with `x-amz-checksum-algorithm`,
/// and checked again at completion against the composite or full-object checksum S3 computes from
/// the parts.
public enum S3ChecksumAlgorithm: String, Sendable, CaseIterable {
    case crc32c
    case sha256

    /// The header carrying a value: `x-amz-checksum-crc32c`.
    public var headerName: String { "x-amz-checksum-\(rawValue)" }
    /// The name in `x-amz-checksum-algorithm` and `x-amz-sdk-checksum-algorithm`.
    public var algorithmName: String { rawValue.uppercased() }
    /// The element of a part in `CompleteMultipartUpload` and `ListParts` (`ChecksumCRC32C`).
    public var elementName: String {
        switch self {
        case .crc32c: "ChecksumCRC32C"
        case .sha256: "ChecksumSHA256"
        }
    }

    /// The base64 checksum of raw bytes.
    public func checksum(of bytes: [UInt8]) -> String {
        switch self {
        case .crc32c: CRC32C.hash(data: bytes).base64
        case .sha256: Data(SHA256.hash(data: bytes)).base64EncodedString()
        }
    }

    /// The composite checksum S3 gives a multipart object: the checksum of the parts' checksums
    /// (decoded, concatenated in part order), then `-` and the number of parts. `nil` if a part's
    /// checksum is not valid base64.
    public func composite(ofParts checksums: [String]) -> String? {
        var bytes: [UInt8] = []
        for checksum in checksums {
            guard let raw = Data(base64Encoded: checksum) else { return nil }
            bytes += raw
        }
        return checksum(of: bytes) + "-\(checksums.count)"
    }

    /// The full-object checksum of a multipart object (S3's `FULL_OBJECT` type, no `-N`): the
    /// checksum of the whole file, derived from the parts' checksums and lengths, in part order.
    /// Only a CRC can be combined so; `nil` for SHA-256, or if a part's checksum is not a valid one.
    public func fullObject(ofParts parts: [(checksum: String, length: Int64)]) -> String? {
        guard case .crc32c = self else { return nil }
        var crc: UInt32 = 0
        for part in parts {
            guard let raw = Data(base64Encoded: part.checksum), raw.count == 4 else { return nil }
            let value = raw.reduce(UInt32(0)) { $0 << 8 | UInt32($1) }
            crc = CRC32C.combine(crc, value, secondLength: part.length)
        }
        return CRC32CDigest(value: crc).base64
    }
}

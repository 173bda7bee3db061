import Crypto
import FerrySystem
import Foundation

/// A running checksum by one ``S3ChecksumAlgorithm``, fed piece by piece: what a part, an object
/// or a small file carries as `x-amz-checksum-*`.
public struct S3ChecksumHasher {
    private enum State {
        case crc32c(CRC32C)
        case sha256(SHA256)
    }

    private var state: State

    public init(_ algorithm: S3ChecksumAlgorithm) {
        switch algorithm {
        case .crc32c: state = .crc32c(CRC32C())
        case .sha256: state = .sha256(SHA256())
        }
    }

    public mutating func update(bufferPointer: UnsafeRawBufferPointer) {
        switch state {
        case .crc32c(var hasher):
            hasher.update(bufferPointer: bufferPointer)
            state = .crc32c(hasher)
        case .sha256(var hasher):
            hasher.update(bufferPointer: bufferPointer)
            state = .sha256(hasher)
        }
    }

    /// The checksum (base64, as S3 writes it) and, for SHA-256, its hex form: the payload hash
    /// SigV4 signs when the body is this checksum's bytes.
    public func finalize() -> (checksum: String, sha256Hex: String?) {
        switch state {
        case .crc32c(let hasher):
            return (hasher.finalize().base64, nil)
        case .sha256(let hasher):
            let digest = hasher.finalize()
            return (Data(digest).base64EncodedString(), digest.hex)
        }
    }

    /// The checksum of `bytes`.
    public static func checksum(of bytes: [UInt8], by algorithm: S3ChecksumAlgorithm) -> (checksum: String, sha256Hex: String?) {
        var hasher = S3ChecksumHasher(algorithm)
        bytes.withUnsafeBytes { hasher.update(bufferPointer: $0) }
        return hasher.finalize()
    }
}

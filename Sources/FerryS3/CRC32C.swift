import CFerrySystem
import Crypto
import Foundation

/// CRC-32C (Castagnoli), the checksum S3 sends as `x-amz-checksum-crc32c`: the four bytes of the
/// CRC, big-endian, in base64. A `HashFunction`, so a file range is checksummed by the same code
/// that hashes it (`SourceFile.digest(_:of:)`). The CRC itself is computed in C (CFerrySystem),
/// with the CPU's crc32 instruction where there is one.
public struct CRC32C: HashFunction, Sendable {
    public static let blockByteCount = 64
    public static let byteCount = 4

    /// The CRC so far.
    public private(set) var value: UInt32 = 0

    public init() {}

    public mutating func update(bufferPointer: UnsafeRawBufferPointer) {
        guard let base = bufferPointer.baseAddress else { return }
        value = cferry_crc32c_update(value, base, bufferPointer.count)
    }

    public func finalize() -> CRC32CDigest { CRC32CDigest(value: value) }

    /// The CRC of `bytes`.
    public static func checksum<Bytes: DataProtocol>(_ bytes: Bytes) -> UInt32 {
        var crc = CRC32C()
        crc.update(data: bytes)
        return crc.value
    }
}

/// A CRC-32C value as a digest: its four bytes, big-endian.
public struct CRC32CDigest: Digest, Sendable {
    public static let byteCount = 4
    public let value: UInt32

    public init(value: UInt32) { self.value = value }

    var bytes: [UInt8] { [UInt8(value >> 24), UInt8((value >> 16) & 0xFF), UInt8((value >> 8) & 0xFF), UInt8(value & 0xFF)] }

    public func withUnsafeBytes<R>(_ body: (UnsafeRawBufferPointer) throws -> R) rethrows -> R {
        try bytes.withUnsafeBytes(body)
    }

    public func makeIterator() -> IndexingIterator<[UInt8]> { bytes.makeIterator() }

    public var description: String { "CRC32C: \(String(value, radix: 16))" }

    /// The base64 form S3 uses.
    public var base64: String { Data(bytes).base64EncodedString() }
}

import CFerrySystem
import Crypto
import Foundation

/// CRC-32C (Castagnoli), the checksum S3 sends as `x-amz-checksum-crc32c`: the four bytes of the
/// CRC, big-endian, in base64. A `HashFunction`, fed piece by piece like SHA-256 (S3 requests use
/// it through ``S3ChecksumHasher``). The CRC itself is computed in C (CFerrySystem),
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

    /// The CRC of `a` followed by `b`, from the CRC of `a`, the CRC of `b` and the length of `b`,
    /// without the bytes (zlib's `crc32_combine`, for the Castagnoli polynomial): a full-object
    /// checksum from the checksums of the parts.
    public static func combine(_ first: UInt32, _ second: UInt32, secondLength: Int64) -> UInt32 {
        precondition(secondLength >= 0, "a length is not negative")
        return multiplyModP(powerOfX(8 * UInt64(secondLength)), first) ^ second
    }

    /// The reflected Castagnoli polynomial, and x⁰ in the reflected bit order (the top bit).
    private static let polynomial: UInt32 = 0x82F6_3B78
    private static let one: UInt32 = 1 << 31

    /// a(x)·b(x) modulo the polynomial, in the reflected bit order.
    private static func multiplyModP(_ a: UInt32, _ b: UInt32) -> UInt32 {
        var a = a, b = b, product: UInt32 = 0
        while a != 0 {
            if a & one != 0 { product ^= b }
            a <<= 1
            b = b & 1 != 0 ? (b >> 1) ^ polynomial : b >> 1
        }
        return product
    }

    /// x^n modulo the polynomial, by squaring (x^(2^k) for each set bit k of n).
    private static func powerOfX(_ n: UInt64) -> UInt32 {
        var result = one, square: UInt32 = one >> 1, n = n   // x⁰, x¹
        while n != 0 {
            if n & 1 != 0 { result = multiplyModP(square, result) }
            square = multiplyModP(square, square)
            n >>= 1
        }
        return result
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

import Crypto
import FerryS3
import FerrySystem
import Foundation
import Testing

/// The running checksum S3 requests carry: fed in any pieces, it gives what the whole bytes give.
@Suite("S3 checksum hasher")
struct S3ChecksumHasherTests {
    @Test("CRC-32C and SHA-256 in pieces equal the one-shot hashes; only SHA-256 has a hex form", arguments: S3ChecksumAlgorithm.allCases)
    func pieces(_ algorithm: S3ChecksumAlgorithm) {
        var random = SplitMix64(seed: 7)
        let bytes = (0..<100_003).map { _ in UInt8.random(in: 0...255, using: &random) }
        let whole = S3ChecksumHasher.checksum(of: bytes, by: algorithm)
        var hasher = S3ChecksumHasher(algorithm)
        var offset = 0
        for size in [0, 1, 63, 64, 65, 4_096, 95_000] where offset < bytes.count {
            let end = min(offset + size, bytes.count)
            bytes[offset..<end].withUnsafeBytes { hasher.update(bufferPointer: $0) }
            offset = end
        }
        bytes[offset...].withUnsafeBytes { hasher.update(bufferPointer: $0) }
        #expect(hasher.finalize() == whole)
        switch algorithm {
        case .crc32c:
            #expect(whole.checksum == CRC32C.hash(data: bytes).base64)
            #expect(whole.sha256Hex == nil)
        case .sha256:
            #expect(whole.checksum == Data(SHA256.hash(data: bytes)).base64EncodedString())
            #expect(whole.sha256Hex == SHA256.hash(data: bytes).hex)
        }
    }

    @Test("the empty body has the well-known checksums: CRC-32C 0, SHA-256 of nothing")
    func empty() {
        #expect(S3ChecksumHasher.checksum(of: [], by: .crc32c).checksum == "AAAAAA==")
        #expect(S3ChecksumHasher.checksum(of: [], by: .sha256).checksum == "47DEQpj8HBSa+/TImW+5JCeuQeRkm5NMpJWZG3hSuFU=")
    }
}

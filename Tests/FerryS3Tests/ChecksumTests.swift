import FerryS3
import FerryTestSupport
import CFerrySystem
import Foundation
import Testing

@Suite("CRC-32C, composite checksums, multipart ETags")
struct ChecksumTests {
    @Test("CRC-32C check values (RFC 3720 B.4 and the usual check string)", arguments: [
        (Array("123456789".utf8), UInt32(0xE306_9283)),
        ([UInt8](repeating: 0, count: 32), UInt32(0x8A91_36AA)),
        ([UInt8](repeating: 0xFF, count: 32), UInt32(0x62A8_AB43)),
        ((0..<32).map { UInt8($0) }, UInt32(0x46DD_794E)),
        ((0..<32).map { UInt8(31 - $0) }, UInt32(0x113F_DB5C)),
        ([], UInt32(0)),
    ])
    func checkValues(_ bytes: [UInt8], _ expected: UInt32) {
        #expect(CRC32C.checksum(bytes) == expected)
    }

    @Test("the CPU instruction and the table agree, at every alignment and in pieces")
    func hardwareMatchesTable() {
        let bytes = pseudoRandomBytes(70_000, seed: 42)
        for start in 0..<9 {
            for length in [0, 1, 7, 8, 9, 63, 64, 65, 4096, 65_537] where start + length <= bytes.count {
                let slice = Array(bytes[start..<(start + length)])
                let portable = slice.withUnsafeBytes { cferry_crc32c_update_portable(0, $0.baseAddress, $0.count) }
                #expect(CRC32C.checksum(slice) == portable, "start \(start), length \(length)")
                var pieces = CRC32C()
                pieces.update(data: slice.prefix(length / 3))
                pieces.update(data: slice.dropFirst(length / 3))
                #expect(pieces.value == portable)
            }
        }
    }

    @Test("S3's base64 form is the big-endian CRC")
    func base64() {
        #expect(CRC32C.hash(data: Array("123456789".utf8)).base64 == "4waSgw==")
        #expect(S3ChecksumAlgorithm.sha256.checksum(of: []) == "47DEQpj8HBSa+/TImW+5JCeuQeRkm5NMpJWZG3hSuFU=")
    }

    @Test("a composite checksum is the checksum of the parts' checksums, with the part count")
    func composite() {
        let parts = [Array("part one".utf8), Array("part two".utf8), Array("3".utf8)]
        let checksums = parts.map { S3ChecksumAlgorithm.crc32c.checksum(of: $0) }
        var raw: [UInt8] = []
        for part in parts { let crc = CRC32C.checksum(part); raw += [UInt8(crc >> 24), UInt8((crc >> 16) & 0xFF), UInt8((crc >> 8) & 0xFF), UInt8(crc & 0xFF)] }
        #expect(S3ChecksumAlgorithm.crc32c.composite(ofParts: checksums) == CRC32C.hash(data: raw).base64 + "-3")
        #expect(S3ChecksumAlgorithm.crc32c.composite(ofParts: ["not base64!"]) == nil)
    }

    @Test("CRC-32C of two pieces combined from their CRCs is the CRC of the whole, at any split")
    func combine() {
        let bytes = pseudoRandomBytes(20_000, seed: 7)
        for split in [0, 1, 3, 4, 5, 63, 64, 4096, 12_345, 19_999, 20_000] {
            let first = CRC32C.checksum(bytes[..<split]), second = CRC32C.checksum(bytes[split...])
            #expect(CRC32C.combine(first, second, secondLength: Int64(bytes.count - split)) == CRC32C.checksum(bytes), "split at \(split)")
        }
        #expect(CRC32C.combine(CRC32C.checksum(Array("12345".utf8)), CRC32C.checksum(Array("6789".utf8)), secondLength: 4) == 0xE306_9283)
    }

    @Test("a full-object checksum from the parts' checksums and lengths is the whole file's; SHA-256 has none")
    func fullObject() {
        let file = pseudoRandomBytes(50_000, seed: 9)
        for sizes in [[50_000], [16_384, 16_384, 17_232], [1, 49_999], [25_000, 0, 25_000], [10_000, 10_000, 10_000, 10_000, 10_000]] {
            var parts: [(checksum: String, length: Int64)] = [], start = 0
            for size in sizes {
                parts.append((S3ChecksumAlgorithm.crc32c.checksum(of: Array(file[start..<(start + size)])), Int64(size)))
                start += size
            }
            #expect(S3ChecksumAlgorithm.crc32c.fullObject(ofParts: parts) == S3ChecksumAlgorithm.crc32c.checksum(of: file), "\(sizes)")
        }
        #expect(S3ChecksumAlgorithm.crc32c.fullObject(ofParts: [("not base64!", 3)]) == nil)
        #expect(S3ChecksumAlgorithm.crc32c.fullObject(ofParts: [("AAAAAAAA", 3)]) == nil)   // six bytes, not four
        #expect(S3ChecksumAlgorithm.sha256.fullObject(ofParts: [(S3ChecksumAlgorithm.sha256.checksum(of: file), 50_000)]) == nil)
    }

    @Test("the multipart ETag is the MD5 of the parts' MD5s and the count (as S3 computes it)")
    func multipartETag() {
        // Two parts whose MD5s are those of "a" and "b".
        let etags = ["\"0cc175b9c0f1b6a831c399e269772661\"", "92eb5ffee6ae2fec3ad71c777531578f"]
        #expect(S3ETag.expected(fromPartETags: etags) == "96e024ba2074fe77e8e965ba43a704be-2")
        #expect(S3ETag.same("\"ABC-2\"", "abc-2"))
        #expect(S3ETag.expected(fromPartETags: ["xyz"]) == nil)
    }
}

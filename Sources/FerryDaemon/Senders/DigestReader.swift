import Crypto
import FerryConfig
import FerryDelivery
import FerryMultipart
import FerrySystem

/// Computes the RFC 9530 digests a spool with `digest` sends: the file's (`Repr-Digest`) and, for
/// a multipart form, the whole body's (`Content-Digest`), both in one read of the file (or from the
/// bytes already in memory). Blocking: run it off the concurrency pool.
enum DigestReader {
    /// The digests of a body that is the file itself (`put`).
    static func file(_ source: SourceFile, algorithm: DigestAlgorithm, isCancelled: () -> Bool) throws(SourceReadError) -> SentDigests {
        if let bytes = source.prefetched { return SentDigests(algorithm: algorithm, representation: digest(bytes, algorithm)) }
        var hasher = Hasher(algorithm)
        try source.read(isCancelled: isCancelled) { hasher.update($0) }
        return SentDigests(algorithm: algorithm, representation: hasher.finalize())
    }

    /// The digests of a form built in memory, `file` the file's bytes in it.
    static func form(file: [UInt8], body: [UInt8], algorithm: DigestAlgorithm) -> SentDigests {
        SentDigests(algorithm: algorithm, representation: digest(file, algorithm), content: digest(body, algorithm))
    }

    /// The digests of a form written from its pieces: the file is read once, into both digests.
    static func form(_ body: MultipartBody, source: SourceFile, algorithm: DigestAlgorithm, isCancelled: () -> Bool) throws(SourceReadError) -> SentDigests {
        var file = Hasher(algorithm)
        var content = Hasher(algorithm)
        for piece in body.pieces {
            switch piece {
            case .bytes(let bytes):
                bytes.withUnsafeBytes { content.update($0) }
            case .file(_, let length):
                try source.read(0..<length, isCancelled: isCancelled) { chunk in
                    file.update(chunk)
                    content.update(chunk)
                }
            }
        }
        return SentDigests(algorithm: algorithm, representation: file.finalize(), content: content.finalize())
    }

    static func digest(_ bytes: [UInt8], _ algorithm: DigestAlgorithm) -> [UInt8] {
        var hasher = Hasher(algorithm)
        bytes.withUnsafeBytes { hasher.update($0) }
        return hasher.finalize()
    }

    /// SHA-256 or SHA-512, chosen at run time.
    private enum Hasher {
        case sha256(SHA256)
        case sha512(SHA512)

        init(_ algorithm: DigestAlgorithm) {
            switch algorithm {
            case .sha256: self = .sha256(SHA256())
            case .sha512: self = .sha512(SHA512())
            }
        }

        mutating func update(_ bytes: UnsafeRawBufferPointer) {
            switch self {
            case .sha256(var hasher):
                hasher.update(bufferPointer: bytes)
                self = .sha256(hasher)
            case .sha512(var hasher):
                hasher.update(bufferPointer: bytes)
                self = .sha512(hasher)
            }
        }

        func finalize() -> [UInt8] {
            switch self {
            case .sha256(let hasher): Array(hasher.finalize())
            case .sha512(let hasher): Array(hasher.finalize())
            }
        }
    }
}

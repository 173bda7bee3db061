import FerryPortable
/// The boundary that separates the parts of a `multipart/form-data` body (RFC 7578, RFC 2046 §5.1.1).
///
/// A boundary is 1 to 70 characters, and Ferry only ever uses letters, digits and `-`, so it never
/// needs quoting in the `Content-Type` header. A random boundary carries 190 bits from the system's
/// secure random source, so it cannot occur inside a file by accident or by an attacker's design.
/// The boundary is stored with its job so that a body rebuilt after a restart is byte-identical.
public struct MultipartBoundary: Sendable, Hashable, CustomStringConvertible {
    /// The boundary text, without the leading `--` of the delimiter line.
    public let value: String

    /// The characters a random boundary is drawn from.
    static let alphabet = Array("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789".utf8)

    /// Random characters in a generated boundary: 32 × log2(62) ≈ 190 bits.
    static let randomLength = 32

    /// Wraps an existing boundary, such as one read back from the queue.
    /// - Throws: ``MultipartError/invalidBoundary(_:)`` unless it is 1–70 letters, digits or `-`.
    public init(_ value: String) throws(MultipartError) {
        guard Self.isValid(value) else { throw .invalidBoundary(value) }
        self.value = value
    }

    private init(unchecked value: String) { self.value = value }

    /// A new boundary, `ferry-` followed by 32 random letters and digits.
    public static func random() -> MultipartBoundary {
        var generator = BufferedSystemRandom()
        return random(using: &generator)
    }

    /// A new boundary drawn from `generator`; production code uses the secure system generator.
    public static func random<G: RandomNumberGenerator>(using generator: inout G) -> MultipartBoundary {
        var bytes = Array("ferry-".utf8)
        bytes.reserveCapacity(bytes.count + randomLength)
        for _ in 0..<randomLength {
            bytes.append(alphabet[Int(generator.next(upperBound: UInt64(alphabet.count)))])
        }
        return MultipartBoundary(unchecked: String(decoding: bytes, as: UTF8.self))
    }

    /// Whether `value` is a boundary Ferry accepts: 1–70 of `A–Z a–z 0–9 -`.
    public static func isValid(_ value: String) -> Bool {
        let utf8 = value.utf8
        guard (1...70).contains(utf8.count) else { return false }
        return utf8.allSatisfy { byte in
            (byte >= 0x30 && byte <= 0x39) || (byte >= 0x41 && byte <= 0x5A)
                || (byte >= 0x61 && byte <= 0x7A) || byte == 0x2D
        }
    }

    public var description: String { value }
}

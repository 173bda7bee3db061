import FerryPortable
import FerrySystem

/// A job's public identifier: a ULID (48-bit millisecond timestamp + 80 random bits, 26 characters
/// of Crockford base32). It is never reused, sorts by creation time, and is unique across machines,
/// so it doubles as the request's `Idempotency-Key`.
public struct JobID: Sendable, Hashable, Comparable, CustomStringConvertible, Codable {
    /// The 26-character text.
    public let rawValue: String

    static let alphabet = Array("0123456789ABCDEFGHJKMNPQRSTVWXYZ".utf8)

    public init(rawValue: String) { self.rawValue = rawValue }

    /// A new id for a job created at `milliseconds` since the Unix epoch.
    public static func generate(milliseconds: UInt64) -> JobID {
        var generator = BufferedSystemRandom()
        let random = (UInt128(generator.next() as UInt64) << 64 | UInt128(generator.next() as UInt64)) & ((1 << 80) - 1)
        let value = UInt128(milliseconds & ((1 << 48) - 1)) << 80 | random
        var bytes = [UInt8](repeating: 0, count: 26)
        var rest = value
        for index in stride(from: 25, through: 0, by: -1) {
            bytes[index] = alphabet[Int(rest & 31)]
            rest >>= 5
        }
        return JobID(rawValue: String(decoding: bytes, as: UTF8.self))
    }

    /// Whether `text` has the form of a job id.
    public static func isWellFormed(_ text: String) -> Bool {
        text.utf8.count == 26 && text.utf8.allSatisfy { alphabet.contains($0) }
    }

    public var description: String { rawValue }
    public static func < (lhs: JobID, rhs: JobID) -> Bool { lhs.rawValue < rhs.rawValue }
}

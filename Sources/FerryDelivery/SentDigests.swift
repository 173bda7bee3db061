import Crypto
import FerryConfig
import FerryQueue
import Foundation
import RawStructuredFieldValues

/// The RFC 9530 digests Ferry sent with an upload: of the file (`Repr-Digest`) and, where the
/// request body is more than the file (a multipart form), of the body (`Content-Digest`).
public struct SentDigests: Sendable, Equatable {
    public var algorithm: DigestAlgorithm
    /// The digest of the file's bytes.
    public var representation: [UInt8]
    /// The digest of the whole request body, when it differs from the file's.
    public var content: [UInt8]?

    public init(algorithm: DigestAlgorithm, representation: [UInt8], content: [UInt8]? = nil) {
        self.algorithm = algorithm
        self.representation = representation
        self.content = content
    }

    /// `sha-256=:…:`, the `Repr-Digest` field value.
    public var reprDigestField: String { Self.field(algorithm, representation) }
    /// The `Content-Digest` field value: the body's digest, or the file's when the body is the file.
    public var contentDigestField: String { Self.field(algorithm, content ?? representation) }

    /// The request headers: `Repr-Digest` (the file) and `Content-Digest` (the body).
    public var headers: [(name: String, value: String)] {
        [("Repr-Digest", reprDigestField), ("Content-Digest", contentDigestField)]
    }

    static func field(_ algorithm: DigestAlgorithm, _ digest: [UInt8]) -> String {
        "\(algorithm.rawValue)=:\(Data(digest).base64EncodedString()):"
    }

    /// What a 2xx answer's own `Repr-Digest` and `Content-Digest` say of the bytes the server got:
    /// `nil` when they agree with what was sent or do not say (no such field, another algorithm, a
    /// field that does not parse); else the mismatch, in words. A server's `Content-Digest`
    /// describes its *response* body (RFC 9530 §2), so only a `Repr-Digest` is compared, except
    /// that an answer echoing `Content-Digest` with the very algorithm and no body of its own
    /// (RFC 9530's `Want-Content-Digest` echo servers) is compared too. A `Repr-Digest` that is the
    /// digest of the answer's own body describes that body (a server digesting every response), not
    /// what Ferry sent.
    public func mismatch(in headers: [ResponseHeader], answerBody: [UInt8]) -> String? {
        // A multipart form's Repr-Digest is the file's; a server that digests the whole form is right too.
        if let value = headers.value("repr-digest"), let theirs = Self.member(algorithm, in: value), theirs != representation,
           theirs != content, answerBody.isEmpty || theirs != Self.digest(algorithm, answerBody) {
            return "the server's Repr-Digest (\(Self.field(algorithm, theirs))) does not match the file Ferry sent (\(reprDigestField)): the bytes were changed on the way"
        }
        if answerBody.isEmpty, let value = headers.value("content-digest"), let theirs = Self.member(algorithm, in: value),
           theirs != (content ?? representation), theirs != Self.emptyContentDigest(algorithm) {
            return "the server's Content-Digest (\(Self.field(algorithm, theirs))) does not match the body Ferry sent (\(contentDigestField)): the bytes were changed on the way"
        }
        return nil
    }

    /// The digest of `bytes` (an answer's body, as kept) with `algorithm`.
    static func digest(_ algorithm: DigestAlgorithm, _ bytes: [UInt8]) -> [UInt8] {
        switch algorithm {
        case .sha256: Array(SHA256.hash(data: bytes))
        case .sha512: Array(SHA512.hash(data: bytes))
        }
    }

    /// The digest of no bytes: a server's `Content-Digest` of its own empty answer (RFC 9530 §2),
    /// which says nothing of what it received.
    static func emptyContentDigest(_ algorithm: DigestAlgorithm) -> [UInt8] {
        let base64 = switch algorithm {
        case .sha256: "47DEQpj8HBSa+/TImW+5JCeuQeRkm5NMpJWZG3hSuFU="
        case .sha512: "z4PhNX7vuL3xVChQ1m2AB9Yg5AULVxXcg/SpIdNs6c5H0NE8XYXysP+DGNKHfuwvY7kxvUdBeoGlODJ6+SfaPg=="
        }
        return [UInt8](Data(base64Encoded: base64) ?? Data())
    }

    /// The digest for `algorithm` in an RFC 9530 dictionary field, if it has one.
    static func member(_ algorithm: DigestAlgorithm, in value: String) -> [UInt8]? {
        var parser = StructuredFieldValueParser(Array(value.utf8))
        guard let dictionary = try? parser.parseDictionaryFieldValue(),
              let item = dictionary.first(where: { $0.0 == algorithm.rawValue })?.1,
              case .item(let bare) = item, case .undecodedByteSequence(let base64) = bare.rfc9651BareItem,
              let data = Data(base64Encoded: base64) else { return nil }
        return [UInt8](data)
    }
}

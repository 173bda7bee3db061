/// `digest`: the RFC 9530 digest Ferry sends with each upload and checks in the server's answer.
public enum DigestAlgorithm: String, Sendable, Hashable, CaseIterable {
    case sha256 = "sha-256"
    case sha512 = "sha-512"
}

import FerrySystem

/// The names a spool file is given on its way out: its claim name, the free names of a move, its sidecar's.
extension SpoolFiles {
    /// The private name a file is claimed under while it is deleted or moved.
    static func claimName(_ token: String) -> [UInt8] { Array(".ferry-claim-\(token)".utf8) }

    /// The token of a ``claimName(_:)``.
    static func token(ofClaim claimed: [UInt8]) -> String {
        String(decoding: claimed.dropFirst(claimName("").count), as: UTF8.self)
    }

    static let sidecarSuffix = Array(".error.json".utf8)

    /// `<name>.error.json`, with the name shortened (at a character boundary) when the whole would
    /// exceed 255 bytes.
    static func sidecarName(for name: [UInt8]) -> [UInt8] {
        truncatedName(name, toBytes: maximumNameLength - sidecarSuffix.count) + sidecarSuffix
    }

    /// `name`, then `stem.1.ext`, `stem.2.ext`, … (up to 10,000 candidates), the stem shortened when
    /// a name would exceed 255 bytes; then, with `token` (the job's id), `stem.<token>.ext`: a name no
    /// other job takes, short enough that its sidecar's name is not shortened into another's, so a
    /// move never runs out of names (a webcam's `snapshot.jpg` kept every minute, a long name
    /// whose sidecars all shorten to one).
    static func candidateNames(for name: [UInt8], token: String? = nil) -> some Sequence<[UInt8]> {
        let (stem, ext) = stemAndExtension(of: name)
        return (0..<(token == nil ? 10_000 : 10_001)).lazy.map { index in
            if index == 0 { return name }
            if index == 10_000, let token { return uniqueName(for: name, token: token) }
            let counter = Array(".\(index)".utf8)
            return truncatedName(stem, toBytes: maximumNameLength - counter.count - ext.count) + counter + ext
        }
    }

    /// `stem.<token>.ext`, the last of ``candidateNames(for:token:)``.
    static func uniqueName(for name: [UInt8], token: String) -> [UInt8] {
        let (stem, ext) = stemAndExtension(of: name)
        let unique = Array(".\(token)".utf8)
        return truncatedName(stem, toBytes: maximumNameLength - sidecarSuffix.count - unique.count - ext.count) + unique + ext
    }

    /// A name's stem and its extension (from its last dot, at most 32 bytes; none for a leading dot).
    private static func stemAndExtension(of name: [UInt8]) -> (stem: [UInt8], ext: [UInt8]) {
        let dot = name.lastIndex(of: UInt8(ascii: ".")).flatMap { $0 > 0 && name.count - $0 <= 32 ? $0 : nil }
        return (dot.map { Array(name[..<$0]) } ?? name, dot.map { Array(name[$0...]) } ?? [])
    }
}

import Foundation

/// What a tus server said it supports (`OPTIONS`, tus 1.0 §5.2).
public struct TusCapabilities: Sendable, Equatable {
    /// `Tus-Extension`, lowercased: `creation`, `creation-with-upload`, `checksum`, `termination`, `expiration`, …
    public var extensions: Set<String>
    /// `Tus-Max-Size`, when the server states one.
    public var maxSize: Int64?
    /// `Tus-Checksum-Algorithm`, lowercased.
    public var checksumAlgorithms: Set<String>

    public init(extensions: Set<String> = ["creation"], maxSize: Int64? = nil, checksumAlgorithms: Set<String> = []) {
        self.extensions = extensions
        self.maxSize = maxSize
        self.checksumAlgorithms = checksumAlgorithms
    }

    /// Reads an `OPTIONS` answer's headers; no `Tus-Extension` means the creation extension only.
    public init(headers: [(name: String, value: String)]) {
        func list(_ name: String) -> Set<String> {
            Set((HTTPHeaders.value(name, in: headers) ?? "").split(separator: ",")
                .map { $0.trimmingCharacters(in: .whitespaces).lowercased() }.filter { !$0.isEmpty })
        }
        let extensions = list("Tus-Extension")
        self.init(
            extensions: extensions.isEmpty ? ["creation"] : extensions,
            maxSize: HTTPHeaders.value("Tus-Max-Size", in: headers).flatMap { Int64($0) },
            checksumAlgorithms: list("Tus-Checksum-Algorithm"))
    }

    /// Whether uploads carry `Upload-Checksum: sha1 …`.
    public var usesSHA1Checksums: Bool { checksumAlgorithm(preferring: nil) == "sha1" }

    /// The `Upload-Checksum` algorithm uploads carry: `preferred` (the spool's `digest`, as tus
    /// names it: `sha256`, `sha512`) when the server offers it, else `sha1` when it offers that;
    /// `nil` when the server has no checksum extension.
    public func checksumAlgorithm(preferring preferred: String?) -> String? {
        guard extensions.contains("checksum") else { return nil }
        if let preferred, checksumAlgorithms.contains(preferred) { return preferred }
        return checksumAlgorithms.contains("sha1") ? "sha1" : nil
    }
}

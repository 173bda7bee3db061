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
    public var usesSHA1Checksums: Bool { extensions.contains("checksum") && checksumAlgorithms.contains("sha1") }
}

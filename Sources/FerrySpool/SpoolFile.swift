import Foundation
import FerrySystem

/// A regular file, or a bundle directory, found in a spool and ready to be queued.
public struct SpoolFile: Sendable, Hashable {
    /// The path below the spool directory, as raw bytes (`sub/dir/name` when recursive).
    public var relativePath: [UInt8]
    /// What `fstatat` said when it was found; for a bundle, the bundle's version (``BundleListing/status``).
    public var status: FileStatus
    /// What the bundle held when it was found; `nil` for a file.
    public var bundle: BundleListing?
    /// When it was found (just after its `fstatat`): a file whose job was delivered and deleted
    /// after this was seen before the delete, and is not queued again (a rescan racing an upload).
    /// Not part of its equality.
    public var observedAt: Date

    public init(relativePath: [UInt8], status: FileStatus, bundle: BundleListing? = nil, observedAt: Date = Date()) {
        self.relativePath = relativePath
        self.status = status
        self.bundle = bundle
        self.observedAt = observedAt
    }

    public static func == (left: SpoolFile, right: SpoolFile) -> Bool {
        left.relativePath == right.relativePath && left.status == right.status && left.bundle == right.bundle
    }

    public func hash(into hasher: inout Hasher) {
        hasher.combine(relativePath)
        hasher.combine(status)
        hasher.combine(bundle)
    }

    /// The path as text for messages; bytes that are not UTF-8 appear as `\xNN`.
    public var displayPath: String { displayName(relativePath) }
}

/// Which names in a spool are candidates for upload.
///
/// The producer contract: write the file elsewhere, or under a name this filter ignores, then
/// rename it into place. Ignored are dot-files (`.name`), names ending in `.tmp`, `.part` (in any
/// case: Windows writes `~DF1234.TMP` through Samba) or `~`, and Microsoft Office's owner files
/// (`~$report.docx`, there while the document is open).
public enum SpoolNameFilter {
    /// Whether a file called `name` may be uploaded.
    public static func isCandidate(_ name: [UInt8]) -> Bool {
        guard let first = name.first, first != UInt8(ascii: ".") else { return false }
        if name.last == UInt8(ascii: "~") || name.starts(with: Array("~$".utf8)) { return false }
        for suffix in [Array(".tmp".utf8), Array(".part".utf8)] where name.count >= suffix.count {
            // ASCII letters only: a lowercased UTF-8 byte is never part of another character.
            if name.suffix(suffix.count).map({ $0 >= 0x41 && $0 <= 0x5A ? $0 | 0x20 : $0 }).elementsEqual(suffix) { return false }
        }
        return true
    }

    /// Whether `name` is a file's field sidecar (`<name>.fields.toml`), never uploaded as a file in a
    /// spool that reads them.
    public static func isFieldSidecar(_ name: [UInt8]) -> Bool {
        let suffix = BundleListing.sidecarName
        return name.count > suffix.count && name.suffix(suffix.count).elementsEqual(suffix)
    }

    /// Whether a subdirectory called `name` is entered in a recursive spool (dot-directories, such as
    /// the default `.sent` and `.failed`, are not).
    public static func isCandidateDirectory(_ name: [UInt8]) -> Bool {
        guard let first = name.first else { return false }
        return first != UInt8(ascii: ".")
    }
}

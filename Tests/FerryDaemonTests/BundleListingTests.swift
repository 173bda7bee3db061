import FerrySpool
import FerrySystem
import Testing

#if canImport(Glibc)
import Glibc
#endif

/// What a bundle may hold, decided from its listing alone: no sockets, no files.
@Suite("Bundle listings: what a bundle may hold")
struct BundleListingTests {
    static func entry(_ name: String, _ kind: FileStatus.Kind, size: Int64 = 1, mtime: Int64 = 10) -> BundleListing.Entry {
        var status = FileStatus(stat())
        status.kind = kind
        status.size = size
        status.modificationTime = mtime
        return BundleListing.Entry(name: Array(name.utf8), status: status)
    }

    static func listing(_ entries: [BundleListing.Entry], truncated: Bool = false, readLimit: Int = 10_001) -> BundleListing {
        var directory = FileStatus(stat())
        directory.kind = .directory
        directory.modificationTime = 5
        return BundleListing(directory: directory, entries: entries, truncated: truncated, readLimit: readLimit)
    }

    struct Row: Sendable, CustomTestStringConvertible {
        var name: String
        var entries: [BundleListing.Entry]
        var truncated = false
        var maxFiles = 100
        /// A fragment the refusal must contain; `nil`: the bundle may be sent.
        var refusal: String?
        var testDescription: String { name }
    }

    static let rows: [Row] = [
        Row(name: "three files", entries: [entry("a", .regular), entry("b", .regular), entry("c", .regular)], refusal: nil),
        Row(name: "files and the sidecar", entries: [entry(".fields.toml", .regular), entry("a", .regular)], refusal: nil),
        Row(name: "a hidden file is a file part", entries: [entry(".page", .regular)], refusal: nil),
        Row(name: "a subdirectory", entries: [entry("a", .regular), entry("inner", .directory)], refusal: "holds a directory, \"inner\""),
        Row(name: "a symlink", entries: [entry("a", .regular), entry("link", .symlink)], refusal: "symlink, \"link\""),
        Row(name: "a FIFO", entries: [entry("a", .regular), entry("fifo", .special)], refusal: "not a regular file"),
        Row(name: "no file", entries: [], refusal: "holds no file"),
        Row(name: "only the sidecar", entries: [entry(".fields.toml", .regular)], refusal: "holds no file"),
        Row(name: "exactly max_bundle_files", entries: (0..<3).map { entry("f\($0)", .regular) }, maxFiles: 3, refusal: nil),
        Row(name: "one over max_bundle_files", entries: (0..<4).map { entry("f\($0)", .regular) }, maxFiles: 3,
            refusal: "holds 4 files, more than max_bundle_files (3)"),
        Row(name: "too many to read", entries: [entry("a", .regular)], truncated: true, refusal: "more than 10000 files"),
        Row(name: "a sidecar that is a directory", entries: [entry("a", .regular), entry(".fields.toml", .directory)], refusal: "holds a directory"),
    ]

    @Test("Refusals", arguments: rows)
    func refusal(row: Row) {
        let reason = Self.listing(row.entries, truncated: row.truncated).refusal(maxFiles: row.maxFiles)
        if let expected = row.refusal {
            #expect(reason?.contains(expected) == true, "\(reason ?? "nil")")
        } else {
            #expect(reason == nil)
        }
    }

    @Test("The file parts leave out the sidecar, in order; the sidecar is found")
    func parts() {
        let listing = Self.listing([Self.entry(".fields.toml", .regular), Self.entry("a", .regular), Self.entry("b", .regular)])
        #expect(listing.files.map { String(decoding: $0.name, as: UTF8.self) } == ["a", "b"])
        #expect(listing.sidecar?.name == Array(".fields.toml".utf8))
    }
}

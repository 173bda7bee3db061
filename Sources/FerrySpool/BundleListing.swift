import FerrySystem

#if canImport(Glibc)
import Glibc
#endif

/// What a bundle directory holds, read in one pass: its entries and the one version that stands for
/// the whole (``status``).
///
/// A bundle is a directory in a `bundles = true` spool: one job, one request, every regular file in
/// it a file part. Its version is the directory's device and inode, the total size of its file
/// parts, and the newest modification time among the directory and its entries: adding, removing or
/// renaming an entry changes the directory's mtime, and writing a file changes the file's, so any
/// change to the bundle gives it another version, as a write gives a file another.
public struct BundleListing: Sendable, Hashable {
    /// One entry of the bundle, in byte order of names.
    public struct Entry: Sendable, Hashable {
        public var name: [UInt8]
        public var status: FileStatus
        public init(name: [UInt8], status: FileStatus) {
            self.name = name
            self.status = status
        }
    }

    /// The directory itself.
    public var directory: FileStatus
    /// Every entry (including ones a bundle may not hold), sorted by name bytes; at most
    /// ``readLimit`` of them (see ``truncated``).
    public var entries: [Entry]
    /// More entries than were read.
    public var truncated: Bool
    /// The bundle's version: the directory's identity, total size, newest mtime (kind `.directory`).
    public var status: FileStatus

    /// The most entries read from one bundle: a directory with more is refused without reading it all.
    public let readLimit: Int
    /// Whether ferryd may remove entries from the directory and move it (write and search
    /// permission for its effective user). A producer's `mkdir` under umask 022 makes a directory
    /// ferryd can upload but never delete or move afterwards.
    public var writable = true

    /// The file parts: regular files other than the bundle's field sidecar, in name order.
    public var files: [Entry] {
        entries.filter { $0.status.kind == .regular && $0.name != Self.sidecarName }
    }

    /// The bundle's field sidecar, if it holds one.
    public var sidecar: Entry? { entries.first { $0.name == Self.sidecarName && $0.status.kind == .regular } }

    /// `.fields.toml`: the bundle's own fields (``FieldSidecar`` in FerryConfig has the same name).
    public static let sidecarName = Array(".fields.toml".utf8)

    /// A listing of `entries` (sorted here) in `directory`: its version computed from them.
    public init(directory: FileStatus, entries: [Entry], truncated: Bool = false, readLimit: Int = 10_001) {
        self.directory = directory
        self.entries = entries.sorted { $0.name.lexicographicallyPrecedes($1.name) }
        self.truncated = truncated
        self.readLimit = readLimit
        var composite = directory
        composite.size = 0
        for entry in self.entries {
            if entry.status.kind == .regular && entry.name != Self.sidecarName { composite.size += entry.status.size }
            composite.modificationTime = max(composite.modificationTime, entry.status.modificationTime)
        }
        status = composite
    }

    /// Reads the bundle in `directory` (opened without following symlinks).
    public static func read(_ directory: DirectoryHandle, readLimit: Int = 10_001) throws(SystemError) -> BundleListing {
        let own = try directory.status()
        var entries: [Entry] = []
        var truncated = false
        try directory.forEachEntryName { (name: [UInt8]) throws(SystemError) in
            guard entries.count < readLimit else {
                truncated = true
                return
            }
            guard let status = directory.status(of: name) else {
                if errno == ENOENT { return }  // removed between readdir and stat: the dir's mtime says so
                throw SystemError.current("stat", directory.childPath(name))
            }
            entries.append(Entry(name: name, status: status))
        }
        var listing = BundleListing(directory: own, entries: entries, truncated: truncated, readLimit: readLimit)
        listing.writable = faccessat(directory.descriptor, ".", W_OK | X_OK, AT_EACCESS) == 0
        return listing
    }

    /// Reads the bundle `name` in `parent`, without following a symlink.
    public static func read(_ name: [UInt8], in parent: DirectoryHandle, readLimit: Int = 10_001) throws(SystemError) -> BundleListing {
        try read(parent.openSubdirectory([name]), readLimit: readLimit)
    }

    /// Why the bundle cannot be sent, in words for its `.error.json`; `nil` if it can.
    public func refusal(maxFiles: Int) -> String? {
        if let nested = entries.first(where: { $0.status.kind == .directory }) {
            return "the bundle holds a directory, \"\(displayName(nested.name))\"; a bundle holds regular files only, with no subdirectories"
        }
        if let link = entries.first(where: { $0.status.kind == .symlink }) {
            return "the bundle holds a symlink, \"\(displayName(link.name))\", which Ferry never follows; put the file itself in the bundle"
        }
        if let special = entries.first(where: { $0.status.kind == .special }) {
            return "the bundle holds \"\(displayName(special.name))\", which is not a regular file (a FIFO, socket or device)"
        }
        let count = files.count
        if truncated || count > maxFiles {
            return "the bundle holds \(truncated ? "more than \(readLimit - 1)" : "\(count)") files, more than max_bundle_files (\(maxFiles)); split it, or raise max_bundle_files"
        }
        if count == 0 { return "the bundle holds no file to upload" }
        return nil
    }
}

import FerryPortable
import FerrySystem
import SystemPackage

#if canImport(Glibc)
import Glibc
#endif

/// Bundles: a directory whose files are sent as one request, and disposed of as one.
extension SpoolFiles {
    /// An open bundle: its directory (reached without following symlinks) and what it holds.
    public struct OpenedBundle: Sendable {
        public var directory: DirectoryHandle
        public var listing: BundleListing
    }

    /// Opens the bundle at `relativePath` and reads what it holds.
    public func openBundle(_ relativePath: [UInt8]) throws(SourceOpenError) -> OpenedBundle {
        do {
            let root = try DirectoryHandle.open(directory)
            let (parent, name) = try root.openParent(of: relativePath)
            guard let status = parent.status(of: name) else { throw SourceOpenError.missing }
            switch status.kind {
            case .directory: break
            case .symlink: throw SourceOpenError.symlink
            default: throw SourceOpenError.notRegularFile(status.kind)
            }
            let bundle = try parent.openSubdirectory([name])
            return OpenedBundle(directory: bundle, listing: try BundleListing.read(bundle))
        } catch {
            throw openError(error)
        }
    }

    /// The version of the file (or bundle) at `relativePath` now, or `nil` if it is gone.
    public func currentVersion(of relativePath: [UInt8], bundle: Bool) -> FileVersion? {
        guard let status = status(relativePath) else { return nil }
        guard bundle, status.kind == .directory else { return status.version }
        return (try? openBundle(relativePath))?.listing.status.version
    }

    /// The version of entry `name` in `parent` whose status is `status`: its own, or for a bundle
    /// the bundle's (``BundleListing/status``); `nil` if a bundle cannot be read.
    static func version(of name: [UInt8], in parent: DirectoryHandle, _ status: FileStatus, bundle: Bool) -> FileVersion? {
        guard bundle else { return status.version }
        return (try? BundleListing.read(name, in: parent))?.status.version
    }

    /// Deletes the bundle directory `name` in `parent` with every file in it. A bundle that was
    /// sent holds regular files only; anything else makes the removal fail, and it is tried again.
    static func removeBundle(_ name: [UInt8], in parent: DirectoryHandle) throws(SystemError) {
        let bundle = try parent.openSubdirectory([name])
        for entry in try bundle.entryNames() {
            do {
                try bundle.unlink(entry)
            } catch where error.code == ENOENT {}
        }
        bundle.sync()
        try parent.removeDirectory(name)
        parent.sync()
    }

    /// Copies the claimed bundle `claimed` to another filesystem as `finalName`: its files into a
    /// hidden temporary directory, each `fsync`ed, renamed into place without replacing anything,
    /// then the original is deleted. A copy cut short is removed at the next start
    /// (``removeInterruptedMoves(in:)``).
    static func copyBundleAcross(
        _ claimed: [UInt8], from parent: DirectoryHandle, to target: DirectoryHandle, as finalName: [UInt8]
    ) throws(SystemError) {
        let source = try parent.openSubdirectory([claimed])
        let temporary = Array(".ferry-move-\(UInt64.random(in: 0...UInt64.max)).partial".utf8)
        let copy = try target.openOrCreateSubdirectory([temporary], mode: 0o750)
        var placed = false
        defer { if !placed { try? removeBundle(temporary, in: target) } }
        for name in try source.entryNames() {
            let (input, status) = try source.openForReading(name)
            defer { try? input.close() }
            guard status.kind == .regular else { throw SystemError(operation: "copy", path: source.childPath(name), code: EINVAL) }
            let fd = name.withCString { openat(copy.descriptor, $0, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0o600) }
            guard fd >= 0 else { throw .current("create", copy.childPath(name)) }
            let output = FileDescriptor(rawValue: fd)
            defer { try? output.close() }
            do {
                try FileCopier.automatic.copy(from: input, length: status.size, to: output, at: 0)
            } catch {
                throw SystemError(operation: "copy", path: source.childPath(name), code: EIO)
            }
            _ = fchmod(fd, status.mode & 0o7777)
            guard fsync(fd) == 0 else { throw .current("fsync", copy.childPath(name)) }
        }
        copy.sync()
        try target.renameNoReplace(temporary, to: target, as: finalName)
        placed = true
        target.sync()
        try? removeBundle(claimed, in: parent)
    }
}

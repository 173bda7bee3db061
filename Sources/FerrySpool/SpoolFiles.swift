import FerrySystem
import SystemPackage

#if canImport(Glibc)
import Glibc
#endif

/// Why a spool file could not be opened for upload.
public enum SourceOpenError: Error, Sendable, CustomStringConvertible {
    /// The file is gone (deleted or renamed away before its upload).
    case missing
    /// The path is a symlink, which Ferry never follows.
    case symlink
    /// The path is a directory, FIFO, socket or device.
    case notRegularFile(FileStatus.Kind)
    /// Ferry may not read it (permissions).
    case permissionDenied(SystemError)
    /// Any other failure.
    case other(SystemError)

    public var description: String {
        switch self {
        case .missing: "the file no longer exists"
        case .symlink: "the file is a symlink, which Ferry never follows"
        case .notRegularFile(let kind): "the file is not a regular file (\(kind.rawValue))"
        case .permissionDenied(let error): "permission denied: \(error)"
        case .other(let error): "\(error)"
        }
    }
}

/// The file operations the pipeline performs on a spool's files, each anchored at the spool
/// directory and refusing symlinks at every path component, and each checking that the file is
/// still the version that was uploaded before it deletes or moves it.
public struct SpoolFiles: Sendable {
    /// The spool directory.
    public let directory: String

    public init(directory: String) { self.directory = directory }

    /// Opens a file for reading; only a regular file is returned.
    public func open(_ relativePath: [UInt8]) throws(SourceOpenError) -> (FileDescriptor, FileStatus) {
        do {
            let root = try DirectoryHandle.open(directory)
            let (parent, name) = try root.openParent(of: relativePath)
            let (descriptor, status) = try parent.openForReading(name)
            guard status.kind == .regular else {
                try? descriptor.close()
                throw SourceOpenError.notRegularFile(status.kind)
            }
            return (descriptor, status)
        } catch let error as SourceOpenError {
            throw error
        } catch let error as SystemError {
            switch error.code {
            case ENOENT, ENOTDIR: throw .missing
            case ELOOP: throw .symlink
            case EACCES, EPERM: throw .permissionDenied(error)
            default: throw .other(error)
            }
        } catch {
            throw .other(SystemError(operation: "open", path: directory, code: EIO))
        }
    }

    /// The file's current status, or `nil` if it is gone.
    public func status(_ relativePath: [UInt8]) -> FileStatus? {
        guard let root = try? DirectoryHandle.open(directory),
              let (parent, name) = try? root.openParent(of: relativePath) else { return nil }
        return parent.status(of: name)
    }

    /// What became of a file that was to be deleted or moved.
    public enum Outcome: Sendable, Equatable {
        /// Deleted, or moved to the returned path.
        case done(finalPath: String?)
        /// Not there any more.
        case missing
        /// A different version is there now; it was left alone.
        case changed
    }

    /// Deletes the file if it is still `expected`.
    public func remove(_ relativePath: [UInt8], ifSameVersionAs expected: FileStatus) throws(SystemError) -> Outcome {
        let root = try DirectoryHandle.open(directory)
        let parent: DirectoryHandle
        let name: [UInt8]
        do {
            (parent, name) = try root.openParent(of: relativePath)
        } catch where error.code == ENOENT || error.code == ENOTDIR {
            return .missing
        }
        guard let current = parent.status(of: name) else {
            if errno == ENOENT { return .missing }
            throw .current("stat", parent.childPath(name))
        }
        guard current.isSameVersion(as: expected) else { return .changed }
        do {
            try parent.unlink(name)
        } catch where error.code == ENOENT {
            return .missing
        }
        return .done(finalPath: nil)
    }

    /// Moves the file into `destination` (created if needed) if it is still `expected`, keeping its
    /// name; if that name is taken there, `name.1.ext`, `name.2.ext`, … is used. Never replaces a
    /// file. Works across filesystems (copy, `fsync`, then delete).
    public func move(
        _ relativePath: [UInt8], ifSameVersionAs expected: FileStatus, to destination: String
    ) throws(SystemError) -> Outcome {
        let root = try DirectoryHandle.open(directory)
        let parent: DirectoryHandle
        let name: [UInt8]
        do {
            (parent, name) = try root.openParent(of: relativePath)
        } catch where error.code == ENOENT || error.code == ENOTDIR {
            return .missing
        }
        guard let current = parent.status(of: name) else {
            if errno == ENOENT { return .missing }
            throw .current("stat", parent.childPath(name))
        }
        guard current.isSameVersion(as: expected), current.kind == .regular else { return .changed }
        try makeDirectories(destination)
        let target = try DirectoryHandle.open(destination)
        for candidate in Self.candidateNames(for: name) {
            do {
                try parent.renameNoReplace(name, to: target, as: candidate)
                target.sync()
                parent.sync()
                return .done(finalPath: target.childPath(candidate))
            } catch where error.code == EEXIST {
                continue
            } catch where error.code == EXDEV {
                return try copyAcross(name, from: parent, expected: expected, to: target)
            } catch where error.code == ENOENT {
                return .missing
            }
        }
        throw SystemError(operation: "move", path: parent.childPath(name), code: EEXIST)
    }

    /// `name`, then `stem.1.ext`, `stem.2.ext`, … (up to 10,000 candidates).
    static func candidateNames(for name: [UInt8]) -> some Sequence<[UInt8]> {
        let dot = name.lastIndex(of: UInt8(ascii: ".")).flatMap { $0 > 0 ? $0 : nil }
        let stem = dot.map { Array(name[..<$0]) } ?? name
        let ext = dot.map { Array(name[$0...]) } ?? []
        return (0..<10_000).lazy.map { index in
            index == 0 ? name : stem + Array(".\(index)".utf8) + ext
        }
    }

    /// Moves a file to another filesystem: copy into a hidden temporary name, `fsync`, give it its
    /// final name without replacing anything, then delete the source if it is still unchanged.
    private func copyAcross(
        _ name: [UInt8], from parent: DirectoryHandle, expected: FileStatus, to target: DirectoryHandle
    ) throws(SystemError) -> Outcome {
        let (source, status) = try parent.openForReading(name)
        defer { try? source.close() }
        guard status.isSameVersion(as: expected) else { return .changed }
        let temporary = Array(".ferry-move-\(UInt64.random(in: 0...UInt64.max)).partial".utf8)
        let fd = temporary.withCString { openat(target.descriptor, $0, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0o600) }
        guard fd >= 0 else { throw .current("create", target.childPath(temporary)) }
        let output = FileDescriptor(rawValue: fd)
        var keepTemporary = false
        defer {
            try? output.close()
            if !keepTemporary { try? target.unlink(temporary) }
        }
        do {
            try FileCopier.automatic.copy(from: source, length: status.size, to: output, at: 0)
        } catch {
            switch error {
            case .sourceShort: return .changed
            case .io(let reading, let code):
                throw SystemError(operation: reading ? "read" : "write", path: reading ? parent.childPath(name) : target.childPath(temporary), code: code)
            }
        }
        guard fsync(fd) == 0 else { throw .current("fsync", target.childPath(temporary)) }
        for candidate in Self.candidateNames(for: name) {
            do {
                try target.renameNoReplace(temporary, to: target, as: candidate)
            } catch where error.code == EEXIST {
                continue
            }
            keepTemporary = true
            target.sync()
            // The copy is durable under its final name; now the source may go.
            _ = try? remove(parent: parent, name: name, expected: expected)
            return .done(finalPath: target.childPath(candidate))
        }
        throw SystemError(operation: "move", path: parent.childPath(name), code: EEXIST)
    }

    private func remove(parent: DirectoryHandle, name: [UInt8], expected: FileStatus) throws(SystemError) {
        guard let current = parent.status(of: name), current.isSameVersion(as: expected) else { return }
        try parent.unlink(name)
    }
}

import FerryPortable
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

/// The file operations the pipeline performs on a spool's files.
///
/// Every path is reached from the spool directory with `O_NOFOLLOW` at each component, so a symlink
/// planted by a producer (in place of a subdirectory, or of `.sent`/`.failed`) never redirects Ferry.
/// Deleting and moving first *claim* the file — rename it to a private dot-name in the same directory,
/// then check the claimed file is the version that was uploaded — so a newer version renamed into
/// place at the last moment is never deleted or moved unsent: it is put back and queued again.
/// Each operation is idempotent, keyed by a token (the job id), so one interrupted by a crash can
/// simply be run again.
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
        } catch {
            throw openError(error)
        }
    }

    /// What a failure to open something in the spool means for its upload.
    func openError(_ error: any Error) -> SourceOpenError {
        switch error {
        case let error as SourceOpenError: return error
        case let error as SystemError:
            switch error.code {
            case ENOENT, ENOTDIR: return .missing
            case ELOOP: return .symlink
            case EACCES, EPERM: return .permissionDenied(error)
            default: return .other(error)
            }
        default: return .other(SystemError(operation: "open", path: directory, code: EIO))
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
        /// Deleted, or moved to the returned path (raw bytes).
        case done(finalPath: [UInt8]?)
        /// Not there any more (and not found where a previous run would have put it).
        case missing
        /// A different version is there now; it was left (or put back) in the spool.
        case changed
    }

    /// Where the file of a job whose disposition is pending is now, relative to the spool: under its
    /// name, or under the private name a delete or move claimed it by (`.ferry-claim-<token>`) when
    /// that step was interrupted or failed; `nil` if neither exists.
    public func currentPath(of relativePath: [UInt8], token: String) -> [UInt8]? {
        if status(relativePath) != nil { return relativePath }
        var components = relativePath.split(separator: UInt8(ascii: "/")).map(Array.init)
        guard !components.isEmpty else { return nil }
        components[components.count - 1] = Self.claimName(token)
        let claimed = Array(components.joined(separator: [UInt8(ascii: "/")]))
        return status(claimed) != nil ? claimed : nil
    }

    /// Deletes the file if it is still `expected`.
    /// Deletes the file (or the bundle directory with its files, `bundle`) if it is still `expected`.
    public func remove(
        _ relativePath: [UInt8], ifSameVersionAs expected: FileStatus, token: String, bundle: Bool = false
    ) throws(SystemError) -> Outcome {
        switch try claim(relativePath, expected: expected, token: token, bundle: bundle) {
        case .missing: return .missing
        case .changed: return .changed
        case .claimed(let parent, let claimed):
            do {
                if bundle {
                    try Self.removeBundle(claimed, in: parent)
                } else {
                    try parent.unlink(claimed)
                }
            } catch where error.code == ENOENT {}
            return .done(finalPath: nil)
        }
    }

    /// Where a moved file goes, and what is written beside it.
    public struct MoveTarget: Sendable {
        /// The destination directory (created if missing). If it lies inside the spool it is reached
        /// from the spool directory without following symlinks.
        public var directory: String
        /// Subdirectories below `directory` to recreate (a recursive spool's structure).
        public var subdirectories: [[UInt8]]
        /// Written as `<final name>.error.json` before the file itself is moved; its text must contain
        /// the token, so an interrupted run recognises its own sidecar.
        public var sidecar: [UInt8]?

        public init(directory: String, subdirectories: [[UInt8]] = [], sidecar: [UInt8]? = nil) {
            self.directory = directory
            self.subdirectories = subdirectories
            self.sidecar = sidecar
        }
    }

    /// Moves the file into `target` if it is still `expected`, keeping its name, or `name.1.ext`,
    /// `name.2.ext`, … if that is taken. Never replaces a file. Works across filesystems (copy,
    /// `fsync`, then delete).
    public func move(
        _ relativePath: [UInt8], ifSameVersionAs expected: FileStatus, to target: MoveTarget, token: String, bundle: Bool = false
    ) throws(SystemError) -> Outcome {
        let name = relativePath.split(separator: UInt8(ascii: "/")).last.map(Array.init) ?? relativePath
        // Open the destination first: if it cannot be used (missing rights, a symlink planted in its
        // place), the file stays where it is, in plain sight.
        let destination = try openDestination(target)
        switch try claim(relativePath, expected: expected, token: token, bundle: bundle) {
        case .changed:
            return .changed
        case .missing:
            // An earlier run may have moved it already: look for this very file (same inode) there.
            for candidate in Array(Self.candidateNames(for: name).prefix(1000)) + [Self.uniqueName(for: name, token: token)] {
                guard let status = destination.status(of: candidate) else {
                    // A name the move would have taken ends the search; one it skips (its sidecar's
                    // or its field sidecar's name taken) does not.
                    if destination.status(of: Self.sidecarName(for: candidate)) == nil,
                       destination.status(of: Self.fieldSidecarName(for: candidate)) == nil { break }
                    continue
                }
                if bundle ? status.kind == .directory && status.version.inodeIdentity == expected.version.inodeIdentity
                    : status.isSameVersion(as: expected) {
                    if let sidecar = target.sidecar, destination.status(of: Self.sidecarName(for: candidate)) == nil {
                        try destination.writeFileAtomically(Self.sidecarName(for: candidate), bytes: sidecar)
                    }
                    return .done(finalPath: destination.childRawPath(candidate))
                }
            }
            return .missing
        case .claimed(let parent, let claimed):
            let mine = bundle ? nil : parent.status(of: claimed)?.version.inodeIdentity
            for candidate in Self.candidateNames(for: name, token: token) {
                let sidecarName = Self.sidecarName(for: candidate)
                // A move made as a hard link then an unlink, cut by a crash: the file is in place
                // already, under its claim name too; the claim name goes (one link, one name). With
                // a sidecar, only under the name whose sidecar is this job's (written before the
                // link): another job's hard link to the same file (a failed directory two spools
                // share) is not this job's move.
                if let mine, let placed = destination.status(of: candidate), placed.kind == .regular, placed.version.inodeIdentity == mine,
                   target.sidecar == nil
                    || (destination.readPrefix(sidecarName, limit: Self.sidecarReadLimit).map { Self.contains($0, Array(token.utf8)) } ?? false) {
                    try parent.unlink(claimed)
                    destination.sync()
                    parent.sync()
                    return .done(finalPath: destination.childRawPath(candidate))
                }
                // Nor a name whose field sidecar's name is taken (a failed directory two spools share):
                // the file's own sidecar, if it has one, follows it under that name.
                guard destination.status(of: candidate) == nil, destination.status(of: Self.fieldSidecarName(for: candidate)) == nil else { continue }
                if let sidecar = target.sidecar {
                    // A sidecar already there is ours only if an interrupted run wrote it.
                    if destination.status(of: sidecarName) != nil,
                       !(destination.readPrefix(sidecarName, limit: Self.sidecarReadLimit).map { Self.contains($0, Array(token.utf8)) } ?? false) {
                        continue
                    }
                    do {
                        try destination.writeFileAtomically(sidecarName, bytes: sidecar)
                    } catch {
                        // The destination cannot be written (read-only, full): the file goes back
                        // under its name, in plain sight, rather than wait under its claim name.
                        try? restore(claimed, in: parent, as: name)
                        throw error
                    }
                }
                do {
                    try parent.renameNoReplace(claimed, to: destination, as: candidate)
                } catch where error.code == EEXIST {
                    if target.sidecar != nil { try? destination.unlink(sidecarName) }
                    continue
                } catch where error.code == EXDEV {
                    do throws(SystemError) {
                        if bundle {
                            try Self.copyBundleAcross(claimed, from: parent, to: destination, as: candidate)
                        } else {
                            try copyAcross(claimed, from: parent, expected: expected, to: destination, as: candidate)
                        }
                    } catch where error.code == EEXIST {
                        if target.sidecar != nil { try? destination.unlink(sidecarName) }
                        continue
                    } catch {
                        // The copy was not placed (the other filesystem full, the file unreadable):
                        // the file goes back under its name, in plain sight, as above.
                        if target.sidecar != nil { try? destination.unlink(sidecarName) }
                        try? restore(claimed, in: parent, as: name)
                        throw error
                    }
                    return .done(finalPath: destination.childRawPath(candidate))
                } catch {
                    if target.sidecar != nil { try? destination.unlink(sidecarName) }
                    try? restore(claimed, in: parent, as: name)
                    throw error
                }
                destination.sync()
                parent.sync()
                return .done(finalPath: destination.childRawPath(candidate))
            }
            throw SystemError(operation: "move", path: parent.childPath(name), code: EEXIST)
        }
    }

    /// Opens the move target, without following symlinks below the spool when it lies inside it.
    private func openDestination(_ target: MoveTarget) throws(SystemError) -> DirectoryHandle {
        let spool = Self.normalized(directory)
        let destination = Self.normalized(target.directory)
        let base: DirectoryHandle
        if destination.hasPrefix(spool + "/") {
            let relative = Array(destination.dropFirst(spool.count + 1).utf8)
            base = try DirectoryHandle.open(directory)
                .openOrCreateSubdirectory(relative.split(separator: UInt8(ascii: "/")).map(Array.init))
        } else {
            try makeDirectories(target.directory)
            base = try DirectoryHandle.open(target.directory)
        }
        // Ferry's own, and no one else's to write: the sticky bit that protected the file in a
        // shared spool does not follow it into a directory another producer made.
        try base.checkOwnedByUs()
        let leaf = try base.openOrCreateSubdirectory(target.subdirectories)
        if !target.subdirectories.isEmpty { try leaf.checkOwnedByUs() }
        return leaf
    }

    /// Copies a claimed file to another filesystem under `finalName`: into a hidden temporary name,
    /// `fsync`, rename without replacing, then delete the claimed original. The copy keeps the
    /// file's permission bits.
    private func copyAcross(
        _ claimed: [UInt8], from parent: DirectoryHandle, expected: FileStatus, to target: DirectoryHandle, as finalName: [UInt8]
    ) throws(SystemError) {
        let (source, status) = try parent.openForReading(claimed)
        defer { try? source.close() }
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
            case .sourceShort, .cancelled:
                throw SystemError(operation: "copy", path: parent.childPath(claimed), code: EIO)
            case .io(let reading, let code):
                throw SystemError(operation: reading ? "read" : "write", path: reading ? parent.childPath(claimed) : target.childPath(temporary), code: code)
            }
        }
        _ = fchmod(fd, status.mode & 0o7777)
        // UTIME_OMIT ((1 << 30) - 2) leaves the access time alone.
        var times = [timespec](repeating: timespec(tv_sec: 0, tv_nsec: (1 << 30) - 2), count: 2)
        times[1] = timespec(tv_sec: Int(status.modificationTime / 1_000_000_000), tv_nsec: Int(status.modificationTime % 1_000_000_000))
        _ = futimens(fd, times)
        guard fsync(fd) == 0 else { throw .current("fsync", target.childPath(temporary)) }
        try target.renameNoReplace(temporary, to: target, as: finalName)
        keepTemporary = true
        target.sync()
        // The copy is durable under its final name; now the original may go.
        try? parent.unlink(claimed)
        parent.sync()
    }

    static func normalized(_ path: String) -> String {
        var parts: [Substring] = []
        for part in path.split(separator: "/") where part != "." {
            if part == ".." { _ = parts.popLast() } else { parts.append(part) }
        }
        return "/" + parts.joined(separator: "/")
    }

    /// How much of an `.error.json` sidecar is read to find the job id in it. The id is not at its
    /// start: keys are sorted, and `attempts` comes first, an entry for every attempt (a job retried
    /// for days through an outage has hundreds; 8 KiB held about 35).
    static let sidecarReadLimit = 4 << 20

    static func contains(_ haystack: [UInt8], _ needle: [UInt8]) -> Bool {
        guard !needle.isEmpty, haystack.count >= needle.count else { return false }
        for start in 0...(haystack.count - needle.count) where haystack[start] == needle[0] {
            if haystack[start..<(start + needle.count)].elementsEqual(needle) { return true }
        }
        return false
    }

    /// Removes the temporary copies (`.ferry-move-*.partial`) that a crash in the middle of a move
    /// across filesystems left in `directories` (the sent and failed directories) and their
    /// subdirectories, without following symlinks; returns how many were removed. Run at start-up,
    /// before any move can be in progress.
    public static func removeInterruptedMoves(in directories: [String]) -> Int {
        var removed = 0
        func sweep(_ directory: DirectoryHandle, depth: Int) {
            guard depth < 32, let names = try? directory.entryNames() else { return }
            for name in names {
                guard let status = directory.status(of: name) else { continue }
                let partial = name.starts(with: Array(".ferry-move-".utf8)) && name.reversed().starts(with: Array(".partial".utf8).reversed())
                if status.kind == .regular, partial {
                    if (try? directory.unlink(name)) != nil { removed += 1 }
                } else if status.kind == .directory, partial {
                    // A bundle's copy to another filesystem, cut short.
                    if (try? removeBundle(name, in: directory)) != nil { removed += 1 }
                } else if status.kind == .directory, let child = try? directory.openSubdirectory([name]) {
                    sweep(child, depth: depth + 1)
                }
            }
        }
        for path in Set(directories) {
            if let directory = try? DirectoryHandle.open(path) { sweep(directory, depth: 0) }
        }
        return removed
    }
}

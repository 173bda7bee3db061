import FerryPortable
import CFerrySystem
import SystemPackage

#if canImport(Glibc)
import Glibc
#endif

/// An open directory used as the anchor of `*at()` calls, so that entries below it are reached
/// without following a symlink anywhere on the way (`O_NOFOLLOW` on every component).
///
/// Names are raw bytes: a Linux file name need not be valid UTF-8, and Ferry must be able to open,
/// move and delete every file it reports.
public final class DirectoryHandle: Sendable {
    /// The descriptor, open for `*at()` calls.
    public let descriptor: Int32
    /// The directory's path as raw bytes.
    public let rawPath: [UInt8]
    /// The directory's path, for messages (invalid UTF-8 shown as `\xNN`).
    public var path: String { displayName(rawPath) }

    private init(descriptor: Int32, rawPath: [UInt8]) {
        self.descriptor = descriptor
        self.rawPath = rawPath
    }

    deinit { close(descriptor) }

    /// Opens a configured directory. The configured path itself is trusted (it may pass through
    /// symlinks the administrator made); only what is found below it is not.
    public static func open(_ path: String) throws(SystemError) -> DirectoryHandle {
        try open(rawPath: Array(path.utf8))
    }

    /// Opens a directory by its raw path (bytes that need not be UTF-8: a path Ferry built from a
    /// spool's names), following symlinks as ``open(_:)`` does.
    public static func open(rawPath path: [UInt8]) throws(SystemError) -> DirectoryHandle {
        let fd = path.withCString { Glibc.open($0, O_RDONLY | O_DIRECTORY | O_CLOEXEC) }
        guard fd >= 0 else { throw .current("open directory", String(decoding: path, as: UTF8.self)) }
        return DirectoryHandle(descriptor: fd, rawPath: path)
    }

    /// Opens the directory at `components` below this one, refusing symlinks at every step.
    public func openSubdirectory(_ components: [[UInt8]]) throws(SystemError) -> DirectoryHandle {
        var current = self
        for component in components {
            let fd = component.withCString { openat(current.descriptor, $0, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC) }
            guard fd >= 0 else {
                var error = SystemError.current("open directory", current.childPath(component))
                // With O_DIRECTORY a symlink reads as ENOTDIR; say what it is.
                if error.code == ENOTDIR || error.code == ELOOP, current.status(of: component)?.kind == .symlink {
                    error.code = ELOOP
                    error.detail = "it is a symlink, which Ferry never follows"
                }
                throw error
            }
            current = DirectoryHandle(descriptor: fd, rawPath: current.childRawPath(component))
        }
        return current
    }

    /// Opens (creating as needed, with `mode`) the directory at `components` below this one,
    /// refusing symlinks at every step: a producer who can write here cannot redirect Ferry elsewhere.
    public func openOrCreateSubdirectory(_ components: [[UInt8]], mode: mode_t = 0o750) throws(SystemError) -> DirectoryHandle {
        var current = self
        for component in components {
            if component.withCString({ mkdirat(current.descriptor, $0, mode) }) != 0 && errno != EEXIST {
                throw .current("create directory", current.childPath(component))
            }
            current = try current.openSubdirectory([component])
        }
        return current
    }

    /// Opens the directory holding `relativePath` and returns it with the final name.
    public func openParent(of relativePath: [UInt8]) throws(SystemError) -> (DirectoryHandle, [UInt8]) {
        var components = relativePath.split(separator: UInt8(ascii: "/"), omittingEmptySubsequences: true).map(Array.init)
        guard let name = components.popLast() else {
            throw SystemError(operation: "open", path: path, code: EINVAL)
        }
        return (try openSubdirectory(components), name)
    }

    /// Checks that this directory is one Ferry may move files into: owned by ferryd's user (or
    /// root), and writable by no one else, so that no other user can delete, replace or forge what
    /// is moved there (a producer who made `.failed` before ferryd did, for instance).
    public func checkOwnedByUs() throws(SystemError) {
        let status = try status()
        let me = UInt32(geteuid())
        if status.owner != me && status.owner != 0 {
            throw SystemError(operation: "use", path: path, code: EPERM, detail: """
                it belongs to uid \(status.owner), not to ferryd's user (uid \(me)): another user could delete or \
                replace what Ferry moves there; remove it (ferryd creates it again) or chown it to ferryd's user
                """)
        }
        if status.mode & 0o022 != 0 {
            throw SystemError(operation: "use", path: path, code: EPERM, detail: """
                it is writable by its group or by others (mode \(String(status.mode & 0o7777, radix: 8))): they could \
                delete or replace what Ferry moves there; chmod go-w it
                """)
        }
    }

    /// The status of this directory itself.
    public func status() throws(SystemError) -> FileStatus {
        var st = stat()
        guard fstat(descriptor, &st) == 0 else { throw .current("stat", path) }
        return FileStatus(st)
    }

    /// The status of entry `name`, without following a symlink; `nil` with `errno` set if it fails.
    public func status(of name: [UInt8]) -> FileStatus? {
        var st = stat()
        let result = name.withCString { fstatat(descriptor, $0, &st, AT_SYMLINK_NOFOLLOW) }
        return result == 0 ? FileStatus(st) : nil
    }

    /// Opens entry `name` for reading. Refuses symlinks (`ELOOP`), and never blocks on a FIFO.
    /// - Returns: the descriptor and the status of what was opened (which may not be a regular file;
    ///   the caller checks).
    public func openForReading(_ name: [UInt8]) throws(SystemError) -> (FileDescriptor, FileStatus) {
        let fd = name.withCString {
            openat(descriptor, $0, O_RDONLY | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK | O_NOCTTY)
        }
        guard fd >= 0 else { throw .current("open", childPath(name)) }
        var st = stat()
        guard fstat(fd, &st) == 0 else {
            let error = SystemError.current("stat", childPath(name))
            close(fd)
            throw error
        }
        // Reads of a regular file ignore O_NONBLOCK; clear it anyway so nothing is surprised.
        _ = fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) & ~O_NONBLOCK)
        return (FileDescriptor(rawValue: fd), FileStatus(st))
    }

    /// The names in this directory, except `.` and `..`, as raw bytes.
    public func entryNames() throws(SystemError) -> [[UInt8]] {
        var names: [[UInt8]] = []
        try forEachEntryName { names.append($0) }
        return names
    }

    /// Calls `body` with each name in this directory, except `.` and `..`, without collecting them.
    public func forEachEntryName(_ body: ([UInt8]) throws(SystemError) -> Void) throws(SystemError) {
        // fdopendir takes ownership of its descriptor, so give it a duplicate.
        let fd = dup(descriptor)
        guard fd >= 0 else { throw .current("read directory", path) }
        _ = fcntl(fd, F_SETFD, FD_CLOEXEC)
        guard let dir = fdopendir(fd) else {
            let error = SystemError.current("read directory", path)
            close(fd)
            throw error
        }
        defer { closedir(dir) }
        rewinddir(dir)
        while true {
            errno = 0
            guard let entry = readdir(dir) else {
                if errno != 0 { throw .current("read directory", path) }
                return
            }
            let name = withUnsafeBytes(of: entry.pointee.d_name) { raw in
                Array(raw.prefix(while: { $0 != 0 }))
            }
            if name == [0x2E] || name == [0x2E, 0x2E] { continue }
            try body(name)
        }
    }

    /// Removes entry `name` (not a directory).
    public func unlink(_ name: [UInt8]) throws(SystemError) {
        let result = name.withCString { unlinkat(descriptor, $0, 0) }
        guard result == 0 else { throw .current("remove", childPath(name)) }
    }

    /// Removes the empty directory `name`.
    public func removeDirectory(_ name: [UInt8]) throws(SystemError) {
        let result = name.withCString { unlinkat(descriptor, $0, AT_REMOVEDIR) }
        guard result == 0 else { throw .current("remove directory", childPath(name)) }
    }

    /// Renames entry `name` (a file) to `newName` in `target`, failing with `EEXIST` rather than
    /// replacing a file: `renameat2(RENAME_NOREPLACE)`, or, on a filesystem without it (FUSE, NFS and
    /// others answer `EINVAL`), a hard link then an unlink, which fails the same way; on one without
    /// hard links either, a check that `newName` is free, then a plain rename.
    public func renameNoReplace(_ name: [UInt8], to target: DirectoryHandle, as newName: [UInt8]) throws(SystemError) {
        let result = name.withCString { old in
            newName.withCString { new in cferry_rename_noreplace(descriptor, old, target.descriptor, new) }
        }
        if result == 0 { return }
        let code = errno
        guard code == EINVAL || code == ENOSYS || code == EOPNOTSUPP else {
            throw SystemError(operation: "rename", path: childPath(name), code: code)
        }
        let linked = name.withCString { old in newName.withCString { new in linkat(descriptor, old, target.descriptor, new, 0) } }
        if linked == 0 {
            guard name.withCString({ unlinkat(descriptor, $0, 0) }) == 0 else {
                let failure = SystemError.current("remove", childPath(name))
                _ = newName.withCString { unlinkat(target.descriptor, $0, 0) }  // one name, as before
                throw failure
            }
            return
        }
        let linkCode = errno
        guard linkCode == EPERM || linkCode == EOPNOTSUPP || linkCode == EXDEV || linkCode == EMLINK else {
            throw SystemError(operation: "rename", path: childPath(name), code: linkCode)
        }
        if target.status(of: newName) != nil { throw SystemError(operation: "rename", path: target.childPath(newName), code: EEXIST) }
        guard name.withCString({ old in newName.withCString { new in renameat(descriptor, old, target.descriptor, new) } }) == 0 else {
            throw .current("rename", childPath(name))
        }
    }

    /// Writes `bytes` to a new entry `name` atomically and durably (a temporary file, `fsync`, a
    /// rename that never replaces, the directory synced); fails with `EEXIST` if `name` exists.
    public func writeNewFile(_ name: [UInt8], bytes: [UInt8], mode: mode_t = 0o644) throws(SystemError) {
        let temporary = try writeTemporary(bytes, mode: mode)
        do {
            try renameNoReplace(temporary, to: self, as: name)
        } catch {
            try? unlink(temporary)
            throw error
        }
        sync()
    }

    /// Writes `bytes` to entry `name` atomically: a hidden temporary file (`O_EXCL | O_NOFOLLOW`),
    /// `fsync`, then a rename over `name` (replacing a previous version of it).
    public func writeFileAtomically(_ name: [UInt8], bytes: [UInt8], mode: mode_t = 0o640) throws(SystemError) {
        let temporary = try writeTemporary(bytes, mode: mode)
        let result = temporary.withCString { old in name.withCString { new in renameat(descriptor, old, descriptor, new) } }
        guard result == 0 else {
            let error = SystemError.current("rename", childPath(temporary))
            try? unlink(temporary)
            throw error
        }
    }

    /// ``writeFileAtomically(_:bytes:mode:)``, but never over an existing `name`: returns `false`
    /// (and writes nothing) when `name` is taken.
    public func writeFileNoReplace(_ name: [UInt8], bytes: [UInt8], mode: mode_t = 0o640) throws(SystemError) -> Bool {
        let temporary = try writeTemporary(bytes, mode: mode)
        do {
            try renameNoReplace(temporary, to: self, as: name)
            return true
        } catch {
            try? unlink(temporary)
            if error.code == EEXIST { return false }
            throw error
        }
    }

    /// A hidden temporary file (`O_EXCL | O_NOFOLLOW`) holding `bytes`, synced; its name.
    private func writeTemporary(_ bytes: [UInt8], mode: mode_t) throws(SystemError) -> [UInt8] {
        let temporary = Array(".ferry-partial-\(UInt64.random(in: 0...UInt64.max))".utf8)
        let fd = temporary.withCString { openat(descriptor, $0, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, mode) }
        guard fd >= 0 else { throw .current("create", childPath(temporary)) }
        defer { close(fd) }
        if let failure = FileCopier.writeAll(bytes, to: FileDescriptor(rawValue: fd), at: 0) {
            try? unlink(temporary)
            throw SystemError(operation: "write", path: childPath(temporary), code: failure)
        }
        guard fsync(fd) == 0 else {
            let error = SystemError.current("fsync", childPath(temporary))
            try? unlink(temporary)
            throw error
        }
        return temporary
    }

    /// Up to `limit` bytes from the start of entry `name` (a regular file, not through a symlink).
    public func readPrefix(_ name: [UInt8], limit: Int) -> [UInt8]? {
        guard let (file, status) = try? openForReading(name) else { return nil }
        defer { try? file.close() }
        guard status.kind == .regular else { return nil }
        // No more room than the file holds (a generous limit costs nothing for a small file).
        let room = min(limit, Int(clamping: max(status.size, 0)))
        var buffer = [UInt8](repeating: 0, count: room)
        let count = buffer.withUnsafeMutableBytes { pread(file.rawValue, $0.baseAddress, room, 0) }
        return count < 0 ? nil : Array(buffer[0..<count])
    }

    /// Flushes the directory itself, so renames and new entries in it survive a power cut.
    public func sync() {
        _ = fsync(descriptor)
    }

    /// `path/name` for messages (invalid UTF-8 shown as `\xNN`).
    public func childPath(_ name: [UInt8]) -> String {
        displayName(childRawPath(name))
    }

    /// `path/name` as raw bytes.
    public func childRawPath(_ name: [UInt8]) -> [UInt8] {
        rawPath + [UInt8(ascii: "/")] + name
    }
}

/// Creates `path` and any missing parents with `mode` (like `mkdir -p`).
public func makeDirectories(_ path: String, mode: mode_t = 0o750) throws(SystemError) {
    var current = path.hasPrefix("/") ? "" : "."
    for component in path.split(separator: "/") {
        current += "/" + component
        if mkdir(current, mode) != 0 && errno != EEXIST {
            throw .current("create directory", current)
        }
    }
    var st = stat()
    guard stat(path, &st) == 0 else { throw .current("stat", path) }
    guard FileStatus(st).kind == .directory else {
        throw SystemError(operation: "create directory", path: path, code: ENOTDIR)
    }
}

extension Array where Element == UInt8 {
    /// Calls `body` with the bytes as a NUL-terminated C string. Bytes holding a NUL name no file:
    /// `body` gets the empty string, which every `*at` call refuses (ENOENT), rather than the
    /// bytes before the NUL (`..\0x` would otherwise reach the kernel as `..`).
    public func withCString<R>(_ body: (UnsafePointer<CChar>) throws -> R) rethrows -> R {
        var terminated = contains(0) ? [] : self
        terminated.append(0)
        return try terminated.withUnsafeBufferPointer { buffer in
            try buffer.withMemoryRebound(to: CChar.self) { try body($0.baseAddress!) }
        }
    }
}

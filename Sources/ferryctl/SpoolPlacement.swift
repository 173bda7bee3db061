import FerrySystem
import Foundation
import Synchronization

#if canImport(Glibc)
import Glibc
#endif

/// Why a file could not be placed in a spool, in words for the user (shown after the file's name).
struct PlacementError: Error, CustomStringConvertible {
    var description: String
    init(_ description: String) { self.description = description }
}

/// Puts local files into a spool directory so that ferryd never sees a partial file: each is
/// copied under a hidden temporary name (ferryd ignores dot-files), flushed to disk, then renamed to
/// its own name without replacing a file already there, and the directory is flushed too.
enum SpoolPlacement {
    /// Bytes copied per read and write.
    static let chunkSize = 1 << 20

    /// The temporary file being written, if any, so a SIGINT handler can remove it.
    static let temporaryFile = Mutex<String?>(nil)

    /// Removes the temporary file being written, if any (for the SIGINT handler).
    static func removeTemporaryFile() {
        temporaryFile.withLock { path in
            if let path { unlink(path) }
            path = nil
        }
    }

    /// The name a file will have in the spool: the last component of `path`.
    static func baseName(_ path: String) -> String {
        String(path.split(separator: "/").last ?? "")
    }

    /// Copies the regular file at `source` into `directory` under its base name.
    /// - Returns: the name it has in the spool.
    static func place(_ source: String, in directory: DirectoryHandle) throws(PlacementError) -> String {
        let name = baseName(source)
        guard !name.isEmpty, name != "..", name != "." else { throw PlacementError("does not name a file") }
        guard !name.hasPrefix(".") else {
            throw PlacementError("its name starts with a dot, and ferryd ignores such files; rename it first")
        }
        let input = open(source, O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOCTTY)
        guard input >= 0 else { throw PlacementError("cannot open it: \(systemErrorMessage(errno))") }
        defer { close(input) }
        var status = stat()
        guard fstat(input, &status) == 0 else { throw PlacementError("cannot stat it: \(systemErrorMessage(errno))") }
        switch FileStatus(status).kind {
        case .regular: break
        case .directory: throw PlacementError("is a directory; only regular files can be enqueued")
        default: throw PlacementError("is not a regular file")
        }
        // Refuse early, rather than copy a large file only to find the name taken.
        if directory.status(of: Array(name.utf8)) != nil { throw nameTaken(name) }

        let temporary = ".ferryctl-\(String(UInt64.random(in: 0...UInt64.max), radix: 16)).tmp"
        let output = openat(directory.descriptor, temporary, O_CREAT | O_EXCL | O_WRONLY | O_CLOEXEC | O_NOFOLLOW, 0o644)
        guard output >= 0 else {
            throw PlacementError("cannot create a file in \(directory.path): \(systemErrorMessage(errno))")
        }
        temporaryFile.withLock { $0 = directory.childPath(Array(temporary.utf8)) }
        var closed = false
        do throws(PlacementError) {
            try copy(from: input, to: output)
            guard fsync(output) == 0 else { throw PlacementError("cannot flush the copy to disk: \(systemErrorMessage(errno))") }
            closed = true
            guard close(output) == 0 else { throw PlacementError("cannot write the copy: \(systemErrorMessage(errno))") }
            try rename(temporary, to: name, in: directory)
        } catch {
            if !closed { close(output) }
            unlinkat(directory.descriptor, temporary, 0)
            temporaryFile.withLock { $0 = nil }
            throw error
        }
        temporaryFile.withLock { $0 = nil }
        directory.sync()
        return name
    }

    /// Copies everything `input` holds to `output`, a chunk at a time.
    private static func copy(from input: Int32, to output: Int32) throws(PlacementError) {
        var buffer = [UInt8](repeating: 0, count: chunkSize)
        while true {
            let count = buffer.withUnsafeMutableBytes { read(input, $0.baseAddress, chunkSize) }
            if count == 0 { return }
            if count < 0 {
                if errno == EINTR || errno == EAGAIN { continue }
                throw PlacementError("cannot read it: \(systemErrorMessage(errno))")
            }
            let failure = buffer.withUnsafeBytes { raw in
                writeAll(UnsafeRawBufferPointer(rebasing: raw[0..<count]), to: output)
            }
            if let failure { throw PlacementError("cannot copy it into the spool: \(systemErrorMessage(failure))") }
        }
    }

    /// Writes all of `raw`; `nil`, or the `errno` of the failed write.
    private static func writeAll(_ raw: UnsafeRawBufferPointer, to output: Int32) -> Int32? {
        var done = 0
        while done < raw.count {
            let count = write(output, raw.baseAddress! + done, raw.count - done)
            if count < 0 {
                if errno == EINTR { continue }
                return errno
            }
            done += count
        }
        return nil
    }

    /// Renames `temporary` to `name` without replacing an existing `name` (``DirectoryHandle/renameNoReplace(_:to:as:)``,
    /// which falls back where the filesystem has no `RENAME_NOREPLACE`).
    private static func rename(_ temporary: String, to name: String, in directory: DirectoryHandle) throws(PlacementError) {
        do {
            try directory.renameNoReplace(Array(temporary.utf8), to: directory, as: Array(name.utf8))
        } catch {
            if error.code == EEXIST { throw nameTaken(name) }
            throw PlacementError("cannot rename the copy to \(name) in \(directory.path): \(systemErrorMessage(error.code))")
        }
    }

    private static func nameTaken(_ name: String) -> PlacementError {
        PlacementError("spool already has a file named \(name) (it is still waiting to be uploaded)")
    }
}

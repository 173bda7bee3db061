import FerryConfig
import FerrySystem
import Foundation

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
/// its own name without replacing a file already there, and the directory is flushed too. A file's
/// sidecar (`<name>.fields.toml`) is put in place the same way before the file is.
enum SpoolPlacement {
    /// Bytes copied per read and write.
    static let chunkSize = 1 << 20

    /// The name a file will have in the spool: the last component of `path`.
    static func baseName(_ path: String) -> String {
        String(path.split(separator: "/").last ?? "")
    }

    /// Refuses a name ferryd would not take as a file or bundle of its own.
    /// - Parameter hasSidecars: whether the spool reads `<name>.fields.toml` as a file's fields
    ///   (multipart spools), so that such a name is not a file to upload.
    static func checkName(_ name: String, hasSidecars: Bool = true) throws(PlacementError) {
        guard !name.isEmpty, name != "..", name != "." else { throw PlacementError("does not name a file") }
        guard !name.hasPrefix(".") else {
            throw PlacementError("its name starts with a dot, and ferryd ignores such files; rename it first")
        }
        guard !hasSidecars || !FieldSidecar.isSidecarName(Array(name.utf8)) else {
            throw PlacementError("its name ends in \(FieldSidecar.suffix), which marks a file's fields, not a file to upload; rename it first")
        }
    }

    /// Copies the regular file at `source` into `directory` under its base name, after its
    /// `sidecar` (the fields for it) if one is given.
    /// - Parameter hasSidecars: whether the spool reads sidecars (see ``checkName(_:hasSidecars:)``).
    /// - Returns: the name it has in the spool.
    static func place(_ source: String, in directory: DirectoryHandle, sidecar: [UInt8]?, hasSidecars: Bool) throws(PlacementError) -> String {
        let name = baseName(source)
        try checkName(name, hasSidecars: hasSidecars)
        let input = open(source, O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOCTTY)
        guard input >= 0 else { throw PlacementError("cannot open it: \(systemErrorMessage(errno))") }
        defer { close(input) }
        var status = stat()
        guard fstat(input, &status) == 0 else { throw PlacementError("cannot stat it: \(systemErrorMessage(errno))") }
        guard FileStatus(status).kind == .regular else { throw PlacementError("is not a regular file") }
        // Refuse early, rather than copy a large file only to find the name taken.
        if directory.status(of: Array(name.utf8)) != nil { throw nameTaken(name) }

        let temporary = try createTemporaryFile(in: directory)
        var placedSidecar: PendingEntries.Entry?
        do throws(PlacementError) {
            try fill(temporary, from: input)
            if let sidecar {
                // Replaces a sidecar left without its file (the name is free, checked above).
                placedSidecar = try placeSidecar(sidecar, as: FieldSidecar.name(for: Array(name.utf8)), in: directory)
            }
            try PendingEntries.update(removing: [temporary.entry] + (placedSidecar.map { [$0] } ?? [])) { () throws(PlacementError) in
                try rename(temporary.entry.name, to: name, in: directory)
            }
        } catch {
            PendingEntries.remove(temporary.entry)
            if let placedSidecar { PendingEntries.remove(placedSidecar) }
            throw error
        }
        directory.sync()
        return name
    }

    /// A new file open for writing, recorded as pending.
    struct TemporaryFile {
        let entry: PendingEntries.Entry
        let descriptor: Int32
    }

    /// Creates a hidden file (`.ferryctl-….tmp`, `O_EXCL | O_NOFOLLOW`) in `directory`, recorded as pending.
    static func createTemporaryFile(in directory: DirectoryHandle) throws(PlacementError) -> TemporaryFile {
        let entry = PendingEntries.Entry(
            parent: directory, name: Array(".ferryctl-\(String(UInt64.random(in: 0...UInt64.max), radix: 16)).tmp".utf8),
            isDirectory: false)
        var descriptor: Int32 = -1
        try PendingEntries.create(entry) { () throws(PlacementError) in
            descriptor = entry.name.withCString { openat(directory.descriptor, $0, O_CREAT | O_EXCL | O_WRONLY | O_CLOEXEC | O_NOFOLLOW, 0o644) }
            guard descriptor >= 0 else {
                throw PlacementError("cannot create a file in \(directory.path): \(systemErrorMessage(errno))")
            }
        }
        return TemporaryFile(entry: entry, descriptor: descriptor)
    }

    /// Copies `input` into `file`, flushes it to disk and closes it (also on failure).
    static func fill(_ file: TemporaryFile, from input: Int32) throws(PlacementError) {
        do throws(PlacementError) {
            try copy(from: input, to: file.descriptor)
        } catch {
            close(file.descriptor)
            throw error
        }
        try finish(file)
    }

    /// Writes `bytes` into `file`, flushes it to disk and closes it (also on failure).
    static func fill(_ file: TemporaryFile, with bytes: [UInt8]) throws(PlacementError) {
        let failure = bytes.withUnsafeBytes { writeAll($0, to: file.descriptor) }
        if let failure {
            close(file.descriptor)
            throw PlacementError("cannot write into the spool: \(systemErrorMessage(failure))")
        }
        try finish(file)
    }

    private static func finish(_ file: TemporaryFile) throws(PlacementError) {
        guard fsync(file.descriptor) == 0 else {
            let code = errno
            close(file.descriptor)
            throw PlacementError("cannot flush the copy to disk: \(systemErrorMessage(code))")
        }
        guard close(file.descriptor) == 0 else { throw PlacementError("cannot write the copy: \(systemErrorMessage(errno))") }
    }

    /// Writes `bytes` to `name` atomically and durably (a hidden temporary file, `fsync`, a rename
    /// that replaces what is there, the directory flushed).
    /// - Returns: the placed sidecar, recorded as pending until its file is placed.
    private static func placeSidecar(_ bytes: [UInt8], as name: [UInt8], in directory: DirectoryHandle) throws(PlacementError) -> PendingEntries.Entry {
        let temporary = try createTemporaryFile(in: directory)
        let placed = PendingEntries.Entry(parent: directory, name: name, isDirectory: false)
        do throws(PlacementError) {
            try fill(temporary, with: bytes)
            try PendingEntries.update(adding: [placed], removing: [temporary.entry]) { () throws(PlacementError) in
                let result = temporary.entry.name.withCString { old in
                    name.withCString { new in renameat(directory.descriptor, old, directory.descriptor, new) }
                }
                guard result == 0 else {
                    throw PlacementError("cannot put the fields in place as \(displayName(name)): \(systemErrorMessage(errno))")
                }
            }
        } catch {
            PendingEntries.remove(temporary.entry)
            throw error
        }
        directory.sync()
        return placed
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
    static func rename(_ temporary: [UInt8], to name: String, in directory: DirectoryHandle) throws(PlacementError) {
        do {
            try directory.renameNoReplace(temporary, to: directory, as: Array(name.utf8))
        } catch {
            if error.code == EEXIST || error.code == ENOTEMPTY { throw nameTaken(name) }
            throw PlacementError("cannot rename the copy to \(name) in \(directory.path): \(systemErrorMessage(error.code))")
        }
    }

    static func nameTaken(_ name: String) -> PlacementError {
        PlacementError("spool already has an entry named \(name) (it is still waiting to be uploaded)")
    }
}

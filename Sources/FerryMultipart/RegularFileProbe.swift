import SystemPackage

#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#elseif canImport(Darwin)
import Darwin
#endif

/// Checks that a form's file is a regular file and finds its length, before the form is encoded
/// (for ``MultipartForm/contentLength``) and again when it is opened to be sent.
enum RegularFileProbe {
    /// `S_IFMT` and `S_IFREG`, spelled out: not every C library's Swift overlay imports the macros.
    private static let typeMask = 0o170000
    private static let regularType = 0o100000

    /// The length of the regular file at `path` (symlinks followed).
    /// - Throws: ``MultipartError/fileNotFound(path:)``, ``MultipartError/notARegularFile(path:)``,
    ///   or ``MultipartError/io(operation:path:errno:)`` (e.g. `EACCES` on a directory on the way).
    static func length(atPath path: String) throws(MultipartError) -> Int64 {
        var status = stat()
        guard stat(path, &status) == 0 else {
            let code = errno
            if code == ENOENT || code == ENOTDIR { throw .fileNotFound(path: path) }
            throw .io(operation: "stat", path: path, errno: code)
        }
        guard Int(status.st_mode) & typeMask == regularType else { throw .notARegularFile(path: path) }
        return Int64(status.st_size)
    }

    /// Opens the file at `path` for reading and checks it is still a regular file of `expectedLength` bytes.
    /// - Throws: ``MultipartError/sourceChanged(expected:actual:)`` if its length changed since the
    ///   form was made, or the errors of ``length(atPath:)``.
    static func open(_ path: String, expectedLength: Int64) throws(MultipartError) -> FileDescriptor {
        let descriptor: FileDescriptor
        do {
            // Non-blocking: a pipe swapped in for the file since it was checked must not hang the open.
            descriptor = try FileDescriptor.open(
                FilePath(path), .readOnly, options: [.closeOnExec, .nonBlocking], retryOnInterrupt: true)
        } catch {
            let code = (error as? Errno)?.rawValue ?? EIO
            if code == ENOENT || code == ENOTDIR { throw .fileNotFound(path: path) }
            throw .io(operation: "open", path: path, errno: code)
        }
        var status = stat()
        guard fstat(descriptor.rawValue, &status) == 0 else {
            let code = errno
            try? descriptor.close()
            throw .io(operation: "stat", path: path, errno: code)
        }
        guard Int(status.st_mode) & typeMask == regularType else {
            try? descriptor.close()
            throw .notARegularFile(path: path)
        }
        guard Int64(status.st_size) == expectedLength else {
            try? descriptor.close()
            throw .sourceChanged(expected: expectedLength, actual: Int64(status.st_size))
        }
        return descriptor
    }
}

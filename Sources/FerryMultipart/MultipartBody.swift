import FerryPortable
import SystemPackage

#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#elseif canImport(Darwin)
import Darwin
#endif

/// A complete `multipart/form-data` body (RFC 7578): a boundary and its parts, in order.
///
/// The body is laid out exactly as browsers send it:
///
///     --B CRLF  headers CRLF  bytes CRLF      (for each part)
///     --B-- CRLF                              (the close delimiter)
///
/// with no preamble and no epilogue, CRLF everywhere, and file bytes copied unaltered. Its length is
/// known exactly before a byte is written (``contentLength``), so it can be sent with a
/// `Content-Length` header rather than chunked.
public struct MultipartBody: Sendable {
    /// The boundary between parts.
    public let boundary: MultipartBoundary
    /// The parts, in the order they are written.
    public let parts: [MultipartPart]
    /// Each part's header block, built once.
    private let headers: [[UInt8]]

    /// Describes a body; fails if a part header would need a CR, LF or NUL.
    public init(boundary: MultipartBoundary, parts: [MultipartPart]) throws(MultipartError) {
        self.boundary = boundary
        self.parts = parts
        var headers: [[UInt8]] = []
        headers.reserveCapacity(parts.count)
        for part in parts { headers.append(try part.headerBytes()) }
        self.headers = headers
    }

    /// The request's `Content-Type`: exactly `multipart/form-data; boundary=B`, with no `charset`.
    public var contentType: String { "multipart/form-data; boundary=\(boundary.value)" }

    /// The exact length of the body in bytes.
    public var contentLength: Int64 {
        Self.length(boundary: boundary, headerLengths: headers.map(\.count), contentLengths: parts.map(\.content.length))
    }

    /// The length of a body with `boundary` whose parts have header blocks of `headerLengths` bytes
    /// and contents of `contentLengths` bytes: the one formula, shared with ``MultipartForm``.
    static func length(boundary: MultipartBoundary, headerLengths: [Int], contentLengths: [Int64]) -> Int64 {
        let delimiter = Int64(boundary.value.utf8.count + 4)  // "--B\r\n"
        var total = Int64(boundary.value.utf8.count + 6)  // "--B--\r\n"
        for (header, content) in zip(headerLengths, contentLengths) {
            total += delimiter + Int64(header) + content + 2
        }
        return total
    }

    /// Writes the whole body to `output` from offset 0 and returns the number of bytes written.
    ///
    /// File parts are copied with `copy_file_range(2)` on Linux when `copier` allows it, falling back
    /// to `pread`/`pwrite` where the kernel or filesystem does not support it (and on other systems).
    /// - Parameters:
    ///   - output: the file to write, at offsets from 0.
    ///   - path: the output's path, used in error messages only.
    ///   - copier: how file parts' bytes are copied.
    ///   - isCancelled: asked between chunks; `true` stops the write with ``MultipartError/cancelled``.
    ///   - progress: hears how many bytes of the body are in place, as they are written (in order),
    ///     so a reader may follow the writer.
    /// - Throws: ``MultipartError/sourceChanged(expected:actual:)`` if a file part's source is shorter
    ///   than planned, ``MultipartError/io(operation:path:errno:)`` if a write fails (e.g. `ENOSPC`).
    @discardableResult
    public func write(
        to output: FileDescriptor, path: String, copier: FileCopier = .automatic, isCancelled: () -> Bool = { false },
        progress: (Int64) -> Void = { _ in }
    ) throws(MultipartError) -> Int64 {
        var offset: Int64 = 0
        var pending: [UInt8] = []  // framing bytes not yet written, coalesced into one write
        func flush() throws(MultipartError) {
            guard !pending.isEmpty else { return }
            if let failure = FileCopier.writeAll(pending, to: output, at: offset) {
                throw .io(operation: "write", path: path, errno: failure)
            }
            offset += Int64(pending.count)
            pending.removeAll(keepingCapacity: true)
            progress(offset)
        }
        for (part, header) in zip(parts, headers) {
            pending += Array("--\(boundary.value)\r\n".utf8)
            pending += header
            switch part.content {
            case .bytes(let bytes):
                pending += bytes
            case .file(let source, let length):
                try flush()
                do {
                    let start = offset
                    try copier.copy(from: source, length: length, to: output, at: offset, kernelChunk: 8 << 20,
                                    isCancelled: isCancelled, progress: { progress(start + $0) })
                } catch {
                    switch error {
                    case .cancelled:
                        throw .cancelled
                    case .sourceShort(let expected, let actual):
                        throw .sourceChanged(expected: expected, actual: actual)
                    case .io(let reading, let code):
                        throw .io(operation: reading ? "read the file for" : "write", path: path, errno: code)
                    }
                }
                offset += length
            }
            pending += [0x0D, 0x0A]
        }
        pending += Array("--\(boundary.value)--\r\n".utf8)
        try flush()
        progress(offset)
        return offset
    }

    /// A run of the body's bytes: framing and field values as bytes, a file part as its file.
    public enum Piece: Sendable {
        case bytes([UInt8])
        /// The first `length` bytes of the file.
        case file(FileDescriptor, length: Int64)
    }

    /// The body as pieces, in order, adjacent bytes together: what ``write(to:path:copier:isCancelled:progress:)``
    /// writes (to digest the body in the same read as its file, say).
    public var pieces: [Piece] {
        var pieces: [Piece] = []
        var pending: [UInt8] = []
        for (part, header) in zip(parts, headers) {
            pending += Array("--\(boundary.value)\r\n".utf8) + header
            switch part.content {
            case .bytes(let bytes):
                pending += bytes
            case .file(let source, let length):
                pieces.append(.bytes(pending))
                pending = []
                pieces.append(.file(source, length: length))
            }
            pending += [0x0D, 0x0A]
        }
        pieces.append(.bytes(pending + Array("--\(boundary.value)--\r\n".utf8)))
        return pieces
    }

    /// The whole body in memory, file parts read at explicit offsets (or taken from `fileContents`, the
    /// file already read, when its length is the part's): for small bodies, where a body file would
    /// cost more system calls than the bytes are worth. The bytes returned are the bytes read; the
    /// caller checks that the source was not changed meanwhile.
    /// - Throws: ``MultipartError/sourceChanged(expected:actual:)`` if a file part's source is shorter
    ///   than planned, ``MultipartError/io(operation:path:errno:)`` if a read fails.
    public func bytes(path: String, fileContents: [UInt8]? = nil) throws(MultipartError) -> [UInt8] {
        let total = Int(contentLength)
        var body = [UInt8]()
        body.reserveCapacity(total)
        for (part, header) in zip(parts, headers) {
            body += Array("--\(boundary.value)\r\n".utf8)
            body += header
            switch part.content {
            case .bytes(let bytes):
                body += bytes
            case .file(_, let length) where fileContents?.count == Int(length):
                body += fileContents!
            case .file(let source, let length):
                let start = body.count
                body += repeatElement(0, count: Int(length))
                var done = 0
                while done < Int(length) {
                    let count: Int
                    do {
                        count = try body.withUnsafeMutableBytes { raw in
                            try source.read(
                                fromAbsoluteOffset: Int64(done),
                                into: UnsafeMutableRawBufferPointer(rebasing: raw[(start + done)..<(start + Int(length))]))
                        }
                    } catch {
                        throw .io(operation: "read the file for", path: path, errno: (error as? Errno)?.rawValue ?? EIO)
                    }
                    if count == 0 { throw .sourceChanged(expected: length, actual: Int64(done)) }
                    done += count
                }
            }
            body += [0x0D, 0x0A]
        }
        body += Array("--\(boundary.value)--\r\n".utf8)
        precondition(body.count == total, "multipart body length mismatch")
        return body
    }

    /// Writes the body to a new file at `path`, created with mode 0600 and `O_EXCL`, so an existing
    /// file (or a symlink planted there) is never written through. On failure the partial file is removed.
    /// - Returns: the number of bytes written, equal to ``contentLength``.
    @discardableResult
    public func writeFile(
        at path: FilePath, copier: FileCopier = .automatic, isCancelled: () -> Bool = { false },
        progress: (Int64) -> Void = { _ in }
    ) throws(MultipartError) -> Int64 {
        let descriptor: FileDescriptor
        do {
            descriptor = try FileDescriptor.open(
                path, .writeOnly, options: [.create, .exclusiveCreate, .noFollow, .closeOnExec],
                permissions: [.ownerReadWrite], retryOnInterrupt: true)
        } catch {
            throw .io(operation: "create", path: path.string, errno: (error as? Errno)?.rawValue ?? EIO)
        }
        defer { try? descriptor.close() }
        do throws(MultipartError) {
            // The mode is 0600 regardless of the umask: only the daemon's user may read a body.
            if fchmod(descriptor.rawValue, 0o600) != 0 {
                throw .io(operation: "chmod", path: path.string, errno: errno)
            }
            // Reserve the whole body first: a full disk shows now, before a sender following the
            // build (ferryd overlaps the two) has put a byte on the wire, not half-way through.
            if let full = FileCopier.reserve(contentLength, for: descriptor) {
                throw .io(operation: "write", path: path.string, errno: full)
            }
            return try write(to: descriptor, path: path.string, copier: copier, isCancelled: isCancelled, progress: progress)
        } catch {
            unlink(path.string)
            throw error
        }
    }
}

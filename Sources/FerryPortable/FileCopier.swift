import SystemPackage

#if os(Linux)
import CFerrySystem
#endif
#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#elseif canImport(Darwin)
import Darwin
#endif

/// How a file's bytes are copied into another file (a request body, a sent or failed file moved
/// across filesystems).
///
/// The two ways give byte-identical copies; ``automatic`` is the right choice everywhere, and
/// ``readWrite`` exists so the portable path can be chosen (and tested) on Linux too.
public enum FileCopier: Sendable, Hashable {
    /// On Linux, `copy_file_range(2)`: the bytes stay in the kernel, and a filesystem that can
    /// (Btrfs, XFS) shares the blocks instead of copying them. Where the kernel or filesystem
    /// refuses it (`EXDEV` across filesystems, `ENOSYS`, `EINVAL`, `EOPNOTSUPP`, ...) the copy
    /// finishes with ``readWrite``. On other systems (macOS, iOS) it is ``readWrite``.
    case automatic
    /// Reads and writes at explicit offsets (`pread`/`pwrite`) through a buffer of at most 1 MiB:
    /// the portable path.
    case readWrite

    /// The read/write buffer's size.
    static let bufferSize = 1 << 20

    /// Copies the first `length` bytes of `source` to `output` at `outputOffset`, checking
    /// `isCancelled` between chunks (`kernelChunk` bytes in the kernel, 1 MiB otherwise) and telling
    /// `progress` how many bytes are in place after each.
    /// - Throws: ``CopyError/sourceShort(expected:actual:)`` if the source ends early,
    ///   ``CopyError/cancelled``, or ``CopyError/io(reading:errno:)``.
    public func copy(
        from source: FileDescriptor, length: Int64, to output: FileDescriptor, at outputOffset: Int64,
        kernelChunk: Int = 64 << 20, isCancelled: () -> Bool = { false }, progress: (Int64) -> Void = { _ in }
    ) throws(CopyError) {
        var copied: Int64 = 0
        #if os(Linux)
        if self == .automatic {
            copied = try Self.copyInKernel(
                from: source, length: length, to: output, at: outputOffset, chunk: kernelChunk,
                isCancelled: isCancelled, progress: progress)
        }
        #endif
        guard copied < length else { return }
        var buffer = [UInt8](repeating: 0, count: Int(min(Int64(Self.bufferSize), length - copied)))
        while copied < length {
            if isCancelled() { throw .cancelled }
            let want = Int(min(Int64(buffer.count), length - copied))
            let count: Int
            do {
                count = try buffer.withUnsafeMutableBytes { raw in
                    try source.read(fromAbsoluteOffset: copied, into: UnsafeMutableRawBufferPointer(rebasing: raw[0..<want]))
                }
            } catch {
                throw .io(reading: true, errno: (error as? Errno)?.rawValue ?? EIO)
            }
            if count == 0 { throw .sourceShort(expected: length, actual: copied) }
            if let failure = buffer.withUnsafeBytes({ raw in
                Self.writeAll(UnsafeRawBufferPointer(rebasing: raw[0..<count]), to: output, at: outputOffset + copied)
            }) {
                throw .io(reading: false, errno: failure)
            }
            copied += Int64(count)
            progress(copied)
        }
    }

    #if os(Linux)
    /// Copies with `copy_file_range(2)` until `length` bytes are in place or the kernel refuses.
    /// - Returns: the bytes copied; fewer than `length` when the read/write loop must finish the copy.
    private static func copyInKernel(
        from source: FileDescriptor, length: Int64, to output: FileDescriptor, at outputOffset: Int64,
        chunk: Int, isCancelled: () -> Bool, progress: (Int64) -> Void
    ) throws(CopyError) -> Int64 {
        var copied: Int64 = 0
        var inOffset: Int64 = 0
        var outOffset = outputOffset
        while copied < length {
            if isCancelled() { throw .cancelled }
            let count = cferry_copy_file_range(
                source.rawValue, &inOffset, output.rawValue, &outOffset, Int(min(length - copied, Int64(chunk))))
            if count > 0 {
                copied += Int64(count)
                progress(copied)
            } else if count == 0 {
                // Some filesystems (FUSE, older overlayfs) answer 0 instead of an error; the
                // read/write loop tells a truly shorter file from that.
                return copied
            } else {
                switch errno {
                case EINTR, EAGAIN:
                    continue
                case EXDEV, ENOSYS, EOPNOTSUPP, EINVAL, ETXTBSY, EBADF, EPERM:
                    return copied  // not supported here: finish with read/write
                case let code:
                    // copy_file_range does not say which side failed; ENOSPC, EDQUOT and EFBIG are the
                    // output's, anything else is blamed on the source.
                    let writing = code == ENOSPC || code == EDQUOT || code == EFBIG
                    throw .io(reading: !writing, errno: code)
                }
            }
        }
        return copied
    }
    #endif

    /// Reserves `length` bytes for `output` from offset 0 (`fallocate(2)` on Linux), so that a full
    /// disk shows before the first byte is written rather than half-way through.
    /// - Returns: `nil`, or the `errno` when the disk or quota is full (`ENOSPC`, `EDQUOT`, `EFBIG`);
    ///   a filesystem or system that cannot reserve space is not an error.
    public static func reserve(_ length: Int64, for output: FileDescriptor) -> Int32? {
        #if os(Linux)
        if length > 0, cferry_fallocate(output.rawValue, length) != 0 {
            let code = errno
            if code == ENOSPC || code == EDQUOT || code == EFBIG { return code }
        }
        #endif
        return nil
    }

    /// Writes all of `raw` at `offset`, retrying short writes and `EINTR`.
    /// - Returns: `nil`, or the `errno` of the failed write.
    public static func writeAll(_ raw: UnsafeRawBufferPointer, to output: FileDescriptor, at offset: Int64) -> Int32? {
        var done = 0
        while done < raw.count {
            do {
                done += try output.write(
                    toAbsoluteOffset: offset + Int64(done), UnsafeRawBufferPointer(rebasing: raw[done...]))
            } catch {
                return (error as? Errno)?.rawValue ?? EIO
            }
        }
        return nil
    }

    /// Writes every byte of `bytes` at `offset`.
    /// - Returns: `nil`, or the `errno` of the failed write.
    public static func writeAll(_ bytes: [UInt8], to output: FileDescriptor, at offset: Int64) -> Int32? {
        bytes.withUnsafeBytes { writeAll($0, to: output, at: offset) }
    }
}

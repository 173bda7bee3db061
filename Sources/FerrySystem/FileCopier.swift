import CFerrySystem
import SystemPackage

#if canImport(Glibc)
import Glibc
#endif

/// Why a copy stopped.
public enum CopyError: Error, Sendable, Equatable {
    /// The source ended after `actual` of the `expected` bytes: it was truncated while being copied.
    case sourceShort(expected: Int64, actual: Int64)
    /// The caller asked to stop (shutdown).
    case cancelled
    /// Reading the source (`reading == true`) or writing the output failed with `errno`.
    case io(reading: Bool, errno: Int32)
}

/// How file bytes are copied from one file into another.
public enum FileCopier: Sendable {
    /// `copy_file_range(2)` (in-kernel, reflink where the filesystem can), falling back to
    /// `pread`/`pwrite` when the kernel or filesystem refuses it.
    case automatic
    /// `pread`/`pwrite` through a 1 MiB buffer only.
    case readWrite

    static let bufferSize = 1 << 20

    /// Copies the first `length` bytes of `source` to `output` at offset `outputOffset`, checking
    /// `isCancelled` between chunks (`kernelChunk` in the kernel, 1 MiB otherwise) and telling
    /// `progress` how many bytes are in place after each.
    public func copy(
        from source: FileDescriptor, length: Int64, to output: FileDescriptor, at outputOffset: Int64,
        kernelChunk: Int = 64 << 20, isCancelled: () -> Bool = { false }, progress: (Int64) -> Void = { _ in }
    ) throws(CopyError) {
        var copied: Int64 = 0
        if self == .automatic {
            var inOffset: Int64 = 0
            var outOffset = outputOffset
            kernel: while copied < length {
                if isCancelled() { throw .cancelled }
                let chunk = Int(min(length - copied, Int64(kernelChunk)))
                let count = cferry_copy_file_range(source.rawValue, &inOffset, output.rawValue, &outOffset, chunk)
                if count > 0 {
                    copied += Int64(count)
                    progress(copied)
                } else if count == 0 {
                    // Some filesystems (FUSE, older overlayfs) answer 0 instead of an error; the
                    // read/write loop below tells a truly shorter file from that.
                    break kernel
                } else {
                    switch errno {
                    case EINTR, EAGAIN:
                        continue
                    case EXDEV, ENOSYS, EOPNOTSUPP, EINVAL, ETXTBSY, EBADF, EPERM:
                        break kernel  // not supported here: finish with read/write
                    case let code:
                        // copy_file_range does not say which side failed; ENOSPC and EDQUOT are the
                        // output's, anything else is blamed on the source.
                        throw .io(reading: !(code == ENOSPC || code == EDQUOT || code == EFBIG), errno: code)
                    }
                }
            }
        }
        guard copied < length else { return }
        var buffer = [UInt8](repeating: 0, count: Self.bufferSize)
        while copied < length {
            if isCancelled() { throw .cancelled }
            let want = Int(min(Int64(buffer.count), length - copied))
            let count = buffer.withUnsafeMutableBytes { raw in
                pread(source.rawValue, raw.baseAddress, want, off_t(copied))
            }
            if count < 0 {
                if errno == EINTR { continue }
                throw .io(reading: true, errno: errno)
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

    /// Writes every byte of `bytes` at `offset`, retrying short writes and `EINTR`.
    /// Writes all of `raw` at `offset`, retrying short writes and `EINTR`.
    /// - Returns: `nil`, or the `errno` of the failed write.
    public static func writeAll(_ raw: UnsafeRawBufferPointer, to output: FileDescriptor, at offset: Int64) -> Int32? {
        var done = 0
        while done < raw.count {
            let count = pwrite(output.rawValue, raw.baseAddress! + done, raw.count - done, off_t(offset + Int64(done)))
            if count < 0 {
                if errno == EINTR { continue }
                return errno
            }
            done += count
        }
        return nil
    }

    /// Writes every byte of `bytes` at `offset`.
    /// - Returns: `nil`, or the `errno` of the failed write.
    public static func writeAll(_ bytes: [UInt8], to output: FileDescriptor, at offset: Int64) -> Int32? {
        bytes.withUnsafeBytes { writeAll($0, to: output, at: offset) }
    }
}

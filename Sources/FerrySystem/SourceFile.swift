import Crypto
import SystemPackage

#if canImport(Glibc)
import Glibc
#endif

/// A spool file opened for upload (without following symlinks) and the version it was when opened.
/// Every sender reads it through this one type: its ranges by `pread` or through ``procPath``, its
/// digests, and whether it is still the version that was checked.
public struct SourceFile: Sendable {
    public let descriptor: FileDescriptor
    /// The file as it was when opened and checked against its job.
    public let status: FileStatus
    /// The whole file, read when it was opened (small files, for senders that send from memory):
    /// the bytes of the version in `status`, checked after the read. `nil`: read it when needed.
    public var prefetched: [UInt8]?
    /// The file's field sidecar (`<name>.fields.toml`), as read when the file was opened, where the
    /// spool reads them; `nil` if it has none.
    public var fieldSidecar: [UInt8]?

    public init(descriptor: FileDescriptor, status: FileStatus, prefetched: [UInt8]? = nil) {
        self.descriptor = descriptor
        self.status = status
        self.prefetched = prefetched
    }

    /// A path that opens this very file (through the descriptor, so no symlink is involved), for
    /// reading it with the transport's own file I/O.
    public var procPath: String { "/proc/self/fd/\(descriptor.rawValue)" }

    /// What `fstat(2)` says of the file now.
    public func currentStatus() throws(SystemError) -> FileStatus {
        var st = stat()
        guard fstat(descriptor.rawValue, &st) == 0 else { throw SystemError.current("stat", "(source)") }
        return FileStatus(st)
    }

    /// Whether the file is still the version it was when opened.
    public var isUnchanged: Bool { (try? currentStatus())?.isSameVersion(as: status) ?? false }

    public func close() { try? descriptor.close() }

    /// The bytes of `range` (the whole file by default), read with `pread`; `changed` if the file
    /// ends before the range does. For small ranges: the bytes are all in memory. Blocking.
    public func bytes(of range: Range<Int64>? = nil) throws(SourceReadError) -> [UInt8] {
        let range = range ?? 0..<status.size
        let length = Int(range.upperBound - range.lowerBound)
        var failure: SourceReadError?
        let bytes = [UInt8](unsafeUninitializedCapacity: length) { buffer, initialized in
            while initialized < length {
                let count = pread(descriptor.rawValue, buffer.baseAddress! + initialized, length - initialized, off_t(range.lowerBound) + off_t(initialized))
                if count < 0 {
                    if errno == EINTR { continue }
                    failure = .io(SystemError.current("read", "(source)"))
                    return
                }
                if count == 0 {
                    failure = .changed
                    return
                }
                initialized += count
            }
        }
        if let failure { throw failure }
        return bytes
    }

    /// The digest of `range` of the file (the whole file by default), read in 1 MiB pieces.
    /// Blocking: call it off the concurrency pool.
    public func digest<Hash: HashFunction>(
        _ hash: Hash.Type, of range: Range<Int64>? = nil, isCancelled: () -> Bool = { false }
    ) throws(SourceReadError) -> Hash.Digest {
        var hasher = Hash()
        try read(range, isCancelled: isCancelled) { hasher.update(bufferPointer: $0) }
        return hasher.finalize()
    }

    /// Reads `range` of the file (the whole file by default) in pieces of at most ``readPieceSize``,
    /// handing each to `body` in order. Blocking: call it off the concurrency pool.
    /// The most ``read(_:isCancelled:_:)`` holds in memory at once: 256 KiB, as many pieces of a
    /// 16 MiB S3 part as a 1 MiB buffer would be four times the resident memory of each read
    /// running beside an upload (measured: the same checksum and digest speed).
    public static let readPieceSize = 256 * 1024

    public func read(
        _ range: Range<Int64>? = nil, isCancelled: () -> Bool = { false }, _ body: (UnsafeRawBufferPointer) -> Void
    ) throws(SourceReadError) {
        let range = range ?? 0..<status.size
        // No more than the range: a small file's checksum touches no more memory than the file
        // (four uploads of 16 KiB files each zeroing 1 MiB showed in peak RSS).
        var buffer = [UInt8](repeating: 0, count: Int(max(1, min(Int64(Self.readPieceSize), range.upperBound - range.lowerBound))))
        var offset = range.lowerBound
        while offset < range.upperBound {
            if isCancelled() { throw .cancelled }
            let want = Int(min(Int64(buffer.count), range.upperBound - offset))
            let count = buffer.withUnsafeMutableBytes { pread(descriptor.rawValue, $0.baseAddress, want, off_t(offset)) }
            if count < 0 {
                if errno == EINTR { continue }
                throw .io(SystemError.current("read", "(source)"))
            }
            if count == 0 { throw .changed }
            buffer.withUnsafeBytes { body(UnsafeRawBufferPointer(rebasing: $0[0..<count])) }
            offset += Int64(count)
        }
    }
}

/// Why a source file could not be read to the end.
public enum SourceReadError: Error, Sendable, CustomStringConvertible {
    case cancelled
    /// The file ended early: it is no longer the version being read.
    case changed
    case io(SystemError)

    public var description: String {
        switch self {
        case .cancelled: "cancelled"
        case .changed: "the file changed while it was being read"
        case .io(let error): "\(error)"
        }
    }
}

extension Digest {
    /// Lowercase hexadecimal.
    public var hex: String {
        var text = ""
        for byte in self { text += byte < 16 ? "0" + String(byte, radix: 16) : String(byte, radix: 16) }
        return text
    }

}

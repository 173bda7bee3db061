import CFerrySystem

#if canImport(Glibc)
import Glibc
#endif

/// journald's native socket, shared by every logger: one close-on-exec datagram socket, each
/// record sent to the socket's address as libsystemd does (so a restarted journald is found
/// again). Sending is one system call, safe from any thread.
///
/// A record larger than a datagram may be (EMSGSIZE, ENOBUFS) goes in a sealed memfd whose
/// descriptor is sent instead, as the protocol provides.
public final class JournalSocket: Sendable {
    /// Where journald listens: `/run/systemd/journal/socket`.
    public static let defaultPath = "/run/systemd/journal/socket"

    /// The send buffer asked for (the kernel caps it at `net.core.wmem_max`); libsystemd asks for
    /// the same, so most records go in one datagram.
    static let sendBufferSize: Int32 = 8 * 1024 * 1024

    public let path: String
    private let descriptor: Int32
    private let address: [UInt8]

    /// A socket that sends to `path`. Nothing is sent yet, so this succeeds whether journald
    /// listens or not.
    public init(path: String) throws(JournalError) {
        let bytes = Array(path.utf8) + [0]
        guard bytes.count <= MemoryLayout.size(ofValue: sockaddr_un().sun_path) else { throw .pathTooLong(path) }
        var storage = sockaddr_un()
        storage.sun_family = sa_family_t(AF_UNIX)
        withUnsafeMutableBytes(of: &storage.sun_path) { $0.copyBytes(from: bytes) }
        let length = MemoryLayout<sa_family_t>.size + bytes.count
        address = withUnsafeBytes(of: &storage) { Array($0.prefix(length)) }
        descriptor = cferry_unix_datagram_socket()
        guard descriptor >= 0 else { throw .socket(errno) }
        var size = Self.sendBufferSize
        _ = setsockopt(descriptor, SOL_SOCKET, SO_SNDBUF, &size, socklen_t(MemoryLayout<Int32>.size))
        self.path = path
    }

    deinit { close(descriptor) }

    /// Sends one datagram of the native protocol (``JournalEntry/encoded()``).
    public func send(_ datagram: [UInt8]) throws(JournalError) {
        let code = address.withUnsafeBytes { name -> Int32 in
            datagram.withUnsafeBytes { bytes in
                while true {
                    let sent = sendto(descriptor, bytes.baseAddress, bytes.count, Int32(MSG_NOSIGNAL),
                                      name.baseAddress!.assumingMemoryBound(to: sockaddr.self), socklen_t(name.count))
                    if sent >= 0 { return 0 }
                    if errno != EINTR { return errno }
                }
            }
        }
        switch code {
        case 0: return
        case EMSGSIZE, ENOBUFS: try sendInMemfd(datagram)
        default: throw .send(path: path, errno: code)
        }
    }

    /// Puts `datagram` in a sealed memfd and sends its descriptor in an empty datagram.
    private func sendInMemfd(_ datagram: [UInt8]) throws(JournalError) {
        let file = datagram.withUnsafeBytes { cferry_sealed_memfd("journal-entry", $0.baseAddress, $0.count) }
        guard file >= 0 else { throw .memfd(errno) }
        defer { close(file) }
        let result = address.withUnsafeBytes { name in
            cferry_send_descriptor(descriptor, name.baseAddress, socklen_t(name.count), file)
        }
        if result < 0 { throw .send(path: path, errno: errno) }
    }
}

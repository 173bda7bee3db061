#if canImport(Glibc)
import Glibc
#endif

/// Why a record could not be handed to journald. ``JournalLogHandler`` then writes it to stderr as
/// logfmt, so it is not lost.
public enum JournalError: Error, Sendable, Equatable, CustomStringConvertible {
    /// The socket path does not fit in a Unix socket address (108 bytes).
    case pathTooLong(String)
    /// A datagram socket could not be made (`errno`).
    case socket(Int32)
    /// journald's socket refused the record (`errno`): journald is not running or not listening there.
    case send(path: String, errno: Int32)
    /// A record too large for one datagram could not be put in a sealed memfd (`errno`).
    case memfd(Int32)

    public var description: String {
        switch self {
        case .pathTooLong(let path):
            "journal socket path too long for a Unix socket address: \(path)"
        case .socket(let code):
            "cannot make a datagram socket for the journal: \(Self.text(code))"
        case .send(let path, let code):
            "cannot send to the journal at \(path): \(Self.text(code)) (is systemd-journald running?)"
        case .memfd(let code):
            "cannot put a large journal record in a sealed memfd: \(Self.text(code))"
        }
    }

    private static func text(_ code: Int32) -> String { String(cString: strerror(code)) }
}

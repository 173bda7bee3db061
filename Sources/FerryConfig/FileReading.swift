#if canImport(Glibc)
import Glibc
#endif

/// The whole contents of the file at `path`, or `nil` with `errno` set.
func readWholeFile(_ path: String, limit: Int = 16 << 20) -> [UInt8]? {
    let fd = open(path, O_RDONLY | O_CLOEXEC)
    guard fd >= 0 else { return nil }
    defer { close(fd) }
    var bytes: [UInt8] = []
    var buffer = [UInt8](repeating: 0, count: 64 * 1024)
    while true {
        let count = buffer.withUnsafeMutableBytes { read(fd, $0.baseAddress, $0.count) }
        if count < 0 {
            if errno == EINTR { continue }
            return nil
        }
        if count == 0 { return bytes }
        bytes += buffer[0..<count]
        if bytes.count > limit {
            errno = EFBIG
            return nil
        }
    }
}

/// The message for the current `errno`.
func lastErrorMessage() -> String { String(cString: strerror(errno)) }

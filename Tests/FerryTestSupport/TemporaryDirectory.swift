import Foundation

#if canImport(Glibc)
import Glibc
#endif

/// A fresh directory under `$TMPDIR` (or /tmp), removed with everything in it when released.
public final class TemporaryDirectory: @unchecked Sendable {
    public let path: String

    public init(_ prefix: String = "ferry-test") throws {
        let base = ProcessInfo.processInfo.environment["TMPDIR"] ?? "/tmp"
        var template = Array("\(base)/\(prefix).XXXXXX".utf8CString)
        guard let made = mkdtemp(&template) else {
            throw TestFailure("mkdtemp failed: \(String(cString: strerror(errno)))")
        }
        path = String(cString: made)
    }

    deinit { try? FileManager.default.removeItem(atPath: path) }

    /// `path/relative`.
    public func url(_ relative: String) -> String { path + "/" + relative }

    /// Creates `relative` (and parents) and returns its path.
    @discardableResult
    public func makeDirectory(_ relative: String) throws -> String {
        let full = url(relative)
        try FileManager.default.createDirectory(atPath: full, withIntermediateDirectories: true)
        return full
    }
}

/// A failure raised by test support code, with a message saying what did not happen.
public struct TestFailure: Error, CustomStringConvertible {
    public var description: String
    public init(_ description: String) { self.description = description }
}

/// Waits until `condition` holds, checking every 20 ms, or throws after `timeout`.
/// This is the only way tests wait: for a condition, with a deadline — never a fixed sleep.
public func waitUntil(
    _ what: @autoclosure () -> String, timeout: Duration = .seconds(30),
    _ condition: () async throws -> Bool
) async throws {
    let deadline = ContinuousClock.now + timeout
    while true {
        if try await condition() { return }
        if ContinuousClock.now >= deadline {
            throw TestFailure("timed out after \(timeout) waiting for: \(what())")
        }
        try await Task.sleep(for: .milliseconds(20))
    }
}

/// Writes `bytes` to `path` under a dot-name first, then renames it into place, as the producer
/// contract says.
public func dropFile(_ bytes: [UInt8], at path: String) throws {
    let directory = (path as NSString).deletingLastPathComponent
    let temporary = directory + "/.incoming-\(UUID().uuidString)"
    try Data(bytes).write(to: URL(fileURLWithPath: temporary))
    guard rename(temporary, path) == 0 else {
        throw TestFailure("rename into \(path) failed: \(String(cString: strerror(errno)))")
    }
}

/// Writes `bytes` over the file at `path` from its start, as a producer rewriting it in place
/// would: the same inode, a new modification time; `truncating` first empties it (otherwise a
/// longer old version keeps its tail).
public func rewriteInPlace(_ path: String, with bytes: [UInt8], truncating: Bool = false) throws {
    let descriptor = open(path, O_WRONLY | O_CLOEXEC | (truncating ? O_TRUNC : 0))
    guard descriptor >= 0 else { throw TestFailure("cannot open \(path) to rewrite it: \(String(cString: strerror(errno)))") }
    defer { close(descriptor) }
    let written = bytes.withUnsafeBytes { pwrite(descriptor, $0.baseAddress, $0.count, 0) }
    guard written == bytes.count else { throw TestFailure("rewrote \(written) of \(bytes.count) bytes of \(path)") }
}

/// `count` bytes from a seeded generator, so a failure can be reproduced.
public func pseudoRandomBytes(_ count: Int, seed: UInt64) -> [UInt8] {
    var state = seed &+ 0x9E37_79B9_7F4A_7C15
    var bytes = [UInt8](repeating: 0, count: count)
    var index = 0
    while index < count {
        state = state &* 6364136223846793005 &+ 1442695040888963407
        var word = state ^ (state >> 29)
        for _ in 0..<8 where index < count {
            bytes[index] = UInt8(truncatingIfNeeded: word)
            word >>= 8
            index += 1
        }
    }
    return bytes
}

/// Whether anything (even a dangling symlink) exists at `path`.
public func fileExists(_ path: String) -> Bool {
    var st = stat()
    return lstat(path, &st) == 0
}

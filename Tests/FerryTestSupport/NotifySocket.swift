import Foundation
import Synchronization

#if canImport(Glibc)
import Glibc
#endif

/// A datagram socket playing systemd's side of sd_notify: pass ``path`` as `NOTIFY_SOCKET` and read
/// what the daemon reports. Every message is kept with the time it arrived.
public final class NotifySocket: @unchecked Sendable {
    /// One datagram: its `KEY=value` assignments, in order.
    public struct Message: Sendable, CustomStringConvertible {
        public let arrived: ContinuousClock.Instant
        public let assignments: [(key: String, value: String)]
        /// What `snapshot` returned when the message arrived (e.g. the daemon's log at that moment).
        public let snapshot: String?

        public subscript(key: String) -> String? { assignments.last { $0.key == key }?.value }
        public var description: String { assignments.map { "\($0.key)=\($0.value)" }.joined(separator: "\\n") }
    }

    /// What the reader thread and the test share.
    private final class Shared: Sendable {
        let received = Mutex<[Message]>([])
        let stopped = Atomic<Bool>(false)
    }

    public let path: String
    private let shared = Shared()

    /// - Parameter snapshot: called by the reader as each message arrives; its result is kept with the message.
    public init(path: String, snapshot: (@Sendable () -> String)? = nil) throws {
        self.path = path
        let descriptor = socket(AF_UNIX, Int32(SOCK_DGRAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        guard descriptor >= 0 else { throw TestFailure("socket: \(String(cString: strerror(errno)))") }
        var address = sockaddr_un()
        address.sun_family = sa_family_t(AF_UNIX)
        let bytes = Array(path.utf8) + [0]
        guard bytes.count <= MemoryLayout.size(ofValue: address.sun_path) else { throw TestFailure("socket path too long: \(path)") }
        withUnsafeMutableBytes(of: &address.sun_path) { $0.copyBytes(from: bytes) }
        let bound = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { Glibc.bind(descriptor, $0, socklen_t(MemoryLayout<sockaddr_un>.size)) }
        }
        guard bound == 0 else {
            let message = String(cString: strerror(errno))
            Glibc.close(descriptor)
            throw TestFailure("bind \(path): \(message)")
        }
        // The reader wakes up every 100 ms to notice close().
        var timeout = timeval(tv_sec: 0, tv_usec: 100_000)
        setsockopt(descriptor, SOL_SOCKET, SO_RCVTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
        let shared = shared
        let reader = Thread {
            var buffer = [UInt8](repeating: 0, count: 65536)
            while !shared.stopped.load(ordering: .relaxed) {
                let count = buffer.withUnsafeMutableBytes { recv(descriptor, $0.baseAddress, $0.count, 0) }
                guard count > 0 else { continue }
                let text = String(decoding: buffer[..<count], as: UTF8.self)
                let assignments = text.split(separator: "\n").map { line -> (key: String, value: String) in
                    let parts = line.split(separator: "=", maxSplits: 1, omittingEmptySubsequences: false)
                    return (String(parts[0]), parts.count > 1 ? String(parts[1]) : "")
                }
                let message = Message(arrived: .now, assignments: assignments, snapshot: snapshot?())
                shared.received.withLock { $0.append(message) }
            }
            Glibc.close(descriptor)
        }
        reader.start()
    }

    deinit { close() }

    /// Stops reading (the reader closes the socket within one receive timeout) and removes the path.
    public func close() {
        guard !shared.stopped.exchange(true, ordering: .relaxed) else { return }
        unlink(path)
    }

    /// Every message so far.
    public var messages: [Message] { shared.received.withLock { $0 } }

    /// Waits for the first message at index `from` or later that satisfies `predicate`, and returns its index.
    @discardableResult
    public func waitFor(
        _ what: String, from: Int = 0, timeout: Duration = .seconds(30), _ predicate: @escaping (Message) -> Bool
    ) async throws -> Int {
        var found: Int?
        try await waitUntil("notify message: \(what); have:\n\(messages.map(\.description).joined(separator: "\n"))", timeout: timeout) {
            let all = messages
            found = all.indices.first { $0 >= from && predicate(all[$0]) }
            return found != nil
        }
        return found!
    }
}

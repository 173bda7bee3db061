import Synchronization

/// How many parts of an upload are confirmed, as the records arrive.
final class PartCount: Sendable {
    private let count: Mutex<Int>

    init(_ count: Int) { self.count = Mutex(count) }

    /// Adds `delta`; returns the new count.
    func add(_ delta: Int) -> Int { count.withLock { $0 += delta; return $0 } }

    func set(_ value: Int) { count.withLock { $0 = value } }
}

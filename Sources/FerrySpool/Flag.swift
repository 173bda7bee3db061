import Synchronization

/// A thread-safe boolean that one side sets and the other takes.
final class Flag: Sendable {
    private let value = Atomic<Bool>(false)
    func set() { value.store(true, ordering: .relaxed) }
    /// Whether it was set; clears it.
    func takeIfSet() -> Bool { value.exchange(false, ordering: .relaxed) }

    /// Whether the flag is set, leaving it so.
    var isSet: Bool { value.load(ordering: .relaxed) }
}

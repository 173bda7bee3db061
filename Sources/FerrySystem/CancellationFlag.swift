import Synchronization

/// Set when the task waiting for some blocking work is cancelled; the work checks it between
/// chunks (`SourceFile.read(_:isCancelled:_:)`).
public final class CancellationFlag: Sendable {
    private let state = Atomic<Bool>(false)
    public init() {}
    public func cancel() { state.store(true, ordering: .relaxed) }
    public var isCancelled: Bool { state.load(ordering: .relaxed) }
}

import Synchronization

/// Waiting for a task that several callers share (one `OPTIONS` for the uploads that start
/// together): a caller that is cancelled stops waiting at once and gets `ifCancelled`, without
/// cancelling the task, whose result the other callers still wait for.
public enum SharedTaskWait {
    /// `task`'s value, or `ifCancelled` as soon as the calling task is cancelled.
    public static func value<T: Sendable>(of task: Task<T, Never>, ifCancelled: T) async -> T {
        let waiter = Waiter<T>()
        return await withTaskCancellationHandler {
            await withCheckedContinuation { continuation in
                waiter.wait(continuation)
                Task { waiter.resume(await task.value) }
            }
        } onCancel: {
            waiter.resume(ifCancelled)
        }
    }

    /// One caller's wait: the first of the task's value and the cancellation resumes it.
    private final class Waiter<T: Sendable>: Sendable {
        private struct State {
            var continuation: CheckedContinuation<T, Never>?
            /// A value that came before the continuation (a caller cancelled before it waited).
            var early: T?
            var resumed = false
        }
        private let state = Mutex(State())

        func wait(_ continuation: CheckedContinuation<T, Never>) {
            let early = state.withLock { state -> T? in
                guard let early = state.early else {
                    state.continuation = continuation
                    return nil
                }
                state.early = nil
                return early
            }
            if let early { continuation.resume(returning: early) }
        }

        func resume(_ value: T) {
            let continuation = state.withLock { state -> CheckedContinuation<T, Never>? in
                guard !state.resumed else { return nil }
                state.resumed = true
                guard let continuation = state.continuation else {
                    state.early = value
                    return nil
                }
                state.continuation = nil
                return continuation
            }
            continuation?.resume(returning: value)
        }
    }
}

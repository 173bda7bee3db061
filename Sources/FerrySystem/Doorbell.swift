import Synchronization

/// Wakes a waiting loop: ``ring()`` from anywhere; ``wait(until:)`` returns at the first ring since the
/// last wait, at the deadline, or on cancellation. Rings while nobody waits are remembered (once).
public final class Doorbell: Sendable {
    private struct State {
        var rung = false
        var waiter: CheckedContinuation<Void, Never>?
    }
    private let state = Mutex(State())

    public init() {}

    public func ring() {
        let waiter = state.withLock { state -> CheckedContinuation<Void, Never>? in
            if let waiter = state.waiter {
                state.waiter = nil
                return waiter
            }
            state.rung = true
            return nil
        }
        waiter?.resume()
    }

    /// Waits for a ring, until `deadline` at the latest (`nil`: no deadline).
    public func wait(until deadline: ContinuousClock.Instant?) async {
        let timer = deadline.map { deadline in
            Task { [weak self] in
                try? await EventLoopSleep.sleep(until: deadline)
                if !Task.isCancelled { self?.ring() }
            }
        }
        defer { timer?.cancel() }
        await withTaskCancellationHandler {
            await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
                let resumeNow = state.withLock { state -> Bool in
                    if state.rung {
                        state.rung = false
                        return true
                    }
                    state.waiter = continuation
                    return false
                }
                if resumeNow { continuation.resume() }
            }
        } onCancel: {
            ring()
        }
    }
}

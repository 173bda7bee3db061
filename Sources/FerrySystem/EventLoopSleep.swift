import NIOCore
import NIOPosix
import Synchronization

/// `Task.sleep` on a timer of NIO's event loops (`MultiThreadedEventLoopGroup.singleton`).
///
/// The daemon sleeps through this instead of `Task.sleep`: in Swift 6.3 on Linux, `Task.sleep`
/// hands the wake-up to a libdispatch global queue even where the global executor is replaced,
/// and the first job a global queue runs starts libdispatch's pool monitor, a timer that wakes the
/// process every second from then on (`_dispatch_workq_monitor_pools`). An event loop's timer
/// wakes its thread only when it expires.
public enum EventLoopSleep {
    /// Sleeps for `duration`, or throws `CancellationError` as soon as the task is cancelled.
    public static func sleep(for duration: Duration) async throws {
        try await sleep(TimeAmount(duration))
    }

    /// Sleeps until `deadline`, or throws `CancellationError` as soon as the task is cancelled.
    public static func sleep(until deadline: ContinuousClock.Instant) async throws {
        try await sleep(for: ContinuousClock.now.duration(to: deadline))
    }

    private static func sleep(_ amount: TimeAmount) async throws {
        try Task.checkCancellation()
        let timer = Mutex(Timer.pending)
        try await withTaskCancellationHandler {
            try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<Void, any Error>) in
                let loop = MultiThreadedEventLoopGroup.singleton.any()
                let scheduled = loop.scheduleTask(in: amount) {}
                scheduled.futureResult.whenComplete { result in
                    switch result {
                    case .success: continuation.resume()
                    case .failure: continuation.resume(throwing: CancellationError())
                    }
                }
                let cancelled = timer.withLock { state -> Bool in
                    if case .cancelled = state { return true }
                    state = .scheduled(scheduled)
                    return false
                }
                if cancelled { scheduled.cancel() }
            }
        } onCancel: {
            let scheduled = timer.withLock { state -> Scheduled<Void>? in
                defer { state = .cancelled }
                if case .scheduled(let scheduled) = state { return scheduled }
                return nil
            }
            scheduled?.cancel()
        }
    }

    private enum Timer {
        case pending
        case scheduled(Scheduled<Void>)
        case cancelled
    }
}

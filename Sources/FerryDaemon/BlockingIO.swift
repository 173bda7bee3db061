import FerrySystem
import NIOPosix

/// A small pool of threads for long blocking file work (copying a file into its body, hashing it),
/// so it never occupies the Swift concurrency pool that the scheduler, the watchers and the
/// transport share. Work sees a ``CancellationFlag`` that turns true when the awaiting task is
/// cancelled, and checks it between chunks.
final class BlockingIO: Sendable {
    private let pool: NIOThreadPool

    init(threads: Int) {
        pool = NIOThreadPool(numberOfThreads: max(1, threads))
        pool.start()
    }

    func run<T: Sendable>(_ work: @escaping @Sendable (CancellationFlag) throws -> T) async throws -> T {
        let flag = CancellationFlag()
        return try await withTaskCancellationHandler {
            try await pool.runIfActive { try work(flag) }
        } onCancel: {
            flag.cancel()
        }
    }

    /// Runs `work` even if the awaiting task is cancelled before it starts: for what must follow a
    /// recorded fate (a cancelled job's file is still moved aside). The pool thread resumes the
    /// caller itself (the future-returning `runIfActive(eventLoop:)` went through an event loop: one
    /// more thread woken for every file disposed of). Throws only if the pool has shut down.
    func runToCompletion<T: Sendable>(_ work: @escaping @Sendable () throws -> T) async throws -> T {
        try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<T, Error>) in
            pool.submit { state in
                switch state {
                case .active: continuation.resume(with: Result(catching: work))
                case .cancelled: continuation.resume(throwing: NIOThreadPoolError.ThreadPoolInactive())
                }
            }
        }
    }

    func shutdown() async {
        try? await pool.shutdownGracefully()
    }
}

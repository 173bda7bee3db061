import FerrySystem
import Logging

/// A queue write that must not be lost to a passing problem (a full disk, an I/O error): tried
/// again after 0.5 s, doubling up to 30 s, until it succeeds; given up when `givesUp` says so (by
/// default, when the task is cancelled: the daemon is stopping; what it recorded is recovered at the
/// next start).
enum RetriedWrite {
    /// `failed` is told of each failure before the wait that follows it.
    static func run<T>(
        logging failure: String, to logger: Logger, givesUp: () -> Bool = { Task.isCancelled },
        failed: (any Error) -> Void = { _ in }, _ write: () async throws -> T
    ) async throws -> T {
        var delay = Duration.milliseconds(500)
        while true {
            do {
                return try await write()
            } catch {
                if givesUp() { throw error }
                failed(error)
                logger.error("\(failure)", metadata: ["error": "\(error)", "retry_in_ms": "\(delay / .milliseconds(1))"])
                // In slices of a second, so that giving up does not wait for the longest delay.
                let resume = ContinuousClock.now + delay
                while ContinuousClock.now < resume {
                    try await EventLoopSleep.sleep(for: min(.seconds(1), resume - ContinuousClock.now))
                    if givesUp() { throw error }
                }
                delay = min(delay * 2, .seconds(30))
            }
        }
    }
}

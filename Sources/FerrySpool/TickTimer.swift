import FerrySystem
import Synchronization

/// When a watcher's loop must next look at its spool, and the sleeper that wakes it then: while a
/// file is settling, every ``SpoolWatcher/tickInterval``; otherwise at the next rescan. An idle spool
/// makes no wake-up before its next rescan (it used to tick four times a second, for nothing).
final class TickTimer: Sendable {
    private let due: Mutex<ContinuousClock.Instant>
    private let bell = Doorbell()

    init(firstAt due: ContinuousClock.Instant) { self.due = Mutex(due) }

    /// The loop's next look is due at `instant` (replacing the previous plan); wakes the sleeper if
    /// that is sooner than it was sleeping for.
    func schedule(at instant: ContinuousClock.Instant) {
        let sooner = due.withLock { due -> Bool in
            defer { due = instant }
            return instant < due
        }
        if sooner { bell.ring() }
    }

    /// Calls `tick` whenever the plan falls due, until the task is cancelled. After a tick the
    /// timer waits for the loop's next ``schedule(at:)``.
    func run(tick: @Sendable () -> Void) async {
        while !Task.isCancelled {
            let next = due.withLock { $0 }
            if ContinuousClock.now >= next {
                due.withLock { due in if due == next { due = .now + .seconds(24 * 3600) } }
                tick()
                continue
            }
            await bell.wait(until: next)
        }
    }
}

import FerrySystem
import Synchronization

/// When a watcher's loop must next look at its spool, and the sleeper that wakes it then: while a
/// file is settling, every ``SpoolWatcher/tickInterval``; otherwise at the next rescan. An idle spool
/// makes no wake-up before its next rescan (it used to tick four times a second, for nothing).
final class TickTimer: Sendable {
    private let due: Mutex<ContinuousClock.Instant>
    private let bell = Doorbell()

    init(firstAt due: ContinuousClock.Instant) { self.due = Mutex(due) }

    /// The loop must look again at `instant` at the latest; wakes the sleeper if that is sooner than
    /// it was sleeping for. A plan is never pushed back: under a steady stream of events, each asking
    /// for a look 250 ms on, the look would otherwise never come, and files found settling would wait
    /// for the stream to pause. (A look that turns out early costs one pass over the settling files.)
    func schedule(at instant: ContinuousClock.Instant) {
        let sooner = due.withLock { due -> Bool in
            guard instant < due else { return false }
            due = instant
            return true
        }
        if sooner { bell.ring() }
    }

    /// Calls `tick` whenever the plan falls due, until the task is cancelled. After a tick the
    /// timer waits for the loop's next ``schedule(at:)`` (the loop schedules after every input).
    /// `tick` returns whether the loop will get it: a tick that found the loop's input buffer full
    /// is tried again after `retry`, as the loop would otherwise wait for an input that never comes.
    func run(retry: Duration, tick: @Sendable () -> Bool) async {
        while !Task.isCancelled {
            let next = due.withLock { $0 }
            if ContinuousClock.now >= next {
                due.withLock { due in if due == next { due = .now + .seconds(24 * 3600) } }
                if !tick() { schedule(at: .now + retry) }
                continue
            }
            await bell.wait(until: next)
        }
    }
}

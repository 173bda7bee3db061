import FerrySystem
import Synchronization

/// One loop that watches the ``ProgressWatchdog`` of every request an ``Uploader`` has in flight,
/// instead of a task and a timer per request (those cost a task group, two child tasks and a timer
/// armed and cancelled on libdispatch's manager thread for every small file).
///
/// The loop runs only while a request is watched: it wakes at the earliest deadline, and at least
/// every 500 ms (or every `timeout`, if shorter) since progress pushes deadlines back. When a
/// watchdog's deadline passes, or its request is stuck on a spool file that changed under it, the
/// patrol marks it fired, stops watching it and calls its `onFire` (which cancels the request).
final class WatchdogPatrol: Sendable {
    private struct Watch {
        let watchdog: ProgressWatchdog
        let onFire: @Sendable () -> Void
    }

    private struct State {
        var watched: [Int: Watch] = [:]
        var nextID = 0
        var patrolling = false
    }

    private let state = Mutex(State())
    private let interval: Duration

    /// - Parameter timeout: the watchdogs' `no_progress_timeout`, so that none is checked late.
    init(timeout: Duration) {
        interval = min(.milliseconds(500), timeout)
    }

    /// Starts watching `watchdog`; returns the token for ``stopWatching(_:)``.
    func watch(_ watchdog: ProgressWatchdog, onFire: @escaping @Sendable () -> Void) -> Int {
        let (id, start) = state.withLock { state in
            let id = state.nextID
            state.nextID += 1
            state.watched[id] = Watch(watchdog: watchdog, onFire: onFire)
            defer { state.patrolling = true }
            return (id, !state.patrolling)
        }
        if start { Task.detached { await self.patrol() } }
        return id
    }

    /// Stops watching (the request ended); harmless if the watchdog already fired.
    func stopWatching(_ id: Int) {
        state.withLock { _ = $0.watched.removeValue(forKey: id) }
    }

    /// Whether the loop is running (for tests: it ends once nothing is watched).
    var isPatrolling: Bool { state.withLock { $0.patrolling } }

    private func patrol() async {
        while true {
            let now = ContinuousClock.now
            // Whether a source changed is a stat(2), which may block (NFS): asked outside the lock.
            let idle = state.withLock { state in state.watched.filter { $0.value.watchdog.mayAskSource(at: now) } }
            let stuck = Set(idle.filter { $0.value.watchdog.stuckOnChangedSource(at: now) }.keys)
            let (due, wake) = state.withLock { state -> ([Watch], ContinuousClock.Instant?) in
                var due: [Watch] = []
                var wake = now + interval
                for (id, watch) in state.watched {
                    let deadline = watch.watchdog.deadline
                    if now >= deadline || stuck.contains(id) {
                        due.append(watch)
                        state.watched[id] = nil
                    } else {
                        wake = min(wake, deadline)
                    }
                }
                if state.watched.isEmpty {
                    state.patrolling = false
                    return (due, nil)
                }
                return (due, wake)
            }
            for watch in due {
                watch.watchdog.fire()
                watch.onFire()
            }
            guard let wake else { return }
            try? await EventLoopSleep.sleep(until: wake)
        }
    }
}

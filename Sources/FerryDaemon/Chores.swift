import FerryConfig
import FerryControl
import FerryMultipart
import FerryQueue
import FerrySpool
import FerrySystem
import FerryTransport
import Foundation
import Logging
import NIOCore
import ServiceLifecycle
import Synchronization
import UnixSignals

/// Periodic work in its own task: finishing dispositions that failed before (a full disk, a
/// directory that was not writable) and pruning the event log.
final class Chores: Sendable {
    let store: JobStore
    let runtime: DaemonRuntime
    /// The jobs in flight, whose dispositions their pipelines apply.
    let activity: ActiveJobs
    let disposer: Disposer
    let bodies: BodyBuilder
    let logger: Logger

    /// How many job events `watch` can replay.
    static let eventsKept: Int64 = 100_000

    init(store: JobStore, runtime: DaemonRuntime, activity: ActiveJobs, disposer: Disposer, bodies: BodyBuilder, logger: Logger) {
        self.store = store
        self.runtime = runtime
        self.activity = activity
        self.disposer = disposer
        self.bodies = bodies
        self.logger = logger
    }

    /// Runs until cancelled, in its own task (never in the scheduler's loop, whose turns feed the
    /// watchdog): pending dispositions every minute, event pruning every hour.
    func run() async {
        var minutes = 0
        while !Task.isCancelled {
            try? await Task.sleep(for: .seconds(60))
            if Task.isCancelled { return }
            await finishPendingDispositions()
            if minutes % 60 == 0 { _ = try? await store.pruneEvents(keep: Self.eventsKept) }
            minutes += 1
        }
    }

    /// Applies the disposition of every final job whose file was not dealt with yet, except those a
    /// pipeline is still handling, a page at a time.
    func finishPendingDispositions() async {
        // Records of dispositions not yet committed would read as pending.
        try? await store.flush()
        var after: Int64 = 0
        while true {
            guard let jobs = try? await store.pendingDispositions(after: after, limit: 64), let last = jobs.last else { return }
            after = last.sequence ?? after
            for job in jobs where !activity.contains(job) {
                guard let spool = runtime.spool(named: job.spool) else { continue }
                if await disposer.dispose(job, spool: spool.configuration, files: spool.files) != nil {
                    bodies.remove(for: job)
                }
            }
        }
    }
}

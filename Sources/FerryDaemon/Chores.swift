import FerryConfig
import FerryControl
import FerryDelivery
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
/// directory that was not writable), pruning the event log, and forgetting finished jobs past
/// `job_retention`.
final class Chores: Sendable {
    let store: JobStore
    let runtime: DaemonRuntime
    /// The jobs in flight, whose dispositions their pipelines apply.
    let activity: ActiveJobs
    /// Applies pending dispositions, and queues a new version found in a file's place.
    let followUps: JobFollowUps
    let bodies: BodyBuilder
    let logger: Logger

    /// How many job events `watch` can replay.
    static let eventsKept: Int64 = 100_000

    /// Wakes the scheduler (jobs became due).
    let wakeScheduler: @Sendable () -> Void

    init(
        store: JobStore, runtime: DaemonRuntime, activity: ActiveJobs, followUps: JobFollowUps, bodies: BodyBuilder, logger: Logger,
        wakeScheduler: @escaping @Sendable () -> Void = {}
    ) {
        self.wakeScheduler = wakeScheduler
        self.store = store
        self.runtime = runtime
        self.activity = activity
        self.followUps = followUps
        self.bodies = bodies
        self.logger = logger
    }

    /// Runs until cancelled, in its own task (never in the scheduler's loop, whose turns feed the
    /// watchdog): a look for jobs a clock set back would strand, at the start and every minute;
    /// pending dispositions and event pruning (in batches) every minute; finished jobs past
    /// `job_retention` a minute after start, then every hour.
    func run() async {
        var clock = ClockJumpDetector()
        let origin = ContinuousClock.now
        var nextForgetting = origin
        await followClock(&clock, origin: origin)
        while !Task.isCancelled {
            try? await EventLoopSleep.sleep(for: .seconds(60))
            if Task.isCancelled { return }
            await followClock(&clock, origin: origin)
            await finishPendingDispositions()
            _ = try? await store.pruneEvents(keep: Self.eventsKept)
            if ContinuousClock.now >= nextForgetting {
                nextForgetting = ContinuousClock.now + Self.forgettingInterval
                await forgetFinishedJobs()
            }
        }
    }

    /// How often finished jobs past `job_retention` are looked for (the first time a minute after start).
    static let forgettingInterval = Duration.seconds(3600)

    /// Deletes the finished jobs `job_retention` is over for (``JobStore/forgetFinishedJobs(disposedBefore:plausible:batch:)``).
    func forgetFinishedJobs(now: Date = Date()) async {
        // A clock not set yet says nothing of how long ago anything was.
        guard now >= AttemptInput.earliestPlausibleTime else { return }
        let retention = runtime.configuration.jobRetention
        let cutoff = now.addingTimeInterval(-retention.seconds)
        do {
            try await store.restampUnknownDisposals(before: AttemptInput.earliestPlausibleTime, now: now)
            let forgotten = try await store.forgetFinishedJobs(disposedBefore: cutoff, plausible: AttemptInput.earliestPlausibleTime)
            if forgotten > 0 {
                logger.info("finished jobs forgotten", metadata: ["jobs": "\(forgotten)", "job_retention": "\(DurationParser.format(retention))"])
            }
        } catch {
            logger.warning("cannot forget finished jobs; will try again", metadata: ["error": "\(error)"])
        }
    }

    /// A wall clock stepped since the last look moves the pending jobs' times with it; then jobs
    /// due later than any delay Ferry sets are made due (a step made while ferryd was not running).
    func followClock(_ clock: inout ClockJumpDetector, origin: ContinuousClock.Instant) async {
        if let step = clock.look(wall: Date(), steady: ContinuousClock.now - origin) {
            let moved = (try? await store.shiftPending(by: step.amount, readAfter: step.readAfter, now: Date())) ?? 0
            let amount = step.amount > .zero ? step.amount : .zero - step.amount
            logger.warning("""
                the system clock was set \(step.amount > .zero ? "forward" : "back") by \(DurationParser.format(amount)); \
                the times of the jobs waiting moved with it
                """, metadata: ["jobs": "\(moved)"])
            if moved > 0 { wakeScheduler() }
        }
        await rescheduleAfterClockSetBack()
        // Ages stamped by a clock not yet set (at start after NTP set it while ferryd was stopped,
        // or a job held across the step): their max_age starts now.
        if let restarted = try? await store.restartUnknownAges(before: AttemptInput.earliestPlausibleTime, now: Date()), restarted > 0 {
            logger.notice("jobs queued while the system clock was not set have their max_age counted from now", metadata: ["jobs": "\(restarted)"])
        }
    }

    /// Jobs due later than any delay Ferry sets (the longest `Retry-After` it honours, or a spool's
    /// `max_delay`, and an hour) were scheduled while the clock was ahead: due now.
    func rescheduleAfterClockSetBack() async {
        let now = Date()
        for spool in runtime.configuration.spools {
            let horizon = max(AttemptDecider.retryAfterLimit, spool.retry.maxDelay) + .seconds(3600)
            guard let count = try? await store.rescheduleBeyond(horizon: horizon, spool: spool.name, now: now), count > 0 else { continue }
            logger.warning("jobs were due later than any delay Ferry sets: the clock was set back; they are due now", metadata: [
                "spool": "\(spool.name)", "jobs": "\(count)",
            ])
            wakeScheduler()
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
                // A new version in the old one's place is queued now, not at the next rescan.
                guard await followUps.run([.dispose, .requeueIfLeft], job: job, recorded: job, spool: spool, log: logger) != nil else { continue }
                bodies.remove(for: job)
            }
        }
    }
}

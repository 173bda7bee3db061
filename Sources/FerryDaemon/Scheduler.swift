import FerryConfig
import FerryControl
import FerryDelivery
import FerryQueue
import FerrySystem
import Foundation
import Logging
import Synchronization

/// Starts uploads: claims due jobs from the queue while fewer than `maxConcurrentUploads` are in
/// flight (and up to twice as many more, ``claimAhead(slots:)``, whose pipelines open their files and wait at the
/// ``UploadGate`` for a slot), and sleeps until a job becomes due, new files arrive, or a slot is
/// given back.
///
/// The queue is the only interface between the watchers and the scheduler: watchers insert rows
/// and ring the doorbell; the scheduler claims rows. Nothing is held in memory per queued job.
final class Scheduler: Sendable {
    let store: JobStore
    let pipeline: JobPipeline
    let doorbell = Doorbell()
    /// At most `maxConcurrentUploads` jobs send at once; the jobs claimed ahead wait here.
    let gate: UploadGate
    let logger: Logger
    /// Called once per loop turn; the daemon feeds systemd's watchdog here, so a loop that stops
    /// turning stops the pings. Keep it quick: slow work would delay the pings.
    let onTurn: @Sendable () async -> Void
    /// When the loop must turn next at the latest (the next watchdog ping), besides jobs falling due.
    let wakeBy: @Sendable () -> ContinuousClock.Instant?
    /// The configured spools (their windows, slots and priorities), as of now.
    let spools: @Sendable () -> [SpoolConfiguration]

    private struct State {
        /// Jobs claimed and not yet past their send: sending, or opening their file and waiting at the gate.
        var inFlight = 0
        /// Jobs past their send whose fate is being recorded and carried out (they hold no slot).
        var finishing = 0
        var stopping = false
        /// Why spools may not start uploads now (paused, outside their window), by spool; `"*"`: all.
        var held: [String: String] = [:]
        /// Spools whose jobs are not started; `"*"` means all.
        var paused: Set<String> = []
        var lastTurn = ContinuousClock.now
        /// Whether jobs are pending (queued, retrying, uploading) as of the last turn.
        var busy = false
        /// The newest event id before the current (or, when idle, the latest) busy period.
        var periodStart: Int64
        /// The newest event id seen while idle.
        var idleAt: Int64
        /// Uploads in flight by spool.
        var inFlightBySpool: [String: Int] = [:]
        /// Where spools of one priority start taking turns this time.
        var rotation = 0
    }
    private let state: Mutex<State>

    init(store: JobStore, pipeline: JobPipeline, maxConcurrentUploads: Int, paused: Set<String> = [], eventsBefore: Int64 = 0,
         logger: Logger, wakeBy: @escaping @Sendable () -> ContinuousClock.Instant? = { nil },
         onTurn: @escaping @Sendable () async -> Void = {}, spools: @escaping @Sendable () -> [SpoolConfiguration] = { [] }) {
        self.spools = spools
        self.store = store
        self.pipeline = pipeline
        self.state = Mutex(State(paused: paused, periodStart: eventsBefore, idleAt: eventsBefore))
        self.gate = UploadGate(capacity: maxConcurrentUploads)
        self.logger = logger
        self.onTurn = onTurn
        self.wakeBy = wakeBy
    }

    /// The number of uploads in flight: jobs claimed and not yet past their send.
    var inFlight: Int { state.withLock { $0.inFlight } }

    /// How many jobs are claimed beyond the upload slots: each opens (and, if small, reads) its file
    /// while the slots are busy, so that a slot given back is taken at once. Measured (scenario 2 of
    /// bench/bench.py, 8 slots, interleaved runs): none ahead 1,478–1,633 files/s, 4 ahead
    /// 1,650–1,892, 8 ahead 1,710–1,992, 16 ahead 1,987–2,144, 32 ahead 1,870–2,250.
    static func claimAhead(slots: Int) -> Int { min(2 * slots, 64) }

    /// Jobs being processed: those holding a slot and those whose fate is still being recorded or
    /// carried out once their send is over. Shutdown waits for all of them.
    private var active: Int { state.withLock { $0.inFlight + $0.finishing } }

    /// How many jobs past their send may be finishing before no more are claimed: a queue database
    /// that cannot be written holds them there, and the scheduler must not claim on regardless.
    private var finishingLimit: Int { 4 * max(1, gate.capacity) }

    /// How many uploads may run at once (changed by a configuration reload).
    var maxConcurrentUploads: Int {
        get { gate.capacity }
        set {
            gate.capacity = newValue
            doorbell.ring()
        }
    }

    /// The spools whose jobs are not started (`"*"`: all). Uploads being sent are not affected; jobs
    /// claimed ahead and waiting for a slot go back to the queue at the next turn.
    var paused: Set<String> {
        get { state.withLock { $0.paused } }
        set {
            state.withLock { $0.paused = newValue }
            doorbell.ring()
        }
    }

    /// The newest event id before the current busy period (jobs pending since the queue was last
    /// idle), or before the latest one when the queue is idle now: `wait` reports the failures after it.
    var busyPeriodStart: Int64 { state.withLock { $0.periodStart } }

    /// Notes whether the queue is busy or idle, to delimit busy periods.
    private func notePeriod() async {
        var pending = inFlight > 0
        if !pending { pending = (try? await store.hasWaitingJobs()) ?? false }
        if pending {
            state.withLock { state in
                if !state.busy {
                    state.busy = true
                    state.periodStart = state.idleAt
                }
            }
        } else if let newest = try? await store.eventBounds().newest {
            state.withLock { state in
                state.busy = false
                state.idleAt = newest
            }
        }
    }

    /// How long ago the loop last turned (it turns at least once a minute while healthy).
    var sinceLastTurn: Duration { .now - state.withLock { $0.lastTurn } }

    /// New work may be due: wake the loop.
    func wake() { doorbell.ring() }

    /// Why `spool` may not start uploads now (paused, outside its upload window), as of the last
    /// turn; `nil` if it may, or if the daemon is shutting down (that has its own words).
    func heldReason(for spool: String) -> String? {
        let held = state.withLock { state in state.stopping ? "" : state.held["*"] ?? state.held[spool] }
        if let held { return held.isEmpty ? nil : held }
        // Asked since the last turn (the answer came just before this slot was given back).
        return pipeline.serverWaits.wait(spool: spool, at: Date()).map(Self.serverWaitReason)
    }

    static func serverWaitReason(_ wait: SpoolServerWait) -> String {
        let until = ISO8601DateFormatter().string(from: wait.until)
        switch wait.reason {
        case .unreachable:
            let tries = wait.tries ?? 1
            return "the server cannot be reached (\(wait.message ?? "")); \(tries) \(tries == 1 ? "try" : "tries") in a row failed, the next at \(until)"
        case .asked, .unrecognized:
            return "the server asked to wait until \(until) (Retry-After)"
        }
    }

    /// Stop starting uploads; ``run(shutdownTimeout:)`` then waits for those in flight.
    func beginShutdown() {
        state.withLock { $0.stopping = true }
        gate.close()
        doorbell.ring()
    }

    /// What one turn of the loop may start: groups of spools to claim from (``UploadSlots``), the
    /// spools that start nothing now, and when an upload window next opens or closes.
    struct Turn {
        var groups: [[JobStore.SpoolSlots]]
        var configured: Set<String>
        /// Each spool's `priority`: the order in which claimed jobs take free slots.
        var priority: [String: Int]
        /// Why spools may not start uploads now, by spool; `"*"`: all are paused.
        var held: [String: String]
        var waiting: Set<String>
        var now: Date
        var nextWindowChange: Date?
    }

    private func turn(paused: Set<String>) -> Turn {
        let now = BandwidthPolicy.now()
        let calendar = Calendar.current
        let inFlight = state.withLock { $0.inFlightBySpool }
        var next: Date?
        var reasons: [String: String] = paused.contains("*") ? ["*": "all spools are paused (ferryctl pause)"] : [:]
        let serverWaits = pipeline.serverWaits.current(at: now)
        let spools = self.spools().map { spool -> UploadSlots.Spool in
            var held = paused.contains(spool.name)
            if held { reasons[spool.name] = "the spool is paused (ferryctl pause)" }
            if let wait = serverWaits[spool.name] {
                if !held { reasons[spool.name] = Self.serverWaitReason(wait) }
                held = true
                if next == nil || wait.until < next! { next = wait.until }
            }
            if let window = spool.uploadWindow {
                let (open, change) = window.state(at: now, calendar: calendar)
                if !open && !held { reasons[spool.name] = "the spool's upload window is closed" }
                held = held || !open
                if !open && spool.pausesAtWindowEnd { pauseInFlight(of: spool.name) }
                if let change, next == nil || change < next! { next = change }
            }
            return UploadSlots.Spool(name: spool.name, priority: spool.priority, cap: spool.maxConcurrentUploads,
                                     inFlight: inFlight[spool.name] ?? 0, held: held)
        }
        return Turn(groups: UploadSlots.groups(spools), configured: Set(spools.map(\.name)),
                    priority: Dictionary(spools.map { ($0.name, $0.priority) }, uniquingKeysWith: { first, _ in first }), held: reasons,
                    waiting: UploadSlots.waiting(spools),
                    now: now, nextWindowChange: next)
    }

    /// `window_end = "pause"`: the spool's uploads in flight stop and are queued again.
    private func pauseInFlight(of spool: String) {
        let activity = pipeline.activity
        for job in activity.jobs(ofSpool: spool) where activity.intervention(for: job) == nil {
            logger.notice("the spool's upload window closed; pausing its upload", metadata: ["job": "\(job.id)", "spool": "\(spool)"])
            Task { await activity.stop(job, .requeue(reason: "the upload window closed (window_end = \"pause\")"), timeout: .seconds(10)) }
        }
    }

    /// Runs until ``beginShutdown()``; then lets uploads in flight finish for up to `shutdownTimeout`
    /// and cancels the rest (they go back to the queue).
    func run(shutdownTimeout: @Sendable () -> Duration) async {
        await withDiscardingTaskGroup { group in
            // Claims that failed in a row (a full or failing disk): the next try backs off, 1 s
            // doubling to 30 s, and the log says so at the first and then every tenth.
            var claimFailures = 0
            while !state.withLock({ $0.stopping }) {
                state.withLock { $0.lastTurn = .now }
                await onTurn()
                let paused = self.paused
                let backedUp = state.withLock { $0.finishing } >= finishingLimit
                let slots = maxConcurrentUploads
                let limit = slots + Self.claimAhead(slots: slots)
                let free = paused.contains("*") || backedUp ? 0 : limit - inFlight
                let turn = self.turn(paused: paused)
                state.withLock { $0.held = turn.held }
                // Jobs claimed ahead whose spool may not start now, or is no longer configured (a
                // reload removed it), go back to the queue unsent.
                gate.refuse { turn.held["*"] != nil || turn.held[$0] != nil || !turn.configured.contains($0) }
                var claimed = 0
                if free > 0 {
                    do {
                        let rotation = state.withLock { state in
                            state.rotation &+= 1
                            return state.rotation
                        }
                        let jobs = try await store.claimDue(now: Date(), limit: free, groups: turn.groups, rotation: rotation)
                        claimed = jobs.count
                        for job in jobs {
                            state.withLock { state in
                                state.inFlight += 1
                                state.inFlightBySpool[job.spool, default: 0] += 1
                            }
                            // The ticket takes the job's place in line now, in claim order. The slot
                            // is given back once the send is over, so that recording the fate and
                            // disposing of the file overlap the next job's send.
                            let ticket = SlotTicket(
                                job: job, priority: turn.priority[job.spool] ?? 0, gate: gate, activity: pipeline.activity,
                                heldReason: { self.heldReason(for: $0) },
                                onRelease: {
                                    self.state.withLock { state in
                                        state.inFlight -= 1
                                        state.finishing += 1
                                        state.inFlightBySpool[job.spool, default: 1] -= 1
                                    }
                                    self.doorbell.ring()
                                })
                            group.addTask {
                                await self.pipeline.process(job, enter: ticket.enter, sent: ticket.release)
                                ticket.release()
                                self.state.withLock { $0.finishing -= 1 }
                                self.doorbell.ring()
                            }
                        }
                        if claimFailures > 0 {
                            logger.notice("jobs can be claimed from the queue again", metadata: ["failed_tries": "\(claimFailures)"])
                            claimFailures = 0
                        }
                    } catch {
                        claimFailures += 1
                        let delay = Duration.seconds(min(30, 1 << min(claimFailures - 1, 5)))
                        if claimFailures % 10 == 1 {
                            logger.error("cannot claim jobs from the queue; trying again", metadata: [
                                "error": "\(error)", "failed_tries": "\(claimFailures)", "next_try_s": "\(delay.components.seconds)",
                            ])
                        }
                        await doorbell.wait(until: .now + delay)
                        continue
                    }
                }
                await notePeriod()
                if claimed > 0 && claimed == free { continue }
                // Sleep until the next job is due, the next watchdog ping, or a minute at most.
                var deadline = min(ContinuousClock.now + .seconds(60), wakeBy() ?? .now + .seconds(60))
                if let change = turn.nextWindowChange {
                    deadline = min(deadline, ContinuousClock.now + .milliseconds(Int64(max(0, change.timeIntervalSince(turn.now)) * 1000) + 1))
                }
                if free > 0, inFlight < limit, let due = try? await store.nextDueDate(inSpools: turn.configured.subtracting(paused).subtracting(turn.waiting)) {
                    let wait = due.timeIntervalSinceNow
                    let earliest = ContinuousClock.now + .milliseconds(claimed == 0 && wait <= 0 ? 100 : 0)
                    deadline = min(deadline, max(earliest, ContinuousClock.now + .milliseconds(Int64(max(0, wait) * 1000))))
                }
                await doorbell.wait(until: deadline)
            }
            let remaining = active
            let shutdownTimeout = shutdownTimeout()
            if remaining > 0 {
                logger.notice("shutting down: waiting for uploads in flight", metadata: [
                    "uploads": "\(remaining)", "timeout": "\(shutdownTimeout)",
                ])
                let deadline = ContinuousClock.now + shutdownTimeout
                while active > 0 && ContinuousClock.now < deadline {
                    await doorbell.wait(until: deadline)
                }
                if active > 0 {
                    logger.notice("shutdown timeout reached; aborting uploads in flight (they stay queued)",
                                  metadata: ["uploads": "\(active)"])
                    // Records retried for jobs an operator stopped first are past their cancellation.
                    pipeline.records.abandonRetries()
                    group.cancelAll()
                }
            }
        }
    }
}

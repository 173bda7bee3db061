import FerryControl
import FerryDelivery
import FerryQueue
import FerrySystem
import Foundation
import Synchronization


/// The jobs being processed right now: their progress (for `status`, `show` and `watch`), the task
/// doing the work (so an operator can stop it), and what the operator asked for.
///
/// One entry per job, from the moment the pipeline takes it until its outcome is recorded.
final class ActiveJobs: Sendable {
    struct Entry: Sendable {
        var job: Job
        var phase = UploadProgress.Phase.preparing
        var bytesSent: Int64 = 0
        var bytesTotal: Int64
        /// tus, s3: the bytes the server has confirmed.
        var confirmedBytes: Int64?
        /// s3: the parts the server has confirmed, and how many the file takes.
        var parts: (confirmed: Int, total: Int)?
        let startedAt = Date()
        let clockStart = ContinuousClock.now
        /// The bytes and time of the last rate sample, and the rate it gave.
        var sample: (at: ContinuousClock.Instant, bytes: Int64) = (.now, 0)
        var recentRate: Double?
        var task: Task<Void, Never>?
        var intervention: Intervention?
        /// Rung when the pipeline is done with the job (its new state is on record).
        var stopWaiters: [Doorbell] = []
    }

    private let entries = Mutex<[Int64: Entry]>([:])
    /// Interventions for jobs the scheduler claimed but whose pipeline has not begun yet.
    private let early = Mutex<[Int64: (intervention: Intervention, waiters: [Doorbell])]>([:])
    /// Every request body byte handed to a connection since start.
    let totalBytesSent = Atomic<Int64>(0)
    /// The recent rate of ``totalBytesSent``, sampled as bytes are sent (no timer: idle costs nothing).
    let meter = ThroughputMeter()

    /// Starts tracking `job`. An intervention requested before the pipeline got here is kept.
    func begin(_ job: Job, estimatedTotal: Int64) {
        let key = job.sequence ?? -1
        entries.withLock { entries in
            var entry = Entry(job: job, bytesTotal: estimatedTotal)
            if let asked = early.withLock({ $0.removeValue(forKey: key) }) {
                entry.intervention = asked.intervention
                entry.stopWaiters = asked.waiters
            }
            entries[key] = entry
        }
    }

    /// The pipeline is done with the job: its outcome is on record. Operators waiting for it to stop
    /// are told.
    func end(_ job: Job) {
        let waiters = entries.withLock { $0.removeValue(forKey: job.sequence ?? -1)?.stopWaiters ?? [] }
        for waiter in waiters { waiter.ring() }
    }

    /// The jobs of `spool` being processed right now.
    func jobs(ofSpool spool: String) -> [Job] {
        entries.withLock { $0.values.filter { $0.job.spool == spool }.map(\.job) }
    }

    /// Whether the job is being processed right now.
    func contains(_ job: Job) -> Bool {
        entries.withLock { $0[job.sequence ?? -1] != nil }
    }

    /// Attaches the task processing the job; if an intervention is already waiting, it is cancelled at once.
    func attach(_ task: Task<Void, Never>, to job: Job) {
        let cancelNow = entries.withLock { entries -> Bool in
            entries[job.sequence ?? -1]?.task = task
            return entries[job.sequence ?? -1]?.intervention != nil
        }
        if cancelNow { task.cancel() }
    }

    /// Asks the pipeline processing `job` (or about to: the scheduler claimed it) to stop it, and
    /// returns once the pipeline has recorded the job's new state, or after `timeout`.
    func stop(_ job: Job, _ intervention: Intervention, timeout: Duration) async {
        let key = job.sequence ?? -1
        let done = Doorbell()
        let task = entries.withLock { entries -> Task<Void, Never>? in
            guard entries[key] != nil else {
                early.withLock { early in
                    early[key] = (intervention, (early[key]?.waiters ?? []) + [done])
                }
                return nil
            }
            entries[key]?.intervention = intervention
            entries[key]?.stopWaiters.append(done)
            return entries[key]?.task
        }
        task?.cancel()
        await done.wait(until: .now + timeout)
        // A job claimed but never begun (it ended first) leaves no early request behind.
        _ = entries.withLock { _ in early.withLock { $0.removeValue(forKey: key) } }
    }

    /// What an operator asked of the job, if anything.
    func intervention(for job: Job) -> Intervention? {
        entries.withLock { $0[job.sequence ?? -1]?.intervention }
    }

    /// The job waits for an upload slot (`true`), or has one now and prepares its request (`false`).
    func waitingForSlot(_ job: Job, _ waiting: Bool) {
        entries.withLock { $0[job.sequence ?? -1]?.phase = waiting ? .waiting : .preparing }
    }

    /// The job goes back to the queue unsent, not counted, because its spool may not start uploads
    /// now (paused, outside its upload window); an operator's hold or cancel asked first stands.
    func requeue(_ job: Job, reason: String) {
        entries.withLock { entries in
            if entries[job.sequence ?? -1]?.intervention == nil { entries[job.sequence ?? -1]?.intervention = .requeue(reason: reason) }
        }
    }

    /// The request is about to be sent. For a resumed upload, `confirmed` is where the server's copy
    /// ends: progress counts from there (and only bytes sent now count as sent).
    func sending(_ job: Job, total: Int64, confirmed: Int64? = nil) {
        entries.withLock {
            $0[job.sequence ?? -1]?.phase = .sending
            $0[job.sequence ?? -1]?.bytesTotal = total
            $0[job.sequence ?? -1]?.bytesSent = confirmed ?? 0
            $0[job.sequence ?? -1]?.confirmedBytes = confirmed
            $0[job.sequence ?? -1]?.sample = (.now, confirmed ?? 0)
        }
    }

    /// tus: the server confirmed `offset` bytes.
    func confirmed(_ job: Job, _ offset: Int64) {
        entries.withLock {
            $0[job.sequence ?? -1]?.confirmedBytes = offset
            if let sent = $0[job.sequence ?? -1]?.bytesSent, sent < offset { $0[job.sequence ?? -1]?.bytesSent = offset }
        }
    }

    /// s3: the server has `confirmed` of the upload's `total` parts.
    func parts(_ job: Job, confirmed: Int, total: Int) {
        entries.withLock { $0[job.sequence ?? -1]?.parts = (confirmed, total) }
    }

    /// Records that `sent` body bytes in all have been handed to the connection.
    func progressed(_ job: Job, sent: Int64) {
        let delta = entries.withLock { entries -> Int64 in
            guard var entry = entries[job.sequence ?? -1] else { return 0 }
            let delta = sent - entry.bytesSent
            entry.bytesSent = sent
            let now = ContinuousClock.now
            let elapsed = now - entry.sample.at
            if elapsed >= .seconds(2) {
                entry.recentRate = Double(sent - entry.sample.bytes) / elapsed.seconds
                entry.sample = (now, sent)
            }
            entries[job.sequence ?? -1] = entry
            return delta
        }
        if delta > 0 { meter.sample(total: totalBytesSent.add(delta, ordering: .relaxed).newValue) }
    }

    /// The uploads in flight, oldest first.
    func snapshot() -> [UploadProgress] {
        let now = ContinuousClock.now
        return entries.withLock { Array($0.values) }
            .sorted { $0.startedAt < $1.startedAt }
            .map { entry in
                let elapsed = (now - entry.clockStart).seconds
                let rate = entry.recentRate ?? (elapsed > 0 ? Double(entry.bytesSent) / elapsed : 0)
                return UploadProgress(
                    job: entry.job.id.rawValue, spool: entry.job.spool, file: entry.job.displayPath, phase: entry.phase,
                    bytesSent: entry.bytesSent, bytesTotal: entry.bytesTotal, bytesPerSecond: rate,
                    startedAt: entry.startedAt, attempt: entry.job.attempts + 1, confirmedBytes: entry.confirmedBytes,
                    partsConfirmed: entry.parts?.confirmed, partsTotal: entry.parts?.total)
            }
    }

    /// The progress of one job, if it is in flight.
    func progress(of job: Job) -> UploadProgress? {
        snapshot().first { $0.job == job.id.rawValue }
    }
}

/// Bytes sent per second over the last minute, from samples of the running total taken as bytes
/// are sent, at most one a second (so an idle daemon takes none).
final class ThroughputMeter: Sendable {
    private let samples = Mutex<[(at: ContinuousClock.Instant, total: Int64)]>([])
    /// How far back the rate looks.
    static let window = Duration.seconds(60)

    /// Records the running total, if the last sample is a second old or more.
    func sample(total: Int64, at now: ContinuousClock.Instant = .now) {
        samples.withLock { samples in
            if let last = samples.last, now - last.at < .seconds(1) { return }
            samples.append((now, total))
            samples.removeAll { now - $0.at > Self.window }
        }
    }

    /// The average rate from the oldest sample within the window to now (0 without one).
    func bytesPerSecond(total: Int64, at now: ContinuousClock.Instant = .now) -> Double {
        samples.withLock { samples in
            guard let first = samples.first(where: { now - $0.at <= Self.window }) else { return 0 }
            let elapsed = (now - first.at).seconds
            return elapsed > 0.5 ? Double(total - first.total) / elapsed : 0
        }
    }
}

extension Duration {
    /// The duration in seconds, as a `TimeInterval`.
    var seconds: TimeInterval {
        TimeInterval(components.seconds) + TimeInterval(components.attoseconds) / 1e18
    }
}

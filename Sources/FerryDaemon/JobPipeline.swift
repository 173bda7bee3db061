import FerryConfig
import FerryDelivery
import FerryMultipart
import FerryQueue
import FerrySpool
import FerrySystem
import Foundation
import Logging

/// The data path for one claimed job, top to bottom:
///
///     open        the source, without following symlinks; is it still the version queued?
///     send        by the spool's protocol (its ``Sender``); facts, no decisions
///     decide      ``AttemptDecider``: the job's fate, from the facts, the spool's rules and the time
///     record      the fate, durably, before the file is touched
///     follow-ups  dispose of the file, forget the body, end a server-side upload, …
///
/// A crash at any point leaves either the file in the spool or its fate on record (and a pending
/// disposition is finished at the next start).
final class JobPipeline: Sendable {
    /// Writes outcomes, retrying while the database cannot be written.
    let records: OutcomeRecorder
    /// The live configuration and its spools (replaced by a configuration reload).
    let runtime: DaemonRuntime
    /// The jobs being processed, their progress, and operators' interventions.
    let activity: ActiveJobs
    /// What follows a recorded fate.
    let followUps: JobFollowUps
    /// The multipart request body files, removed once an attempt's answer is in.
    let bodies: BodyBuilder
    /// Runs blocking file work off the concurrency pool.
    let io: BlockingIO
    /// Counts attempts by outcome, their bytes and durations.
    let metrics: DaemonMetrics
    /// Until when a job with an upload on the server waits before it sends, after a crash
    /// interrupted such uploads (``FerryDaemon``'s settling): the dead process's last bytes land first.
    let uploadsSettled: ContinuousClock.Instant?
    let logger: Logger
    /// Spools whose server asked to wait; the scheduler holds them.
    let serverWaits = ServerWaits()

    init(
        records: OutcomeRecorder, runtime: DaemonRuntime, activity: ActiveJobs, followUps: JobFollowUps, bodies: BodyBuilder,
        io: BlockingIO, metrics: DaemonMetrics, uploadsSettled: ContinuousClock.Instant? = nil, logger: Logger
    ) {
        self.uploadsSettled = uploadsSettled
        self.records = records
        self.runtime = runtime
        self.activity = activity
        self.followUps = followUps
        self.bodies = bodies
        self.io = io
        self.metrics = metrics
        self.logger = logger
    }

    /// Whether the job is being processed right now.
    func isActive(_ job: Job) -> Bool { activity.contains(job) }

    /// Processes one job that the scheduler moved to `uploading`. The work runs in a task of its own
    /// so that an operator can stop this one job (hold, cancel); cancelling the caller (shutdown)
    /// stops it too. Once the file is open, `enter` waits for an upload slot (it throws if the job
    /// is stopped or the daemon shuts down first: the job then goes back to the queue unsent);
    /// `sent` is called once the send is over (or was never started), before the fate is recorded:
    /// the scheduler gives the slot to the next job then.
    func process(_ job: Job, enter: @escaping @Sendable () async throws -> Void, sent: @escaping @Sendable () -> Void) async {
        activity.begin(job, estimatedTotal: job.identity.size)
        defer { activity.end(job) }
        var log = logger
        log[metadataKey: "job"] = "\(job.id)"
        log[metadataKey: "spool"] = "\(job.spool)"
        log[metadataKey: "file"] = "\(job.displayPath)"
        let work = Task { [log] in
            do {
                try await self.run(job, log: log, enter: enter, sent: sent)
            } catch {
                // Only the queue database can throw here. The job stays `uploading` in the database and
                // is put back in the queue at the next start; say so loudly.
                log.critical("cannot record the job's state in the queue database", metadata: ["error": "\(error)"])
            }
        }
        activity.attach(work, to: job)
        await withTaskCancellationHandler { await work.value } onCancel: { work.cancel() }
    }

    /// Sends once `enter` let the job have a slot; a job refused one (stopped, shut down, its spool
    /// held) is stopped before sending. A job with an upload on the server waits, in its slot (so
    /// it keeps its place in line), until ``uploadsSettled``.
    private func sendOnceEntered(_ job: Job, _ enter: () async throws -> Void, _ send: () async throws -> SendResult) async -> SendResult {
        do {
            try await enter()
            if job.upload != nil, let settled = uploadsSettled, settled > .now {
                try await EventLoopSleep.sleep(until: settled)
            }
        } catch {
            return SendResult(report: .stopped, requested: false)
        }
        do {
            return try await send()
        } catch {
            // A sender throws only when the queue could not record a resumable upload's new state (a
            // full disk): a local problem, retried like one; the next attempt asks the server where
            // the upload stands. (Thrown on, the job would sit in `uploading` until the next start.)
            // The upload as last recorded (reads work on a full disk), not as claimed: that one may
            // be older, or none, and recording it would forget an upload made in this attempt.
            let recorded = try? await records.store.job(id: job.id)
            let report: AttemptReport = Task.isCancelled ? .stopped : .localFailure("cannot record the upload's progress in the queue: \(error)")
            guard let recorded else { return SendResult(report: report) }
            return SendResult(report: report, upload: recorded.upload, recordsUpload: true)
        }
    }

    private func run(_ job: Job, log: Logger, enter: @Sendable () async throws -> Void, sent: @Sendable () -> Void) async throws {
        let startedAt = Date()
        guard let spool = runtime.spool(named: job.spool) else {
            sent()
            return try await conclude(job, spool: nil, SendResult(report: .spoolMissing, requested: false), startedAt: startedAt, log: log)
        }
        // 1. Open.
        var job = job
        let result: SendResult
        let opened = await open(job, in: spool)
        if let sidecar = opened.fieldSidecar { job.fieldsSidecar = sidecar }
        switch opened {
        case .unusable(let report, _):
            result = SendResult(report: report, requested: false)
        case .source(let source, _):
            // 2. Send, once a slot is free.
            defer { source.close() }
            result = await sendOnceEntered(job, enter) {
                try await spool.sender.send(job, from: source, tracker: UploadTracker(activity: activity, job: job), logger: log)
            }
        case .bundle(let bundle):
            defer { bundle.close() }
            result = await sendOnceEntered(job, enter) {
                try await spool.sender.send(job, bundle: bundle, tracker: UploadTracker(activity: activity, job: job), logger: log)
            }
        }
        // Before the slot goes to the next job: a server that asked to wait, or that cannot be
        // reached, gets no other file meanwhile.
        noteServerWaits(after: result.report, spool: spool, job: job, startedAt: startedAt, log: log)
        sent()
        try await conclude(job, spool: spool, result, startedAt: startedAt, log: log)
    }

    /// Decides the job's fate, records it, then carries out its follow-ups.
    private func conclude(_ job: Job, spool: SpoolRuntime?, _ result: SendResult, startedAt: Date, log: Logger) async throws {
        var job = job
        if result.recordsUpload { job.upload = result.upload }
        // The request body file (multipart) is never sent again, whatever comes next (a retry builds
        // its own): it goes now, before the record, which on a full state directory waits for the
        // space the body holds.
        bodies.remove(for: job)
        // 3. Decide.
        let now = Date()
        var report = result.report
        if case .answered(let answer) = report, let spool {
            // A refusal is kept (show, the sidecar, hooks): without the secrets it may echo.
            report = .answered(spool.answerRedaction.redacted(answer))
        }
        let decision = AttemptDecider.decide(AttemptInput(
            job: job, policy: spool?.configuration.retry ?? RetryPolicy(), settle: spool?.configuration.settle ?? .zero,
            report: report, bytesSent: result.bytesSent, requested: result.requested, progressed: result.progressed,
            intervention: activity.intervention(for: job), answeredEarly: result.answeredEarly,
            trustsEarlyAnswers: spool?.configuration.trustsEarlyAnswers ?? false, startedAt: startedAt, now: now,
            spool: spool?.configuration, sentDigests: result.digests))
        if decision.resetsRetryCount { job.attemptBase = job.attempts }
        let delivered = decision.counted == .delivered
        if delivered { FaultPoint.deliveredBeforeRecord.reached() }
        // 4. Record.
        let recorded: Job
        var entry = decision.log
        switch decision.record {
        case .attempt(let transition):
            recorded = try await records.finish(
                job, startedAt: startedAt, now: now, bytesSent: result.bytesSent, transition: transition, hooks: decision.hooks)
        case .failure(let reason):
            recorded = try await records.fail(job, now: now, error: reason, hooks: decision.hooks)
        case .supersede(let identity, let notBefore):
            let bundleFiles = job.kind == .bundle ? await currentBundleFiles(job, spool: spool) : []
            let successor = try await records.supersede(
                job, by: identity, now: now, notBefore: notBefore, boundary: MultipartBoundary.random().value, bundleFiles: bundleFiles)
            entry.metadata["new_job"] = successor.id.rawValue
            recorded = job
        }
        if let outcome = decision.counted {
            metrics.attemptEnded(spool: job.spool, outcome: outcome, bytesSent: result.bytesSent, duration: Date().timeIntervalSince(startedAt))
        }
        entry.write(to: log)
        if delivered { FaultPoint.deliveredBeforeDisposal.reached() }
        // 5. Follow-ups.
        await followUps.run(decision.followUps, job: job, recorded: recorded, spool: spool, log: log, deferringRecords: true)
        if !decision.hooks.isEmpty { followUps.hooksQueued() }
    }
}

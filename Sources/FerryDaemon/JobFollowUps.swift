import FerryDelivery
import FerryQueue
import Foundation
import Logging

/// Carries out what follows a job's recorded fate (``AttemptDecision/FollowUp``): the one
/// implementation, for the pipeline and for an operator's cancel of a job that is not in flight.
struct JobFollowUps: Sendable {
    let disposer: Disposer
    /// The local problem holding each spool back, if any (for `status`).
    let problems: LocalProblems
    /// Re-queues a path whose file changed after its upload.
    let requeue: @Sendable (String, [UInt8]) async -> Void

    /// Runs were queued with an outcome (a hook, a result file): the runner may look now, which
    /// matters when no disposition of the Disposer's rang for them (an early 2xx keeps its file).
    func hooksQueued() { disposer.disposed() }

    /// Runs `followUps` in order. `job` is the job as it was sent (with its resumable upload),
    /// `recorded` as the queue now has it. With `deferringRecords` (the pipeline), the record of the
    /// file's disposition commits with the queue's next durable write instead of waiting for its own.
    /// Returns the disposition applied, if `.dispose` was among them and could be applied.
    @discardableResult
    func run(_ followUps: [AttemptDecision.FollowUp], job: Job, recorded: Job, spool: SpoolRuntime?, log: Logger,
             deferringRecords: Bool = false) async -> Disposer.Result? {
        var disposed: Disposer.Result?
        for followUp in followUps {
            switch followUp {
            case .reportLocalProblem(let message):
                problems.report(spool: job.spool, job: job.id.rawValue, message)
            case .clearLocalProblem:
                if let problem = problems.resolved(spool: job.spool, job: job.id.rawValue) {
                    log.notice("uploads can be prepared again", metadata: [
                        "problem": "\(problem.message)", "duration_ms": "\(Int(Date().timeIntervalSince(problem.since) * 1000))",
                    ])
                }
            case .dispose:
                if let spool { disposed = await disposer.dispose(recorded, spool: spool.configuration, files: spool.files, deferRecord: deferringRecords) }
            case .requeueIfLeft:
                if disposed?.disposition == .left { await requeue(job.spool, job.relativePath) }
            case .endServerUpload:
                // Not cancelled with the attempt (an operator's cancel stops it): the request that
                // ends the upload on the server is made in a task of its own.
                if let sender = spool?.sender {
                    await Task { await sender.endUpload(of: job, logger: log) }.value
                }
            }
        }
        return disposed
    }
}

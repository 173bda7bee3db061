import FerryConfig
import FerryDelivery
import FerryQueue
import Foundation
import Logging

extension JobPipeline {
    /// Holds the job's spool when its server asked to wait (``AttemptDecider/spoolWait(after:now:)``)
    /// or could not be reached (``UnreachableServer``): the scheduler starts none of its jobs before
    /// then. Called as soon as an attempt's report is in, before its slot goes to the next job.
    func noteServerWaits(after report: AttemptReport, spool: SpoolRuntime?, job: Job, startedAt: Date, log: Logger) {
        let now = Date()
        if let until = AttemptDecider.spoolWait(after: report, now: now), serverWaits.wait(spool: job.spool, until: until) {
            var metadata: Logger.Metadata = ["until": "\(ISO8601DateFormatter().string(from: until))"]
            if case .answered(let answer) = report { metadata["status"] = "\(answer.status)" }
            log.notice("the server asked to wait; no upload of this spool starts before then", metadata: metadata)
        }
        let policy = spool?.configuration.retry ?? RetryPolicy()
        let backoff = Backoff(initialDelay: policy.initialDelay, maxDelay: policy.maxDelay)
        if let wait = serverWaits.note(report, spool: job.spool, startedAt: startedAt, backoff: backoff, now: now) {
            log.notice("the server cannot be reached; no upload of this spool starts before the next try", metadata: [
                "until": "\(ISO8601DateFormatter().string(from: wait.until))", "tries": "\(wait.tries)",
            ])
        }
    }
}

/// How an attempt that made (or tried) a request ended, as the metrics count it
/// (`ferry_uploads_total{outcome}`).
public enum AttemptOutcome: String, CaseIterable, Sendable {
    /// The server answered 2xx.
    case delivered
    /// The attempt failed (a retryable status, a network error, no progress) and the job will be retried.
    case retry
    /// The server rejected the file, or the job ran out of attempts or `max_age`: the job failed.
    case failed
    /// Stopped before an answer: shutdown, or an operator's hold or cancel.
    case interrupted
}

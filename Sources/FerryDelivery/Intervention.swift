/// What an operator asked of a job that is being processed.
public enum Intervention: Sendable, Equatable {
    /// Stop the upload and put the job on hold.
    case hold(reason: String)
    /// Stop the upload and cancel the job.
    case cancel(reason: String)
}

/// What an operator (or the spool's upload window) asked of a job that is being processed.
public enum Intervention: Sendable, Equatable {
    /// Stop the upload and queue the job again, not counted (`window_end = "pause"`: its upload
    /// window closed); a protocol that can resume does so when it is sent again.
    case requeue(reason: String)
    /// Stop the upload and put the job on hold.
    case hold(reason: String)
    /// Stop the upload and cancel the job.
    case cancel(reason: String)
}

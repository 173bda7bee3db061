/// What happened to a job, as `watch` names it (the queue's `JobEvent.Kind`).
public enum JobEventName: ControlVocabulary {
    /// A file was queued (a new job).
    case queued
    /// An attempt started.
    case started
    /// An attempt failed and will be retried.
    case retry
    /// The server accepted the file.
    case done
    /// Ferry gave up on the file.
    case failed
    /// The attempt was cut short (shutdown, restart, local trouble); the job is queued again.
    case requeued
    /// The file changed before delivery; a new job carries the new version.
    case superseded
    /// An operator held the job.
    case held
    /// An operator released the job.
    case released
    /// An operator retried the job.
    case retried
    /// An operator cancelled the job.
    case cancelled
    /// The source file was deleted, moved or kept after a final state (`message` says which).
    case disposed
    /// A name this build does not know (from a newer daemon).
    case unrecognized(String)

    public static let allCases: [JobEventName] = [
        .queued, .started, .retry, .done, .failed, .requeued, .superseded, .held, .released, .retried, .cancelled, .disposed,
    ]

    public var rawValue: String {
        switch self {
        case .queued: "queued"
        case .started: "started"
        case .retry: "retry"
        case .done: "done"
        case .failed: "failed"
        case .requeued: "requeued"
        case .superseded: "superseded"
        case .held: "held"
        case .released: "released"
        case .retried: "retried"
        case .cancelled: "cancelled"
        case .disposed: "disposed"
        case .unrecognized(let name): name
        }
    }
}

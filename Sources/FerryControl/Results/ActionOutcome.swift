/// The outcome of an action on one job (`retry`, `hold`, `release`, `cancel`) or one file (`enqueue`).
public struct ActionOutcome: Sendable, Codable, Hashable {
    /// The job id (or, for `enqueue`, the file) the outcome is about.
    public var id: String
    public var ok: Bool
    /// The job's state after the action.
    public var state: JobStateName?
    /// For `enqueue`: the new job's id.
    public var job: String?
    public var error: ControlError?

    public init(id: String, ok: Bool, state: JobStateName? = nil, job: String? = nil, error: ControlError? = nil) {
        self.id = id
        self.ok = ok
        self.state = state
        self.job = job
        self.error = error
    }
}

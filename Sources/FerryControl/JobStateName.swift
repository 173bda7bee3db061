/// Job states, as the protocol names them.
public enum JobStateName: String, Sendable, Codable, CaseIterable {
    case queued, uploading, retrying, held, done, failed, cancelled, superseded

    /// States in which the job still waits to be delivered.
    public static let pending: [JobStateName] = [.queued, .uploading, .retrying]
}

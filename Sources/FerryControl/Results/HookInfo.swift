import Foundation

/// One thing that runs after a job's outcome, as `show` reports it: a hook or the result file.
public struct HookInfo: Sendable, Codable, Hashable {
    /// `delivered` (`on_delivered`), `failed` (`on_failed`) or `result` (the result file).
    public var kind: String
    /// `pending`, `succeeded` or `gave_up`.
    public var state: String
    /// Runs that ended.
    public var attempts: Int
    /// When it runs next, while pending.
    public var nextAt: Date?
    /// The last run's exit status, if it exited.
    public var exitStatus: Int?
    /// Why the last run failed, if it did.
    public var error: String?
    /// The last lines of the last run's output.
    public var output: String?
    public var updatedAt: Date

    enum CodingKeys: String, CodingKey {
        case kind, state, attempts, error, output
        case nextAt = "next_at", exitStatus = "exit_status", updatedAt = "updated_at"
    }

    public init(
        kind: String, state: String, attempts: Int, nextAt: Date?, exitStatus: Int?, error: String?, output: String?, updatedAt: Date
    ) {
        self.kind = kind
        self.state = state
        self.attempts = attempts
        self.nextAt = nextAt
        self.exitStatus = exitStatus
        self.error = error
        self.output = output
        self.updatedAt = updatedAt
    }
}

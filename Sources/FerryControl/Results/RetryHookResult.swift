/// `retry-hook`'s result: the job, and the hooks now pending again.
public struct RetryHookResult: Sendable, Codable {
    public var job: String
    public var hooks: [String]

    public init(job: String, hooks: [String]) {
        self.job = job
        self.hooks = hooks
    }
}

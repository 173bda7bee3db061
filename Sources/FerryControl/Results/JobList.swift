/// `list`'s result.
public struct JobList: Sendable, Codable {
    public var jobs: [JobSummary]
    /// Whether more jobs matched than `limit` allowed.
    public var more: Bool

    public init(jobs: [JobSummary], more: Bool) {
        self.jobs = jobs
        self.more = more
    }
}

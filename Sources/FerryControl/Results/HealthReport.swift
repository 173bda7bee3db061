/// `health`'s result.
public struct HealthReport: Sendable, Codable {
    /// `ok`, or `degraded` when the scheduler has not turned for a while or the queue is unreadable.
    public var status: String
    public var version: String
    public var uptimeSeconds: Double
    public var problems: [String]

    enum CodingKeys: String, CodingKey {
        case status, version, problems
        case uptimeSeconds = "uptime_seconds"
    }

    public init(status: String, version: String, uptimeSeconds: Double, problems: [String]) {
        self.status = status
        self.version = version
        self.uptimeSeconds = uptimeSeconds
        self.problems = problems
    }
}

/// `health`'s result.
public struct HealthReport: Sendable, Codable {
    /// `ok`, or `degraded` when the scheduler has not turned for a while or the queue is unreadable.
    public var status: Status
    public var version: String
    public var uptimeSeconds: Double
    public var problems: [String]

    enum CodingKeys: String, CodingKey {
        case status, version, problems
        case uptimeSeconds = "uptime_seconds"
    }

    public init(status: Status, version: String, uptimeSeconds: Double, problems: [String]) {
        self.status = status
        self.version = version
        self.uptimeSeconds = uptimeSeconds
        self.problems = problems
    }
}

extension HealthReport {
    /// The daemon's health, in one word.
    public enum Status: ControlVocabulary {
        /// Working.
        case ok
        /// Something is wrong; `problems` says what.
        case degraded
        /// A name this build does not know (from a newer daemon).
        case unrecognized(String)

        public static let allCases: [Status] = [.ok, .degraded]

        public var rawValue: String {
            switch self {
            case .ok: "ok"
            case .degraded: "degraded"
            case .unrecognized(let name): name
            }
        }
    }
}

import Foundation

/// One attempt in `show`.
public struct AttemptInfo: Sendable, Codable, Hashable {
    public var number: Int
    public var startedAt: Date
    public var durationSeconds: Double
    public var status: Int?
    public var error: String?
    public var bytesSent: Int64
    /// `success`, `retry`, `failure` or `interrupted` (cut short by a shutdown, hold or cancel; not counted).
    public var outcome: Outcome

    enum CodingKeys: String, CodingKey {
        case number, status, error, outcome
        case startedAt = "started_at", durationSeconds = "duration_seconds", bytesSent = "bytes_sent"
    }

    public init(number: Int, startedAt: Date, durationSeconds: Double, status: Int?, error: String?, bytesSent: Int64, outcome: Outcome) {
        self.number = number
        self.startedAt = startedAt
        self.durationSeconds = durationSeconds
        self.status = status
        self.error = error
        self.bytesSent = bytesSent
        self.outcome = outcome
    }
}

extension AttemptInfo {
    /// How an attempt ended (the queue's `Attempt.Outcome`, as the protocol names it).
    public enum Outcome: ControlVocabulary {
        /// The server accepted the file (2xx).
        case success
        /// A failure that will be retried.
        case retry
        /// A failure that ended the job.
        case failure
        /// Cut short by a shutdown, a hold or a cancel; it does not count against the job.
        case interrupted
        /// A name this build does not know (from a newer daemon).
        case unrecognized(String)

        public static let allCases: [Outcome] = [.success, .retry, .failure, .interrupted]

        public var rawValue: String {
            switch self {
            case .success: "success"
            case .retry: "retry"
            case .failure: "failure"
            case .interrupted: "interrupted"
            case .unrecognized(let name): name
            }
        }
    }
}

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
    public var outcome: String

    enum CodingKeys: String, CodingKey {
        case number, status, error, outcome
        case startedAt = "started_at", durationSeconds = "duration_seconds", bytesSent = "bytes_sent"
    }

    public init(number: Int, startedAt: Date, durationSeconds: Double, status: Int?, error: String?, bytesSent: Int64, outcome: String) {
        self.number = number
        self.startedAt = startedAt
        self.durationSeconds = durationSeconds
        self.status = status
        self.error = error
        self.bytesSent = bytesSent
        self.outcome = outcome
    }
}

import Foundation

/// One job, as `list` shows it.
public struct JobSummary: Sendable, Codable, Hashable {
    public var id: String
    public var spool: String
    /// The path below the spool directory (bytes that are not UTF-8 appear as `\xNN`).
    public var file: String
    public var size: Int64
    public var state: JobStateName
    /// Attempts made (interrupted ones do not count).
    public var attempts: Int
    public var createdAt: Date
    public var updatedAt: Date
    public var nextAttemptAt: Date?
    public var finishedAt: Date?
    public var lastError: String?
    public var responseStatus: Int?
    /// tus: the bytes the server has confirmed it holds; absent for other protocols and before the
    /// upload exists.
    public var confirmedBytes: Int64?
    /// The final answer's status and kept headers (no body: `show` has it).
    public var response: ResponseInfo?
    /// A bundle's files; absent for a file.
    public var bundle: BundleInfo?

    enum CodingKeys: String, CodingKey {
        case id, spool, file, size, state, attempts
        case createdAt = "created_at", updatedAt = "updated_at", nextAttemptAt = "next_attempt_at",
             finishedAt = "finished_at", lastError = "last_error", responseStatus = "response_status",
             confirmedBytes = "confirmed_bytes", response, bundle
    }

    public init(
        id: String, spool: String, file: String, size: Int64, state: JobStateName, attempts: Int, createdAt: Date,
        updatedAt: Date, nextAttemptAt: Date?, finishedAt: Date?, lastError: String?, responseStatus: Int?,
        confirmedBytes: Int64? = nil, response: ResponseInfo? = nil
    ) {
        self.response = response
        self.confirmedBytes = confirmedBytes
        self.id = id
        self.spool = spool
        self.file = file
        self.size = size
        self.state = state
        self.attempts = attempts
        self.createdAt = createdAt
        self.updatedAt = updatedAt
        self.nextAttemptAt = nextAttemptAt
        self.finishedAt = finishedAt
        self.lastError = lastError
        self.responseStatus = responseStatus
    }
}

import Foundation

/// `show`'s result: everything about one job.
public struct JobDetail: Sendable, Codable {
    public var job: JobSummary
    /// The endpoint, with secrets shown as `***`.
    public var url: String
    /// Where the file is now: `spool`, `sent`, `failed`, `deleted`, `kept` or `missing`, with `path`.
    public var location: String
    /// The file's absolute path now, when it still exists somewhere Ferry put it.
    public var path: String?
    /// What became of the source once the job was final (`deleted`, `moved`, `kept`, `left`, `missing`).
    public var disposition: String?
    public var heldAt: Date?
    public var response: ResponseInfo?
    public var attempts: [AttemptInfo]
    /// Present while the job is being uploaded.
    public var progress: UploadProgress?

    enum CodingKeys: String, CodingKey {
        case job, url, location, path, disposition, response, attempts, progress
        case heldAt = "held_at"
    }

    public init(
        job: JobSummary, url: String, location: String, path: String?, disposition: String?, heldAt: Date?,
        response: ResponseInfo?, attempts: [AttemptInfo], progress: UploadProgress?
    ) {
        self.job = job
        self.url = url
        self.location = location
        self.path = path
        self.disposition = disposition
        self.heldAt = heldAt
        self.response = response
        self.attempts = attempts
        self.progress = progress
    }
}

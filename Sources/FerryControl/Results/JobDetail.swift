import Foundation

/// `show`'s result: everything about one job.
public struct JobDetail: Sendable, Codable {
    public var job: JobSummary
    /// The endpoint, with secrets shown as `***`.
    public var url: String
    /// Where the file is now: `spool`, `sent`, `failed`, `deleted`, `kept` or `missing`, with `path`.
    public var location: Location
    /// The file's absolute path now, when it still exists somewhere Ferry put it.
    public var path: String?
    /// What became of the source once the job was final (`deleted`, `moved`, `kept`, `left`, `missing`).
    public var disposition: Disposition?
    public var heldAt: Date?
    public var response: ResponseInfo?
    public var attempts: [AttemptInfo]
    /// Present while the job is being uploaded.
    public var progress: UploadProgress?
    /// s3 multipart uploads: the parts the server has confirmed, and how many the file takes.
    public var partsConfirmed: Int?
    public var partsTotal: Int?
    /// The RFC 9530 digest of the file as delivered, when the spool sends one (`sha-256=:…:`).
    public var digest: String?
    /// What ran after the outcome: the spool's hooks and its result file.
    public var hooks: [HookInfo]?

    enum CodingKeys: String, CodingKey {
        case job, url, location, path, disposition, response, attempts, progress
        case digest, hooks
        case heldAt = "held_at", partsConfirmed = "parts_confirmed", partsTotal = "parts_total"
    }

    public init(
        job: JobSummary, url: String, location: Location, path: String?, disposition: Disposition?, heldAt: Date?,
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

extension JobDetail {
    /// Where a job's file is now.
    public enum Location: ControlVocabulary {
        /// In the spool directory (the job is not final, or its file was left there).
        case spool
        /// Moved to the sent directory after delivery.
        case sent
        /// Moved to the failed directory (failed or cancelled).
        case failed
        /// Deleted after delivery.
        case deleted
        /// Kept in the spool after delivery (`after_upload = "keep"`).
        case kept
        /// Nowhere Ferry knows of (it was gone when Ferry came to dispose of it).
        case missing
        /// A name this build does not know (from a newer daemon).
        case unrecognized(String)

        public static let allCases: [Location] = [.spool, .sent, .failed, .deleted, .kept, .missing]

        public var rawValue: String {
            switch self {
            case .spool: "spool"
            case .sent: "sent"
            case .failed: "failed"
            case .deleted: "deleted"
            case .kept: "kept"
            case .missing: "missing"
            case .unrecognized(let name): name
            }
        }
    }

    /// What became of a job's source file once the job was final (the queue's `Disposition`, as the
    /// protocol names it).
    public enum Disposition: ControlVocabulary {
        /// Deleted from the spool.
        case deleted
        /// Moved to the sent directory or, for a failed or cancelled job, to the failed directory.
        case moved
        /// Left in place on purpose (`after_upload = "keep"`).
        case kept
        /// Left in place because it changed after it was uploaded; the new version is queued anew.
        case left
        /// Already gone when Ferry came to dispose of it.
        case missing
        /// A name this build does not know (from a newer daemon).
        case unrecognized(String)

        public static let allCases: [Disposition] = [.deleted, .moved, .kept, .left, .missing]

        public var rawValue: String {
            switch self {
            case .deleted: "deleted"
            case .moved: "moved"
            case .kept: "kept"
            case .left: "left"
            case .missing: "missing"
            case .unrecognized(let name): name
            }
        }
    }
}

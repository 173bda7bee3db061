import Foundation

/// An upload in flight.
public struct UploadProgress: Sendable, Codable, Hashable {
    public var job: String
    public var spool: String
    public var file: String
    /// `preparing` (building the body) or `sending`.
    public var phase: Phase
    public var bytesSent: Int64
    /// The request body's length (the file plus the multipart framing).
    public var bytesTotal: Int64
    /// Average over the last few seconds.
    public var bytesPerSecond: Double
    public var startedAt: Date
    /// The attempt's number (1 for the first).
    public var attempt: Int
    /// tus: the bytes the server has confirmed it holds (a resumed upload continues from here).
    /// Absent for multipart and put, whose bytes count only once the server answers.
    public var confirmedBytes: Int64?
    /// s3 multipart uploads: the parts the server has confirmed, and how many the file takes.
    public var partsConfirmed: Int?
    public var partsTotal: Int?

    enum CodingKeys: String, CodingKey {
        case job, spool, file, phase, attempt
        case bytesSent = "bytes_sent", bytesTotal = "bytes_total", bytesPerSecond = "bytes_per_second",
             startedAt = "started_at", confirmedBytes = "confirmed_bytes",
             partsConfirmed = "parts_confirmed", partsTotal = "parts_total"
    }

    public init(job: String, spool: String, file: String, phase: Phase, bytesSent: Int64, bytesTotal: Int64,
                bytesPerSecond: Double, startedAt: Date, attempt: Int, confirmedBytes: Int64? = nil,
                partsConfirmed: Int? = nil, partsTotal: Int? = nil) {
        self.confirmedBytes = confirmedBytes
        self.partsConfirmed = partsConfirmed
        self.partsTotal = partsTotal
        self.job = job
        self.spool = spool
        self.file = file
        self.phase = phase
        self.bytesSent = bytesSent
        self.bytesTotal = bytesTotal
        self.bytesPerSecond = bytesPerSecond
        self.startedAt = startedAt
        self.attempt = attempt
    }
}

extension UploadProgress {
    /// What an upload in flight is doing.
    public enum Phase: ControlVocabulary {
        /// Claimed ahead: its file is open, and it waits for one of the `max_concurrent_uploads`
        /// slots.
        case waiting
        /// Opening the file and building the request body.
        case preparing
        /// Sending the request.
        case sending
        /// A name this build does not know (from a newer daemon).
        case unrecognized(String)

        public static let allCases: [Phase] = [.waiting, .preparing, .sending]

        public var rawValue: String {
            switch self {
            case .waiting: "waiting"
            case .preparing: "preparing"
            case .sending: "sending"
            case .unrecognized(let name): name
            }
        }
    }
}

import Foundation

/// One line of `watch`: a durable job event (`type` `"job"`, with an increasing `id`) or an
/// ephemeral `progress` sample (no id; not replayed).
public struct WatchEvent: Sendable, Codable, Hashable {
    /// `job` or `progress`.
    public var type: Kind
    public var id: Int64?
    public var at: Date
    public var job: String?
    public var spool: String?
    public var file: String?
    /// The job's state after the event.
    public var state: JobStateName?
    /// What happened (for `job` events).
    public var event: JobEventName?
    public var attempt: Int?
    public var status: Int?
    public var message: String?
    /// For a `done` (delivered) event: the server's `Location`, if it gave one.
    public var location: String?
    /// For `progress`: the uploads in flight.
    public var uploads: [UploadProgress]?

    public init(
        type: Kind, id: Int64? = nil, at: Date, job: String? = nil, spool: String? = nil, file: String? = nil,
        state: JobStateName? = nil, event: JobEventName? = nil, attempt: Int? = nil, status: Int? = nil,
        message: String? = nil, uploads: [UploadProgress]? = nil, location: String? = nil
    ) {
        self.location = location
        self.type = type
        self.id = id
        self.at = at
        self.job = job
        self.spool = spool
        self.file = file
        self.state = state
        self.event = event
        self.attempt = attempt
        self.status = status
        self.message = message
        self.uploads = uploads
    }
}

extension WatchEvent {
    /// What a `watch` line carries.
    public enum Kind: ControlVocabulary {
        /// A durable job event, with an id.
        case job
        /// A sample of the uploads in flight (no id; not replayed).
        case progress
        /// A name this build does not know (from a newer daemon).
        case unrecognized(String)

        public static let allCases: [Kind] = [.job, .progress]

        public var rawValue: String {
            switch self {
            case .job: "job"
            case .progress: "progress"
            case .unrecognized(let name): name
            }
        }
    }
}

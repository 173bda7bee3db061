import Foundation

/// One line of `watch`: a durable job event (`type` `"job"`, with an increasing `id`) or an
/// ephemeral `progress` sample (no id; not replayed).
public struct WatchEvent: Sendable, Codable, Hashable {
    public var type: String
    public var id: Int64?
    public var at: Date
    public var job: String?
    public var spool: String?
    public var file: String?
    /// The job's state after the event.
    public var state: JobStateName?
    /// What happened: `queued`, `started`, `retry`, `done`, `failed`, `held`, `released`,
    /// `cancelled`, `superseded`, `requeued`, `disposed`.
    public var event: String?
    public var attempt: Int?
    public var status: Int?
    public var message: String?
    /// For `progress`: the uploads in flight.
    public var uploads: [UploadProgress]?

    public init(
        type: String, id: Int64? = nil, at: Date, job: String? = nil, spool: String? = nil, file: String? = nil,
        state: JobStateName? = nil, event: String? = nil, attempt: Int? = nil, status: Int? = nil,
        message: String? = nil, uploads: [UploadProgress]? = nil
    ) {
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

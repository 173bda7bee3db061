/// `retry`, `hold`, `release`, `cancel`: the jobs named, or all jobs the command's bulk selector
/// picks (`all`: retry → every failed job, hold → every queued or retrying job, release → every
/// held job, cancel → every held job), optionally in one spool only.
public struct JobActionArguments: Sendable, Codable {
    public var ids: [String]?
    public var all: Bool?
    public var spool: String?

    public init(ids: [String]? = nil, all: Bool? = nil, spool: String? = nil) {
        self.ids = ids
        self.all = all
        self.spool = spool
    }
}

/// `watch`: a stream of events.
public struct WatchArguments: Sendable, Codable {
    /// Replay the durable events after this id first (from a previous `watch`); absent means only new ones.
    public var since: Int64?
    /// Whether to include `progress` samples (default true).
    public var progress: Bool?
    /// Seconds between progress samples (default 1, at least 0.2).
    public var progressInterval: Double?

    enum CodingKeys: String, CodingKey {
        case since, progress, progressInterval = "progress_interval"
    }

    public init(since: Int64? = nil, progress: Bool? = nil, progressInterval: Double? = nil) {
        self.since = since
        self.progress = progress
        self.progressInterval = progressInterval
    }
}

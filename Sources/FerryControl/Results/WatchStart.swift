/// `watch`'s first reply.
public struct WatchStart: Sendable, Codable {
    /// The id of the newest durable event when the stream started.
    public var lastEventId: Int64
    /// Set when `since` was older than the oldest event kept: events in `from...to` are gone (use
    /// `list` to catch up).
    public var missed: EventGap?

    enum CodingKeys: String, CodingKey {
        case lastEventId = "last_event_id", missed
    }

    public init(lastEventId: Int64, missed: EventGap?) {
        self.lastEventId = lastEventId
        self.missed = missed
    }
}

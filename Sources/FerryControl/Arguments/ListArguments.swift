import Foundation

/// `list`: jobs, newest first.
public struct ListArguments: Sendable, Codable {
    /// Only jobs in these states.
    public var states: [JobStateName]?
    /// Only jobs of this spool.
    public var spool: String?
    /// At most this many (default 50, at most 1000).
    public var limit: Int?
    /// Only jobs created at or after this time.
    public var since: Date?

    public init(states: [JobStateName]? = nil, spool: String? = nil, limit: Int? = nil, since: Date? = nil) {
        self.states = states
        self.spool = spool
        self.limit = limit
        self.since = since
    }
}

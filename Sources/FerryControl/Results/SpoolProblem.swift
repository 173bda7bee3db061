import Foundation

/// A local problem that keeps some of a spool's jobs waiting: the last error, since when, how many jobs.
public struct SpoolProblem: Sendable, Codable, Hashable {
    /// The last error, e.g. `cannot build the request body: write …: No space left on device`.
    public var message: String
    /// When the problem began.
    public var since: Date
    /// When it last happened (jobs try again every 15–30 s while it lasts).
    public var lastSeenAt: Date
    /// How many queued jobs are waiting because of it (files the queue could not take are not
    /// jobs yet: a problem with `jobs` 0 is one of those).
    public var jobs: Int

    enum CodingKeys: String, CodingKey {
        case message, since, jobs
        case lastSeenAt = "last_seen_at"
    }

    public init(message: String, since: Date, lastSeenAt: Date, jobs: Int) {
        self.message = message
        self.since = since
        self.lastSeenAt = lastSeenAt
        self.jobs = jobs
    }
}

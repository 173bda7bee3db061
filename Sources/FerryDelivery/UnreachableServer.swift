import Foundation

/// Whether a spool's server could be reached lately, and until when the spool waits because it
/// could not: pure, one value per spool, fed every attempt's report by the pipeline.
///
/// Without it, a server that is down (refused, no route, a link that is off) is tried by every
/// queued file in turn, each on its own backoff: a backlog of 100,000 files on a vessel's dead link
/// made thousands of failed connections a minute, each one an attempt recorded in the queue. With
/// it, a connection that cannot be made holds the whole spool for a backoff of its own, as one job's
/// would be: full jitter, a random time up to `min(max_delay, 30 s, initial_delay × 2ⁿ)` with the
/// spool's `[spool.retry]` delays, where *n* counts the waits in a row. The 30 s bound
/// (``longestWait``) keeps the server found soon after it is back, as many jobs on their own
/// backoffs would find it: a try costs a few failed connections, and files that were never tried
/// go as soon as one succeeds. When a wait ends, the jobs due start (up to
/// `max_concurrent_uploads`); the first of them that cannot connect starts the next, longer wait,
/// and those already under way fail into it without lengthening it. An answer from the
/// server, whatever its status, to an attempt started after the last failure ends the run and the
/// wait; one to an attempt begun before it (a long upload on a connection made earlier) does not,
/// as new connections may still fail.
public struct UnreachableServer: Sendable, Equatable {
    /// Waits in a row (connections that could not be made, each after the last wait ended).
    public private(set) var failures: Int = 0
    /// Until when the spool starts no upload, if it waits.
    public private(set) var until: Date?
    /// The last failure's message (for `ferryctl status`).
    public private(set) var reason: String?
    /// When the last failure was seen.
    public private(set) var lastFailure: Date?

    /// The longest wait, whatever `max_delay` says.
    public static let longestWait: Duration = .seconds(30)

    public init() {}

    /// Takes in the report of one attempt that started at `startedAt`. Returns the end of a wait
    /// that starts or moves later with it.
    public mutating func note<Random: RandomNumberGenerator>(
        _ report: AttemptReport, startedAt: Date, now: Date, backoff: Backoff, random: inout Random
    ) -> Date? {
        switch report {
        case .unreachable(let message):
            reason = message
            lastFailure = now
            // Attempts that were under way when the wait began fail into it: they say nothing new.
            if let until, until > now { return nil }
            let bounded = Backoff(initialDelay: backoff.initialDelay, maxDelay: min(backoff.maxDelay, Self.longestWait))
            let end = now.addingTimeInterval(bounded.delay(forRetry: failures, using: &random).timeInterval)
            failures += 1
            until = end
            return end
        case .answered:
            // The server is there (its status is the job's business, and Retry-After the spool's
            // other wait), if the answer came on a connection made since the last failure.
            if let lastFailure, startedAt < lastFailure { return nil }
            self = UnreachableServer()
            return nil
        case .spoolMissing, .localFailure, .sourceGone, .sourceChanged, .noAnswer, .refused, .stopped:
            // Nothing learnt about reaching the server: a cut mid-transfer was a connection made.
            return nil
        }
    }

    /// The wait at `now`, if one runs.
    public func wait(at now: Date) -> Date? {
        until.flatMap { $0 > now ? $0 : nil }
    }
}

import Foundation
import Synchronization

/// The spools whose server asked to wait (a 429 or 503 with `Retry-After`, or a rate limit's reset
/// time): the scheduler starts none of their jobs before then. Without it each queued file would
/// be sent whole into the same refusal, Mastodon's media limit (30 uploads in 30 minutes) costing
/// a full upload per file per retry.
final class ServerWaits: Sendable {
    private let until = Mutex<[String: Date]>([:])

    /// `spool`'s server asked to wait until `date`; returns whether that is news (later than known).
    @discardableResult
    func wait(spool: String, until date: Date) -> Bool {
        until.withLock { waits in
            guard waits[spool].map({ $0 < date }) ?? true else { return false }
            waits[spool] = date
            return true
        }
    }

    /// Forgets `spool`'s wait (`nil`: every spool's): an operator's `retry` or `resume` asks to try
    /// now, and a reload may point the spool at another server.
    func forget(spool: String?) {
        until.withLock { waits in
            if let spool { waits[spool] = nil } else { waits.removeAll() }
        }
    }

    /// Until when `spool` waits, if it still does at `now`.
    func until(spool: String, at now: Date) -> Date? {
        until.withLock { waits in waits[spool].flatMap { $0 > now ? $0 : nil } }
    }

    /// The waits still running at `now`, by spool (those over are forgotten).
    func current(at now: Date) -> [String: Date] {
        until.withLock { waits in
            waits = waits.filter { $0.value > now }
            return waits
        }
    }
}

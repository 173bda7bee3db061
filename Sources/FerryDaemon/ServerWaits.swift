import FerryControl
import FerryDelivery
import Foundation
import Synchronization

/// The spools that start no upload for now because of their server: it asked to wait (a 429 or
/// 503 with `Retry-After`, or a rate limit's reset time), or it could not be reached
/// (``UnreachableServer``). Without the first, each queued file would be sent whole into the same
/// refusal, Mastodon's media limit (30 uploads in 30 minutes) costing a full upload per file per
/// retry; without the second, every queued file would try a dead server in turn.
/// A spool's wait is a ``SpoolServerWait``, as `ferryctl status` shows it.
final class ServerWaits: Sendable {
    private struct Spool {
        var asked: Date?
        var reachability = UnreachableServer()
    }

    private let spools = Mutex<[String: Spool]>([:])

    /// `spool`'s server asked to wait until `date`; returns whether that is news (later than known).
    @discardableResult
    func wait(spool: String, until date: Date) -> Bool {
        spools.withLock { spools in
            guard spools[spool]?.asked.map({ $0 < date }) ?? true else { return false }
            spools[spool, default: Spool()].asked = date
            return true
        }
    }

    /// Takes in the report of an attempt of `spool` that started at `startedAt`, for the spool's
    /// reachability; returns an unreachable wait that starts with it: its end, and the tries in a row.
    func note(_ report: AttemptReport, spool: String, startedAt: Date, backoff: Backoff, now: Date) -> (until: Date, tries: Int)? {
        var random = SystemRandomNumberGenerator()
        return spools.withLock { spools in
            if case .unreachable = report {} else if spools[spool] == nil { return nil }
            guard let until = spools[spool, default: Spool()].reachability.note(
                report, startedAt: startedAt, now: now, backoff: backoff, random: &random) else { return nil }
            return (until, spools[spool]?.reachability.failures ?? 1)
        }
    }

    /// The tries in a row that found each spool's server unreachable (spools whose server was last
    /// reached are absent), for `ferry_server_unreachable_tries`.
    func unreachableTries() -> [String: Int] {
        spools.withLock { spools in spools.compactMapValues { $0.reachability.failures > 0 ? $0.reachability.failures : nil } }
    }

    /// Ends every spool's unreachable wait and run of failures (a reload may have changed what
    /// reaching the server takes: `connect_timeout`, a CA, the URL); waits the servers asked for stay.
    func forgetUnreachable() {
        spools.withLock { spools in
            for name in spools.keys { spools[name]?.reachability = UnreachableServer() }
        }
    }

    /// Forgets `spool`'s waits (`nil`: every spool's): an operator's `retry` or `resume` asks to try
    /// now, and a reload may point the spool at another server.
    func forget(spool: String?) {
        spools.withLock { spools in
            if let spool { spools[spool] = nil } else { spools.removeAll() }
        }
    }

    /// `spool`'s wait, if one runs at `now` (the later of the two, when both run).
    func wait(spool: String, at now: Date) -> SpoolServerWait? {
        spools.withLock { spools in spools[spool].flatMap { Self.wait(of: $0, at: now) } }
    }

    /// The waits running at `now`, by spool (spools with nothing left to remember are forgotten).
    func current(at now: Date) -> [String: SpoolServerWait] {
        spools.withLock { spools in
            spools = spools.filter { $0.value.asked.map { $0 > now } ?? false || $0.value.reachability.failures > 0 }
            return spools.compactMapValues { Self.wait(of: $0, at: now) }
        }
    }

    private static func wait(of spool: Spool, at now: Date) -> SpoolServerWait? {
        let asked = spool.asked.flatMap { $0 > now ? SpoolServerWait(reason: .asked, until: $0) : nil }
        let unreachable = spool.reachability.wait(at: now).map {
            SpoolServerWait(reason: .unreachable, until: $0, message: spool.reachability.reason ?? "", tries: spool.reachability.failures)
        }
        switch (asked, unreachable) {
        case (let asked?, let unreachable?): return asked.until >= unreachable.until ? asked : unreachable
        case (let one?, nil), (nil, let one?): return one
        case (nil, nil): return nil
        }
    }
}

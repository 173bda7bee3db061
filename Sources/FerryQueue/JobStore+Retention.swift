import Foundation
import GRDB

/// How long finished jobs are remembered.
extension JobStore {
    /// What makes a finished job forgettable: final, its file dealt with before the cutoff, and
    /// either gone from the spool (deleted, moved, found missing) or followed by a newer job of the
    /// same path (a superseded version, an older kept one). The newest job of a file still in the
    /// spool (`kept`, `left`) stays: it is what keeps a rescan from uploading that file again. A job
    /// with a hook or result file still to run stays too, and so does each spool's last delivery
    /// (`ferry_last_success_timestamp_seconds`). A time before `plausible` (stamped by a clock not
    /// yet set) says nothing of how long ago it was: such a job stays.
    static let forgettable = """
        old.disposed_at < ? AND old.disposed_at >= ? AND old.state IN ('done', 'failed', 'cancelled', 'superseded')
        AND (old.state != 'done' OR EXISTS (SELECT 1 FROM job AS later
                                            WHERE later.spool = old.spool AND later.state = 'done' AND later.finished_at > old.finished_at))
        AND (old.disposition IN ('deleted', 'moved', 'missing')
             OR EXISTS (SELECT 1 FROM job AS newer
                        WHERE newer.spool = old.spool AND newer.relative_path = old.relative_path AND newer.seq > old.seq))
        AND NOT EXISTS (SELECT 1 FROM hook_run WHERE hook_run.job_seq = old.seq AND hook_run.state = 'pending')
        """

    /// Deletes the finished jobs ``forgettable`` before `cutoff`, with their attempts, parts, bundle
    /// members and hook runs (the foreign keys cascade; their events are not shown without them, and
    /// go with the event log's pruning), `batch` at a time: each batch is found by a read
    /// (which does not hold up the queue's writes) and deleted in a write of its own that checks
    /// every condition again. Returns how many jobs were deleted.
    ///
    /// The read walks the table in `seq` order from where the last batch ended (`NOT INDEXED`: by
    /// `job_by_state` SQLite would read every finished job and sort them, for each batch), so a pass
    /// reads each row once (300,000 rows in 0.2 s). A write of 1,000 jobs took 108 ms, the queue's
    /// other writes waiting meanwhile: batches are 200.
    @discardableResult
    public func forgetFinishedJobs(disposedBefore cutoff: Date, plausible: Date, batch: Int = 200) async throws -> Int {
        let bounds = [cutoff.timeIntervalSince1970, plausible.timeIntervalSince1970]
        return try await inBatches(batch, select: { db, after in
            try Int64.fetchAll(db, sql: """
                SELECT seq FROM job AS old NOT INDEXED WHERE old.seq > ? AND \(Self.forgettable) ORDER BY old.seq LIMIT ?
                """, arguments: StatementArguments([after]) + StatementArguments(bounds) + [batch])
        }, apply: { db, candidates in
            try db.execute(sql: """
                DELETE FROM job WHERE seq IN (SELECT seq FROM job AS old WHERE \(Self.forgettable) AND old.seq IN (\(Self.marks(candidates.count))))
                """, arguments: StatementArguments(bounds) + StatementArguments(candidates))
            return db.changesCount
        })
    }

    /// Final jobs whose file was dealt with while the clock was not set yet (a time before
    /// `plausible`) are stamped `now`: their `job_retention` counts from when the clock was found
    /// set, as their age does. In batches, as ``forgetFinishedJobs(disposedBefore:plausible:batch:)``.
    @discardableResult
    public func restampUnknownDisposals(before plausible: Date, now: Date, batch: Int = 200) async throws -> Int {
        try await inBatches(batch, select: { db, after in
            try Int64.fetchAll(db, sql: "SELECT seq FROM job NOT INDEXED WHERE seq > ? AND disposed_at < ? ORDER BY seq LIMIT ?",
                               arguments: [after, plausible.timeIntervalSince1970, batch])
        }, apply: { db, candidates in
            try db.execute(sql: "UPDATE job SET disposed_at = ? WHERE disposed_at < ? AND seq IN (\(Self.marks(candidates.count)))",
                           arguments: [now.timeIntervalSince1970, plausible.timeIntervalSince1970] + StatementArguments(candidates))
            return db.changesCount
        })
    }

    /// Runs `apply` on the jobs `select` finds (their `seq`s in order, after the one given), `batch`
    /// at a time: each batch found by a read, which does not hold up the queue's writes, and handled
    /// in a write of its own, which must check its conditions again. Returns the sum of `apply`'s
    /// counts. A stop waits for one batch at most.
    private func inBatches(
        _ batch: Int, select: @escaping @Sendable (Database, Int64) throws -> [Int64],
        apply: @escaping @Sendable (Database, [Int64]) throws -> Int
    ) async throws -> Int {
        var total = 0
        var after: Int64 = 0
        while true {
            let start = after
            let candidates = try await read { db in try select(db, start) }
            guard let last = candidates.last else { return total }
            after = last
            total += try await write { db in try apply(db, candidates) }
            if candidates.count < batch || Task.isCancelled { return total }
        }
    }

    /// `count` SQL parameters: `?, ?, …`.
    private static func marks(_ count: Int) -> String {
        Array(repeating: "?", count: count).joined(separator: ", ")
    }
}

import Foundation
import GRDB

/// Picking up after a stop or a crash.
extension JobStore {
    /// After a restart, puts jobs that were `uploading` when the daemon stopped back in the queue,
    /// due now, and says how many there were and how many of them have an upload on the server
    /// (a recorded resumable upload: tus, s3, the IETF draft). Their interrupted attempt is not counted.
    public func requeueInterrupted(now: Date) async throws -> (requeued: Int, withUpload: Int) {
        try await write { db in
            let withUpload = try Int.fetchOne(db, sql: "SELECT COUNT(*) FROM job WHERE state = 'uploading' AND upload_url IS NOT NULL") ?? 0
            try db.execute(sql: """
                INSERT INTO event (at, job_seq, kind, state, message)
                SELECT ?, seq, 'requeued', 'queued', 'the daemon stopped during the upload' FROM job WHERE state = 'uploading'
                """, arguments: [now.timeIntervalSince1970])
            try db.execute(
                sql: "UPDATE job SET state = 'queued', next_attempt_at = ?, updated_at = ? WHERE state = 'uploading'",
                arguments: [now.timeIntervalSince1970, now.timeIntervalSince1970])
            return (db.changesCount, withUpload)
        }
    }

    /// Makes due now the waiting jobs of `spool` that are due later than `horizon` from `now`:
    /// later than any delay Ferry sets (backoff, `Retry-After`), so set while the clock was ahead
    /// of where it is now (a box that booted with a wrong time, then NTP set it back). Without this
    /// they would wait until the clock caught up again. Returns how many there were.
    public func rescheduleBeyond(horizon: Duration, spool: String, now: Date) async throws -> Int {
        let latest = now.timeIntervalSince1970 + Double(horizon.components.seconds)
        // Asked every minute: a read when there is nothing to do, so an idle queue writes nothing.
        let any = try await read { db in
            try Bool.fetchOne(db, sql: """
                SELECT EXISTS (SELECT 1 FROM job WHERE spool = ? AND state IN ('queued', 'retrying') AND next_attempt_at > ?)
                """, arguments: [spool, latest]) ?? false
        }
        guard any else { return 0 }
        return try await write { db in
            // The partial index job_due_by_spool serves both: nothing matches almost always.
            try db.execute(sql: """
                INSERT INTO event (at, job_seq, kind, state, message)
                SELECT ?, seq, 'requeued', state, 'due after any delay Ferry sets: the clock was set back; due now'
                FROM job WHERE spool = ? AND state IN ('queued', 'retrying') AND next_attempt_at > ?
                """, arguments: [now.timeIntervalSince1970, spool, latest])
            try db.execute(sql: """
                UPDATE job SET next_attempt_at = ?, updated_at = ?
                WHERE spool = ? AND state IN ('queued', 'retrying') AND next_attempt_at > ?
                """, arguments: [now.timeIntervalSince1970, now.timeIntervalSince1970, spool, latest])
            return db.changesCount
        }
    }

    /// Moves the times of the jobs still to be delivered (queued, uploading, retrying) by `step`
    /// where they were stamped by the clock before it was stepped: the next attempt (stamped when
    /// it was scheduled, `updated_at`) and the start of the `max_age` clock; and the next try of
    /// pending hook runs. A time read after the step lies in `readAfter` and is left alone. So a job
    /// is as old, and as close to its next attempt, as it was before the step. Returns how many
    /// jobs moved.
    public func shiftPending(by step: Duration, readAfter: ClosedRange<Date>, now: Date) async throws -> Int {
        let seconds = Double(step.components.seconds) + Double(step.components.attoseconds) / 1e18
        let (from, to) = (readAfter.lowerBound.timeIntervalSince1970, readAfter.upperBound.timeIntervalSince1970)
        return try await write { db in
            try db.execute(sql: """
                UPDATE job SET age_base = COALESCE(age_base, created_at) + ?
                WHERE \(JobPredicate.waiting) AND COALESCE(age_base, created_at) NOT BETWEEN ? AND ?
                """, arguments: [seconds, from, to])
            var moved = db.changesCount
            try db.execute(sql: """
                UPDATE job SET next_attempt_at = next_attempt_at + ?, updated_at = ?
                WHERE \(JobPredicate.waiting) AND updated_at NOT BETWEEN ? AND ?
                """, arguments: [seconds, now.timeIntervalSince1970, from, to])
            moved = max(moved, db.changesCount)
            try db.execute(sql: "UPDATE hook_run SET next_at = next_at + ? WHERE state = 'pending' AND updated_at NOT BETWEEN ? AND ?",
                           arguments: [seconds, from, to])
            return moved
        }
    }

    /// Starts the `max_age` clock now for the jobs still to be delivered (or held) whose age was
    /// stamped before `floor`, by a clock that had not been set (a box without a real-time clock
    /// boots at 1970): their age cannot be known, and counted from 1970 it would fail them all at
    /// once. Does nothing while the clock itself is still before `floor`. Returns how many changed.
    public func restartUnknownAges(before floor: Date, now: Date) async throws -> Int {
        guard now >= floor else { return 0 }
        return try await write { db in
            try db.execute(sql: """
                UPDATE job SET age_base = ?
                WHERE \(JobPredicate.active) AND COALESCE(age_base, created_at) < ?
                """, arguments: [now.timeIntervalSince1970, floor.timeIntervalSince1970])
            return db.changesCount
        }
    }

    /// Jobs in a final state whose source file has not been dealt with yet, oldest first, from the
    /// one after sequence number `after`.
    public func pendingDispositions(after: Int64 = 0, limit: Int) async throws -> [Job] {
        try await read { db in
            try Job.fetchAll(db, sql: """
                SELECT * FROM job INDEXED BY job_undisposed WHERE \(JobPredicate.undisposed) AND seq > ? ORDER BY seq LIMIT ?
                """, arguments: [after, limit])
        }
    }

    /// The final job that has waited longest for its file to be dealt with (deleted, moved, kept),
    /// if any: for `health`, which reports a disposition stuck for minutes.
    public func oldestPendingDisposition() async throws -> Job? {
        try await read { db in
            try Job.fetchOne(db, sql: """
                SELECT * FROM job INDEXED BY job_undisposed WHERE \(JobPredicate.undisposed)
                ORDER BY finished_at LIMIT 1
                """)
        }
    }
}

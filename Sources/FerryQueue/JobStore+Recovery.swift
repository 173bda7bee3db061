import Foundation
import GRDB

/// Picking up after a stop or a crash.
extension JobStore {
    /// After a restart, puts jobs that were `uploading` when the daemon stopped back in the queue
    /// and returns how many there were. Their interrupted attempt is not counted. They are due now,
    /// but those with a resumable upload on the server only after `settling`: what the dead
    /// process's sockets still held (the kernel sends it after the process is gone) then has time
    /// to reach the server, so the resumed upload finds it there instead of sending it again.
    public func requeueInterrupted(now: Date, settling: Duration = .zero) async throws -> Int {
        let settled = now.addingTimeInterval(Double(settling.components.seconds) + Double(settling.components.attoseconds) / 1e18)
        return try await write { db in
            try db.execute(sql: """
                INSERT INTO event (at, job_seq, kind, state, message)
                SELECT ?, seq, 'requeued', 'queued', 'the daemon stopped during the upload' FROM job WHERE state = 'uploading'
                """, arguments: [now.timeIntervalSince1970])
            try db.execute(
                sql: """
                    UPDATE job SET state = 'queued', next_attempt_at = CASE WHEN upload_url IS NULL THEN ? ELSE ? END, updated_at = ?
                    WHERE state = 'uploading'
                    """,
                arguments: [now.timeIntervalSince1970, settled.timeIntervalSince1970, now.timeIntervalSince1970])
            return db.changesCount
        }
    }

    /// Jobs in a final state whose source file has not been dealt with yet, oldest first, from the
    /// one after sequence number `after`.
    public func pendingDispositions(after: Int64 = 0, limit: Int) async throws -> [Job] {
        try await read { db in
            try Job.fetchAll(db, sql: """
                SELECT * FROM job WHERE disposed_at IS NULL AND state IN ('done', 'failed', 'cancelled') AND seq > ? ORDER BY seq LIMIT ?
                """, arguments: [after, limit])
        }
    }

    /// The final job that has waited longest for its file to be dealt with (deleted, moved, kept),
    /// if any: for `health`, which reports a disposition stuck for minutes.
    public func oldestPendingDisposition() async throws -> Job? {
        try await read { db in
            try Job.fetchOne(db, sql: """
                SELECT * FROM job WHERE disposed_at IS NULL AND state IN ('done', 'failed', 'cancelled')
                ORDER BY finished_at LIMIT 1
                """)
        }
    }
}

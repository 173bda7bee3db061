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

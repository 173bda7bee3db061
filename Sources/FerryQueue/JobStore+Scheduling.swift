import Foundation
import GRDB

/// Due jobs, for the scheduler.
extension JobStore {
    /// Atomically moves up to `limit` due jobs (oldest due first) to `uploading` and returns them.
    public func claimDue(now: Date, limit: Int, excludingSpools paused: Set<String> = []) async throws -> [Job] {
        guard limit > 0 else { return [] }
        return try await write { db in
            // INDEXED BY: without statistics SQLite prefers job_by_state and sorts every waiting job
            // (50 ms per claim with 100,000 queued); the partial index job_due gives the oldest due
            // jobs in order (0.03 ms).
            var sql = """
                SELECT * FROM job INDEXED BY job_due WHERE state IN ('queued', 'retrying') AND next_attempt_at <= ?
                """
            var arguments: StatementArguments = [now.timeIntervalSince1970]
            if !paused.isEmpty {
                sql += " AND spool NOT IN (\(paused.map { _ in "?" }.joined(separator: ",")))"
                _ = arguments.append(contentsOf: StatementArguments(Array(paused)))
            }
            sql += " ORDER BY next_attempt_at, seq LIMIT ?"
            _ = arguments.append(contentsOf: [limit])
            // Cached statements: compiling costs more than running them (GRDB's authorizer is called
            // for every column a statement reads).
            var jobs = try Job.fetchAll(db.cachedStatement(sql: sql), arguments: arguments)
            let claim = try db.cachedStatement(sql: "UPDATE job SET state = 'uploading', updated_at = ? WHERE seq = ?")
            for index in jobs.indices {
                jobs[index].state = .uploading
                jobs[index].updatedAt = now
                try claim.execute(arguments: [now.timeIntervalSince1970, jobs[index].sequence])
                try JobEvent.record(db, jobs[index], kind: .started, at: now, attempt: jobs[index].attempts + 1)
            }
            return jobs
        }
    }

    /// When the earliest queued or retrying job becomes due (possibly in the past), or `nil` if none waits.
    public func nextDueDate(excludingSpools paused: Set<String> = []) async throws -> Date? {
        try await pool.read { db in
            // INDEXED BY job_due: one index lookup, instead of a walk over job_by_state (30-100 ms with 100,000 queued).
            var sql = "SELECT MIN(next_attempt_at) FROM job INDEXED BY job_due WHERE state IN ('queued', 'retrying')"
            var arguments = StatementArguments()
            if !paused.isEmpty {
                sql += " AND spool NOT IN (\(paused.map { _ in "?" }.joined(separator: ",")))"
                arguments = StatementArguments(Array(paused))
            }
            return try Double.fetchOne(db, sql: sql, arguments: arguments).map(Date.init(timeIntervalSince1970:))
        }
    }
}

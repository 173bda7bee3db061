import Foundation
import GRDB

/// Due jobs, for the scheduler.
extension JobStore {
    /// Atomically moves up to `limit` due jobs of any spool (oldest due first) to `uploading` and
    /// returns them. For tests: it sorts every due job, where the scheduler claims by spool
    /// (``claimDue(now:limit:groups:rotation:)``, one index seek per spool).
    func claimDue(now: Date, limit: Int) async throws -> [Job] {
        guard limit > 0 else { return [] }
        return try await write { db in
            let due = try Job.fetchAll(db, sql: """
                SELECT * FROM job WHERE state IN ('queued', 'retrying') AND next_attempt_at <= ?
                ORDER BY next_attempt_at, seq LIMIT ?
                """, arguments: [now.timeIntervalSince1970, limit])
            return try Self.markClaimed(due, db, now: now)
        }
    }

    /// A spool that may start uploads now, and how many more at most (its own
    /// `max_concurrent_uploads` less those in flight; `Int.max` without one).
    public struct SpoolSlots: Sendable, Hashable {
        public var spool: String
        public var available: Int

        public init(spool: String, available: Int) {
            self.spool = spool
            self.available = available
        }
    }

    /// Claims up to `limit` due jobs in one transaction, group by group (a group: spools of one
    /// priority, highest first): within a group, one job per spool in turn (each spool's oldest due
    /// first), starting at `rotation`, so no spool of a priority waits behind a busier one. Jobs of spools in no group (paused, outside their window, or no longer
    /// configured) stay queued.
    public func claimDue(now: Date, limit: Int, groups: [[SpoolSlots]], rotation: Int) async throws -> [Job] {
        guard limit > 0 else { return [] }
        return try await write { db in
            let one = try db.cachedStatement(sql: """
                SELECT * FROM job INDEXED BY job_due_by_spool WHERE spool = ? AND state IN ('queued', 'retrying') AND next_attempt_at <= ?
                ORDER BY next_attempt_at, seq LIMIT ?
                """)
            var jobs: [Job] = []
            for group in groups where jobs.count < limit {
                // Each spool's oldest due jobs (as many as could be taken), then one of each in turn.
                let order = group.indices.map { group[($0 + rotation) % group.count] }
                var queues = try order.map { slots in
                    try Job.fetchAll(one, arguments: [slots.spool, now.timeIntervalSince1970, min(limit - jobs.count, slots.available)])[...]
                }
                while jobs.count < limit, queues.contains(where: { !$0.isEmpty }) {
                    for index in queues.indices where jobs.count < limit {
                        if let job = queues[index].popFirst() { jobs.append(job) }
                    }
                }
            }
            return try Self.markClaimed(jobs, db, now: now)
        }
    }

    /// Moves `jobs` to `uploading`, each with its `started` event, inside the caller's transaction.
    private static func markClaimed(_ jobs: [Job], _ db: Database, now: Date) throws -> [Job] {
        var jobs = jobs
        let claim = try db.cachedStatement(sql: "UPDATE job SET state = 'uploading', updated_at = ? WHERE seq = ?")
        for index in jobs.indices {
            jobs[index].state = .uploading
            jobs[index].updatedAt = now
            try claim.execute(arguments: [now.timeIntervalSince1970, jobs[index].sequence])
            try JobEvent.record(db, jobs[index], kind: .started, at: now, attempt: jobs[index].attempts + 1)
        }
        return jobs
    }

    /// When the earliest queued or retrying job of `spools` becomes due (possibly in the past), or
    /// `nil` if none waits: one index seek per spool.
    public func nextDueDate(inSpools spools: Set<String>) async throws -> Date? {
        guard !spools.isEmpty else { return nil }
        return try await pool.read { db in
            let first = try db.cachedStatement(sql: """
                SELECT next_attempt_at FROM job INDEXED BY job_due_by_spool WHERE spool = ? AND state IN ('queued', 'retrying')
                ORDER BY next_attempt_at LIMIT 1
                """)
            var earliest: Double?
            for spool in spools {
                if let due = try Double.fetchOne(first, arguments: [spool]), earliest == nil || due < earliest! { earliest = due }
            }
            return earliest.map(Date.init(timeIntervalSince1970:))
        }
    }

    /// Whether any job is queued or retrying, due or not: the first entry of a partial index.
    public func hasWaitingJobs() async throws -> Bool {
        try await pool.read { db in
            // INDEXED BY: the partial index holds exactly the waiting jobs, so its first entry answers
            // (without it SQLite walks job_by_state, 30-100 ms with 100,000 queued).
            try Bool.fetchOne(db, sql: """
                SELECT EXISTS (SELECT 1 FROM job INDEXED BY job_due_by_spool WHERE state IN ('queued', 'retrying'))
                """) ?? false
        }
    }
}

import Foundation
import GRDB

extension JobStore {
    /// What the metrics report about one spool's queue, read at scrape time.
    public struct SpoolTimes: Sendable, Equatable {
        /// When the `max_age` clock of the oldest job waiting to be delivered (`queued`, `uploading`
        /// or `retrying`; not `held`) started; `nil` when none is waiting.
        public var oldestWaiting: Date?
        /// When the last job was delivered (its `finished_at`); `nil` if none ever was.
        public var lastSuccess: Date?

        public init(oldestWaiting: Date? = nil, lastSuccess: Date? = nil) {
            self.oldestWaiting = oldestWaiting
            self.lastSuccess = lastSuccess
        }
    }

    /// The oldest waiting job and the last delivery of each spool named. Two index lookups per
    /// spool (`job_waiting_age`, `job_done_by_spool`), whatever the size of the queue.
    public func spoolTimes(_ spools: [String]) async throws -> [String: SpoolTimes] {
        try await pool.read { db in
            var result: [String: SpoolTimes] = [:]
            for spool in spools {
                let oldest = try Double.fetchOne(db, sql: """
                    SELECT MIN(COALESCE(age_base, created_at)) FROM job
                    WHERE spool = ? AND \(JobPredicate.waiting)
                    """, arguments: [spool])
                let last = try Double.fetchOne(db, sql: """
                    SELECT MAX(finished_at) FROM job WHERE spool = ? AND state = 'done'
                    """, arguments: [spool])
                result[spool] = SpoolTimes(
                    oldestWaiting: oldest.map(Date.init(timeIntervalSince1970:)),
                    lastSuccess: last.map(Date.init(timeIntervalSince1970:)))
            }
            return result
        }
    }

    /// The query plans of ``spoolTimes(_:)``'s statements, for a test that they use their indexes.
    func spoolTimesQueryPlans() async throws -> [String] {
        try await pool.read { db in
            try [
                "SELECT MIN(COALESCE(age_base, created_at)) FROM job WHERE spool = 'x' AND \(JobPredicate.waiting)",
                "SELECT MAX(finished_at) FROM job WHERE spool = 'x' AND state = 'done'",
            ].map { sql in
                try Row.fetchAll(db, sql: "EXPLAIN QUERY PLAN " + sql).map { $0["detail"] as String? ?? "" }.joined(separator: "; ")
            }
        }
    }
}

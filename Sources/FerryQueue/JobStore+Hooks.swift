import Foundation
import GRDB

/// What runs after an outcome (``HookRun``): what is due, and how each run ended.
extension JobStore {
    /// A hook run that is due, with its job.
    public struct DueHook: Sendable {
        /// The run, as it stands.
        public var run: HookRun
        /// Its job, final and disposed of.
        public var job: Job
    }

    /// Pending runs due by `now` whose job's file has been disposed of (a hook sees the file where
    /// it ended up), earliest first; `excluding` the ones already running.
    public func dueHooks(now: Date, limit: Int, excluding running: Set<HookKey>) async throws -> [DueHook] {
        try await read { db in
            let rows = try Row.fetchAll(db, sql: """
                SELECT hook_run.* FROM hook_run JOIN job ON job.seq = hook_run.job_seq
                WHERE hook_run.state = 'pending' AND hook_run.next_at <= ? AND job.disposed_at IS NOT NULL
                    AND job.state IN ('done', 'failed', 'cancelled')
                ORDER BY hook_run.next_at LIMIT ?
                """, arguments: [now.timeIntervalSince1970, limit + running.count])
            var due: [DueHook] = []
            for row in rows where due.count < limit {
                let run = HookRun(row: row)
                guard !running.contains(HookKey(jobSequence: run.jobSequence, kind: run.kind)) else { continue }
                guard let job = try Job.fetchOne(db, key: run.jobSequence) else { continue }
                due.append(DueHook(run: run, job: job))
            }
            return due
        }
    }

    /// When the next pending run whose file is disposed of is due, if there is one (`excluding` the
    /// ones already running).
    public func nextHookDue(excluding running: Set<HookKey>) async throws -> Date? {
        try await read { db in
            let rows = try Row.fetchAll(db, sql: """
                SELECT hook_run.job_seq, hook_run.kind, hook_run.next_at FROM hook_run JOIN job ON job.seq = hook_run.job_seq
                WHERE hook_run.state = 'pending' AND job.disposed_at IS NOT NULL AND job.state IN ('done', 'failed', 'cancelled')
                ORDER BY hook_run.next_at LIMIT ?
                """, arguments: [running.count + 1])
            return rows.first { row in
                !running.contains(HookKey(jobSequence: row["job_seq"], kind: row["kind"]))
            }.map { Date(timeIntervalSince1970: $0["next_at"]) }
        }
    }

    /// Records how a run ended (its new state, attempts, due time and last result), durably, if the
    /// row is still the `previous` one; returns whether it was. A row queued anew meanwhile (the job
    /// failed again after an operator's retry) is left as it is: that outcome's run is still to come.
    @discardableResult
    public func recordHookRun(_ run: HookRun, replacing previous: HookRun) async throws -> Bool {
        try await write { db in
            try db.execute(sql: """
                UPDATE hook_run SET state = ?, attempts = ?, next_at = ?, last_exit = ?, last_error = ?, last_output = ?,
                    updated_at = ? WHERE job_seq = ? AND kind = ? AND state = 'pending' AND updated_at = ?
                """, arguments: [run.state, run.attempts, run.nextAt.timeIntervalSince1970, run.lastExit, run.lastError,
                                 run.lastOutput, run.updatedAt.timeIntervalSince1970, run.jobSequence, run.kind,
                                 previous.updatedAt.timeIntervalSince1970])
            return db.changesCount > 0
        }
    }

    /// The runs on record for `job`, hooks first.
    public func hookRuns(of job: Job) async throws -> [HookRun] {
        try await read { db in
            try Row.fetchAll(db, sql: "SELECT * FROM hook_run WHERE job_seq = ? ORDER BY kind", arguments: [job.sequence])
                .map(HookRun.init(row:))
        }
    }

    /// Makes `job`'s runs that gave up (of `kind`, or all) pending again, due now, with their attempts
    /// counted from zero. Returns the kinds it reopened.
    public func retryHooks(of job: Job, kind: HookRun.Kind?, now: Date) async throws -> [HookRun.Kind] {
        try await write { db in
            var sql = "UPDATE hook_run SET state = 'pending', attempts = 0, next_at = ?, updated_at = ? WHERE job_seq = ? AND state = 'gave_up'"
            var arguments: StatementArguments = [now.timeIntervalSince1970, now.timeIntervalSince1970, job.sequence]
            if let kind {
                sql += " AND kind = ?"
                _ = arguments.append(contentsOf: [kind])
            }
            return try HookRun.Kind.fetchAll(db, sql: sql + " RETURNING kind", arguments: arguments)
        }
    }
}

import Foundation
import GRDB

/// Queries and operator actions behind the control socket.
extension JobStore {
    // MARK: - Reading

    /// Jobs, newest first, filtered; `more` says whether more than `limit` matched.
    public func jobs(states: [JobState]?, spool: String?, since: Date?, limit: Int) async throws -> (jobs: [Job], more: Bool) {
        try await read { db in
            var clauses: [String] = []
            var arguments = StatementArguments()
            if let states, !states.isEmpty {
                clauses.append("state IN (\(states.map { _ in "?" }.joined(separator: ",")))")
                _ = arguments.append(contentsOf: StatementArguments(states.map(\.rawValue)))
            }
            if let spool {
                clauses.append("spool = ?")
                _ = arguments.append(contentsOf: [spool])
            }
            if let since {
                clauses.append("created_at >= ?")
                _ = arguments.append(contentsOf: [since.timeIntervalSince1970])
            }
            var sql = "SELECT * FROM job"
            if !clauses.isEmpty { sql += " WHERE " + clauses.joined(separator: " AND ") }
            sql += " ORDER BY seq DESC LIMIT ?"
            _ = arguments.append(contentsOf: [limit + 1])
            let jobs = try Job.fetchAll(db, sql: sql, arguments: arguments)
            return (Array(jobs.prefix(limit)), jobs.count > limit)
        }
    }

    /// How looking a job up by a (possibly shortened) id went.
    public enum Lookup: Sendable {
        case found(Job)
        case notFound
        /// The prefix matches more than one job.
        case ambiguous
    }

    /// The job whose id is `text`, or whose id starts with `text` if exactly one does.
    public func lookup(_ text: String) async throws -> Lookup {
        let key = text.uppercased()
        guard !key.isEmpty, key.allSatisfy({ $0.isASCII && ($0.isLetter || $0.isNumber) }) else { return .notFound }
        return try await read { db in
            if let job = try Job.fetchOne(db, sql: "SELECT * FROM job WHERE id = ?", arguments: [key]) { return .found(job) }
            let matches = try Job.fetchAll(db, sql: "SELECT * FROM job WHERE id >= ? AND id < ? ORDER BY seq LIMIT 2",
                                           arguments: [key, key + "\u{7F}"])
            switch matches.count {
            case 0: return .notFound
            case 1: return .found(matches[0])
            default: return .ambiguous
            }
        }
    }

    /// Jobs in `states`, oldest first, optionally in one spool (bulk actions).
    public func jobs(inStates states: [JobState], spool: String?, limit: Int = 100_000) async throws -> [Job] {
        try await read { db in
            var sql = "SELECT * FROM job WHERE state IN (\(states.map { _ in "?" }.joined(separator: ",")))"
            var arguments = StatementArguments(states.map(\.rawValue))
            if let spool {
                sql += " AND spool = ?"
                _ = arguments.append(contentsOf: [spool])
            }
            sql += " ORDER BY seq LIMIT ?"
            _ = arguments.append(contentsOf: [limit])
            return try Job.fetchAll(db, sql: sql, arguments: arguments)
        }
    }

    /// How many jobs are in `states`, optionally in one spool.
    public func count(inStates states: [JobState], spool: String? = nil) async throws -> Int {
        try await read { db in
            var sql = "SELECT COUNT(*) FROM job WHERE state IN (\(states.map { _ in "?" }.joined(separator: ",")))"
            var arguments = StatementArguments(states.map(\.rawValue))
            if let spool {
                sql += " AND spool = ?"
                _ = arguments.append(contentsOf: [spool])
            }
            return try Int.fetchOne(db, sql: sql, arguments: arguments) ?? 0
        }
    }

    // MARK: - Events

    /// Up to `limit` events after `id`, oldest first.
    public func events(after id: Int64, limit: Int) async throws -> [JobEvent] {
        try await read { db in
            try Row.fetchAll(db, sql: """
                SELECT event.*, job.id AS job_id, job.spool, job.relative_path,
                    CASE WHEN event.kind = 'done' THEN job.response_headers END AS response_headers
                FROM event JOIN job ON job.seq = event.job_seq
                WHERE event.id > ? ORDER BY event.id LIMIT ?
                """, arguments: [id, limit]).map(JobEvent.init(row:))
        }
    }

    /// The newest event id ever assigned (0 if none), and the oldest still kept (`nil` if none is kept).
    public func eventBounds() async throws -> (newest: Int64, oldest: Int64?) {
        try await read { db in
            let newest = try Int64.fetchOne(db, sql: "SELECT seq FROM sqlite_sequence WHERE name = 'event'") ?? 0
            let oldest = try Int64.fetchOne(db, sql: "SELECT MIN(id) FROM event")
            return (newest, oldest)
        }
    }

    /// Deletes all but the newest `keep` events, at most `batch` in one transaction, so that the
    /// queue's other writes go on between them (an hour of small files at full speed leaves
    /// millions); returns how many were deleted.
    @discardableResult
    public func pruneEvents(keep: Int64, batch: Int64 = 10_000) async throws -> Int {
        var total = 0
        while true {
            let deleted = try await write { db in
                try db.execute(
                    sql: "DELETE FROM event WHERE id <= min((SELECT MAX(id) FROM event) - ?, (SELECT MIN(id) FROM event) + ? - 1)",
                    arguments: [keep, batch])
                return db.changesCount
            }
            total += deleted
            // A stop waits for one batch at most (the first run after an upgrade may have millions).
            if deleted < batch || Task.isCancelled { return total }
        }
    }

    // MARK: - Operator actions

    /// What an operator action did to a job.
    public enum ActionOutcome: Sendable {
        /// The job is now in the requested state (it may already have been).
        case done(Job)
        /// The job is uploading right now: the pipeline has to stop it first.
        case uploading(Job)
        /// The job's state does not allow the action.
        case notAllowed(Job)
    }

    /// Holds a queued or retrying job: it is not attempted, and does not age, until released.
    public func hold(_ job: Job, now: Date, reason: String) async throws -> ActionOutcome {
        try await act(on: job, allowedFrom: [.queued, .retrying], already: [.held]) { db, job in
            job.state = .held
            job.heldAt = now
            job.nextAttemptAt = nil
            job.updatedAt = now
            try job.update(db)
            try JobEvent.record(db, job, kind: .held, at: now, message: reason)
        }
    }

    /// Releases a held job: queued, due now. The time it spent on hold does not count toward `max_age`.
    public func release(_ job: Job, now: Date, reason: String) async throws -> ActionOutcome {
        try await act(on: job, allowedFrom: [.held], already: [.queued, .retrying, .uploading]) { db, job in
            if let heldAt = job.heldAt {
                job.ageBase = job.ageStart.addingTimeInterval(max(0, now.timeIntervalSince(heldAt)))
            }
            job.state = .queued
            job.heldAt = nil
            job.nextAttemptAt = now
            job.updatedAt = now
            try job.update(db)
            try JobEvent.record(db, job, kind: .released, at: now, message: reason)
        }
    }

    /// Queues a held or retrying job now, with a fresh allowance of attempts and `max_age`.
    /// (A failed job is brought back with ``reopen(_:now:)`` and ``requeueReopened(_:identity:now:reason:)``.)
    public func retryNow(_ job: Job, now: Date, reason: String) async throws -> ActionOutcome {
        try await act(on: job, allowedFrom: [.held, .retrying, .queued], already: []) { db, job in
            job.state = .queued
            job.heldAt = nil
            job.nextAttemptAt = now
            job.attemptBase = job.attempts
            job.ageBase = now
            job.updatedAt = now
            try job.update(db)
            try JobEvent.record(db, job, kind: .retried, at: now, message: reason)
        }
    }

    /// Cancels a queued, retrying or held job; its file's disposition (to the failed directory) is
    /// then pending, as for a failed job.
    public func cancel(_ job: Job, now: Date, reason: String, hooks: [HookRun.Kind] = []) async throws -> ActionOutcome {
        try await act(on: job, allowedFrom: [.queued, .retrying, .held], already: [.cancelled]) { db, job in
            job.state = .cancelled
            job.heldAt = nil
            job.nextAttemptAt = nil
            job.finishedAt = now
            job.lastError = reason
            job.updatedAt = now
            try job.update(db)
            try JobEvent.record(db, job, kind: .cancelled, at: now, message: reason)
            try HookRun.schedule(db, jobSequence: job.sequence!, kinds: hooks, now: now)
        }
    }

    /// Why a failed job cannot be reopened.
    public enum ReopenError: Error, Sendable {
        /// The job is not failed (any more).
        case notFailed(JobState)
        /// Another job for the same file is active; it carries the file now.
        case pathBusy
    }

    /// First step of retrying a failed job: reserves its path by moving it to `held` (so neither the
    /// scheduler nor the watcher acts on it) while the caller moves the file back into the spool.
    public func reopen(_ job: Job, now: Date) async throws -> Job {
        try await write { db in
            guard var current = try Job.fetchOne(db, key: job.sequence) else { throw ReopenError.notFailed(job.state) }
            guard current.state == .failed || current.state == .cancelled else { throw ReopenError.notFailed(current.state) }
            current.state = .held
            current.heldAt = now
            current.updatedAt = now
            do {
                try current.update(db)
            } catch let error as DatabaseError where error.resultCode == .SQLITE_CONSTRAINT {
                throw ReopenError.pathBusy
            }
            return current
        }
    }

    /// Undoes ``reopen(_:now:)`` when the file could not be brought back.
    public func abandonReopen(_ job: Job, previous: JobState, now: Date) async throws {
        try await write { db in
            try db.execute(sql: "UPDATE job SET state = ?, held_at = NULL, updated_at = ? WHERE seq = ? AND state = 'held'",
                           arguments: [previous.rawValue, now.timeIntervalSince1970, job.sequence])
        }
    }

    /// Jobs a retry reopened (``reopen(_:now:)``) and did not finish: ferryd stopped between the
    /// two steps. An operator's hold never applies to a finished job, so `held` with a finish time
    /// is only this. Each comes with the state it was retried from.
    public func interruptedRetries() async throws -> [(job: Job, previous: JobState)] {
        try await read { db in
            let jobs = try Job.fetchAll(db, sql: "SELECT * FROM job WHERE state = 'held' AND finished_at IS NOT NULL ORDER BY seq")
            return try jobs.map { job in
                let kind = try String.fetchOne(db, sql: """
                    SELECT kind FROM event WHERE job_seq = ? AND kind IN ('failed', 'cancelled') ORDER BY id DESC LIMIT 1
                    """, arguments: [job.sequence])
                return (job, kind == JobEvent.Kind.cancelled.rawValue ? JobState.cancelled : .failed)
            }
        }
    }

    /// Second step of retrying a failed job: its file is back in the spool (as `identity`); queue it
    /// now with a fresh allowance of attempts and `max_age`, under the same id (`Idempotency-Key`).
    public func requeueReopened(_ job: Job, identity: FileIdentity, now: Date, reason: String) async throws -> Job {
        try await write { db in
            guard var current = try Job.fetchOne(db, key: job.sequence), current.state == .held else {
                throw ReopenError.notFailed(job.state)
            }
            // What was still to follow the failure is moot: the job has another outcome to come.
            try db.execute(sql: "DELETE FROM hook_run WHERE job_seq = ? AND state != 'succeeded'", arguments: [current.sequence])
            current.state = .queued
            if current.identity != identity {
                // A different file now: a resumable upload of the old bytes must not be continued.
                current.upload = nil
            }
            current.identity = identity
            current.heldAt = nil
            current.finishedAt = nil
            current.disposition = nil
            current.disposedAt = nil
            current.finalPath = nil
            current.nextAttemptAt = now
            current.attemptBase = current.attempts
            current.ageBase = now
            current.updatedAt = now
            try current.update(db)
            try JobEvent.record(db, current, kind: .retried, at: now, message: reason)
            return current
        }
    }

    private func act(
        on job: Job, allowedFrom: [JobState], already: [JobState],
        _ change: @escaping @Sendable (Database, inout Job) throws -> Void
    ) async throws -> ActionOutcome {
        try await write { db in
            guard var current = try Job.fetchOne(db, key: job.sequence) else { return .notAllowed(job) }
            // Reopened by a retry that is bringing its file back (``reopen(_:now:)``): the retry
            // decides what comes next, or the next start finishes it.
            if current.state == .held && current.finishedAt != nil { return .notAllowed(current) }
            if allowedFrom.contains(current.state) {
                try change(db, &current)
                return .done(current)
            }
            if already.contains(current.state) { return .done(current) }
            if current.state == .uploading { return .uploading(current) }
            return .notAllowed(current)
        }
    }

    // MARK: - Pause

    /// The spools paused by an operator (`"*"` means all).
    public func pausedSpools() async throws -> Set<String> {
        try await read { db in Set(try String.fetchAll(db, sql: "SELECT spool FROM paused_spool")) }
    }

    /// Pauses or resumes `spool` (`"*"`: all; resuming all also clears every single-spool pause).
    public func setPaused(_ spool: String, _ paused: Bool, now: Date) async throws {
        try await write { db in
            if paused {
                try db.execute(sql: "INSERT OR IGNORE INTO paused_spool (spool, paused_at) VALUES (?, ?)",
                               arguments: [spool, now.timeIntervalSince1970])
            } else if spool == "*" {
                try db.execute(sql: "DELETE FROM paused_spool")
            } else {
                try db.execute(sql: "DELETE FROM paused_spool WHERE spool = ?", arguments: [spool])
            }
        }
    }
}

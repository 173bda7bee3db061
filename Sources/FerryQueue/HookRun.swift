import Foundation
import GRDB

/// Something that runs after a job's outcome, at least once: a spool's hook, or the result file.
/// A row of `hook_run`, written in the transaction that records the outcome; it is run once the
/// job's file has been disposed of, and again after a failure or a crash until it succeeds or
/// gives up.
public struct HookRun: Sendable, Hashable {
    /// What runs.
    public enum Kind: String, Sendable, Hashable, CaseIterable, DatabaseValueConvertible {
        /// The spool's `on_delivered` hook.
        case delivered
        /// The spool's `on_failed` hook (a failed or cancelled job).
        case failed
        /// `<name>.result.json` in the spool's `result_directory`.
        case result
    }

    /// Where it stands.
    public enum State: String, Sendable, Hashable, DatabaseValueConvertible {
        /// Not yet run, or to be run again at ``nextAt``.
        case pending
        /// Ran and succeeded (exit 0, or the result file written).
        case succeeded
        /// Failed ``attempts`` times, the spool's `hook_max_attempts`; `ferryctl retry-hook` runs it again.
        case gaveUp = "gave_up"
    }

    /// The job's row (`job.seq`).
    public var jobSequence: Int64
    /// What runs.
    public var kind: Kind
    /// Where it stands.
    public var state: State
    /// Runs that ended (a run cut short by a crash is not counted: it runs again).
    public var attempts: Int
    /// When it is due, while pending.
    public var nextAt: Date
    /// The last run's exit status, if it exited.
    public var lastExit: Int?
    /// Why the last run failed (a timeout, a signal, a program that could not start), if it did.
    public var lastError: String?
    /// The last lines of the last run's output (standard output and error), bounded.
    public var lastOutput: String?
    /// When the row last changed (queued, or a run recorded).
    public var updatedAt: Date

    public init(
        jobSequence: Int64, kind: Kind, state: State = .pending, attempts: Int = 0, nextAt: Date, lastExit: Int? = nil,
        lastError: String? = nil, lastOutput: String? = nil, updatedAt: Date
    ) {
        self.jobSequence = jobSequence
        self.kind = kind
        self.state = state
        self.attempts = attempts
        self.nextAt = nextAt
        self.lastExit = lastExit
        self.lastError = lastError
        self.lastOutput = lastOutput
        self.updatedAt = updatedAt
    }

    init(row: Row) {
        jobSequence = row["job_seq"]
        kind = row["kind"]
        state = row["state"]
        attempts = row["attempts"]
        nextAt = Date(timeIntervalSince1970: row["next_at"])
        lastExit = row["last_exit"]
        lastError = row["last_error"]
        lastOutput = row["last_output"]
        updatedAt = Date(timeIntervalSince1970: row["updated_at"])
    }

    /// Queues `kinds` for `job` inside the caller's transaction (the one recording the outcome);
    /// a kind already on record (a retried job) is pending again from scratch.
    static func schedule(_ db: Database, jobSequence: Int64, kinds: [Kind], now: Date) throws {
        for kind in kinds {
            try db.execute(sql: """
                INSERT INTO hook_run (job_seq, kind, state, attempts, next_at, updated_at) VALUES (?, ?, 'pending', 0, ?, ?)
                ON CONFLICT (job_seq, kind) DO UPDATE SET state = 'pending', attempts = 0, next_at = excluded.next_at,
                    last_exit = NULL, last_error = NULL, last_output = NULL, updated_at = excluded.updated_at
                """, arguments: [jobSequence, kind, now.timeIntervalSince1970, now.timeIntervalSince1970])
        }
    }
}

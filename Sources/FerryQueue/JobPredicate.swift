/// SQL conditions on a job's state that the queue's statements share with its partial indexes.
///
/// Each is written as `=` comparisons joined by `OR`, not as `state IN (...)`: SQLite evaluates a
/// list of more than two constants by building a temporary b-tree each time the statement runs,
/// and a write to `job` evaluates the condition of every partial index it may affect, for the
/// row before and after. With three such indexes each claim, outcome and disposition built six
/// of them: an `UPDATE` of a job's state took 28 µs of CPU, 9.8 µs without. A query uses a
/// partial index only when its own condition contains the index's, so the indexes (migration v12)
/// and the queries that need them use these same strings.
enum JobPredicate {
    /// Not final: `queued`, `uploading`, `retrying`, `held` (the index `job_active_path`).
    static let active = "(state = 'queued' OR state = 'uploading' OR state = 'retrying' OR state = 'held')"
    /// Waiting to be delivered, by its `max_age` clock: `queued`, `uploading`, `retrying` (`job_waiting_age`).
    static let waiting = "(state = 'queued' OR state = 'uploading' OR state = 'retrying')"
    /// Final, and its file not dealt with yet (`job_undisposed`).
    static let undisposed = "disposed_at IS NULL AND (state = 'done' OR state = 'failed' OR state = 'cancelled')"
    /// Final: `done`, `failed`, `cancelled`, `superseded`.
    static let final = "(state = 'done' OR state = 'failed' OR state = 'cancelled' OR state = 'superseded')"
}

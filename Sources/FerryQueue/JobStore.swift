import Foundation
import GRDB

/// The durable job queue: one SQLite database (WAL mode) in the state directory.
///
/// Every commit is made with `synchronous = FULL`, so once a method that records a final state
/// returns, that state survives a crash or a power cut; only then does the caller touch the source
/// file. Queries that feed the scheduler are bounded (`LIMIT`), so memory does not grow with the
/// number of queued jobs.
public final class JobStore: Sendable {
    /// The database file.
    public let path: String
    let pool: DatabasePool
    /// Runs ``write(_:)``'s transactions, committing concurrent writes together.
    let committer: GroupCommitter
    /// Rung after every write: `watch` streams read the new events then.
    public let changes = ChangeSignal()

    /// How much of a response body is kept with a job.
    public static let responseExcerptLimit = 64 * 1024

    /// Opens (creating if needed) the database at `path`, checks it, and migrates it to the current schema.
    /// With `readOnly`, opens an existing database for reading only (tests, diagnostics), beside a running daemon.
    /// - Throws: ``QueueError/corrupt(path:details:)`` for a damaged file, never silently replacing it.
    public init(path: String, readOnly: Bool = false) throws(QueueError) {
        self.path = path
        var configuration = Configuration()
        configuration.busyMode = .timeout(5)
        configuration.maximumReaderCount = 4
        configuration.label = "ferry-queue"
        configuration.readonly = readOnly
        configuration.prepareDatabase { db in
            try db.execute(sql: "PRAGMA foreign_keys = ON")
        }
        do {
            // Checked before the pool opens: opening a pool may write (GRDB makes sure a WAL file
            // exists by creating and dropping a table), and nothing may write to a damaged file.
            if !readOnly { try Self.checkIntegrity(path) }
            pool = try DatabasePool(path: path, configuration: configuration)
            committer = GroupCommitter(pool: pool)
            if readOnly { return }
            // GRDB chooses synchronous=NORMAL for WAL; Ferry's promise needs every commit durable.
            try pool.writeWithoutTransaction { db in
                try db.execute(sql: "PRAGMA synchronous = FULL")
            }
            let migrator = Self.migrator
            let unknown = try pool.read { db in
                try migrator.hasBeenSuperseded(db)
                    ? try migrator.appliedIdentifiers(db).subtracting(migrator.migrations).sorted().first
                    : nil
            }
            if let unknown { throw QueueError.newerSchema(path: path, migration: unknown) }
            try migrator.migrate(pool)
        } catch {
            throw QueueError.classify(error, path: path)
        }
    }

    /// Runs `PRAGMA quick_check` on an existing database through a read-only connection, so a
    /// damaged file is refused before anything writes to it. A missing or empty file is a new queue.
    static func checkIntegrity(_ path: String) throws {
        guard let size = (try? FileManager.default.attributesOfItem(atPath: path))?[.size] as? Int, size > 0 else { return }
        var configuration = Configuration()
        configuration.readonly = true
        configuration.busyMode = .timeout(5)
        configuration.label = "ferry-queue-check"
        let queue = try DatabaseQueue(path: path, configuration: configuration)
        defer { try? queue.close() }
        let check = try queue.read { db in try String.fetchAll(db, sql: "PRAGMA quick_check") }
        if check != ["ok"] {
            throw QueueError.corrupt(path: path, details: check.prefix(3).joined(separator: "; "))
        }
    }

    /// The schema's history; a migration, once released, is never edited.
    static var migrator: DatabaseMigrator {
        var migrator = DatabaseMigrator()
        migrator.registerMigration("v1: jobs and attempts") { db in
            try db.execute(sql: """
                CREATE TABLE job (
                    seq INTEGER PRIMARY KEY AUTOINCREMENT,
                    id TEXT NOT NULL UNIQUE,
                    spool TEXT NOT NULL,
                    relative_path BLOB NOT NULL,
                    device INTEGER NOT NULL,
                    inode INTEGER NOT NULL,
                    size INTEGER NOT NULL,
                    mtime_ns INTEGER NOT NULL,
                    state TEXT NOT NULL,
                    boundary TEXT NOT NULL,
                    attempts INTEGER NOT NULL DEFAULT 0,
                    created_at REAL NOT NULL,
                    updated_at REAL NOT NULL,
                    next_attempt_at REAL,
                    finished_at REAL,
                    last_error TEXT,
                    response_status INTEGER,
                    response_body BLOB,
                    response_content_type TEXT,
                    disposition TEXT,
                    disposed_at REAL,
                    final_path BLOB
                );
                -- At most one job per file in the spool is in flight: the database, not the
                -- watcher, guarantees a file is never queued twice.
                CREATE UNIQUE INDEX job_active_path ON job(spool, relative_path)
                    WHERE state IN ('queued', 'uploading', 'retrying');
                CREATE INDEX job_by_path ON job(spool, relative_path, seq);
                CREATE INDEX job_due ON job(next_attempt_at, seq)
                    WHERE state IN ('queued', 'retrying');
                CREATE INDEX job_by_state ON job(state, seq);
                CREATE INDEX job_undisposed ON job(seq)
                    WHERE disposed_at IS NULL AND state IN ('done', 'failed');

                CREATE TABLE attempt (
                    seq INTEGER PRIMARY KEY AUTOINCREMENT,
                    job_seq INTEGER NOT NULL REFERENCES job(seq) ON DELETE CASCADE,
                    number INTEGER NOT NULL,
                    started_at REAL NOT NULL,
                    duration REAL NOT NULL,
                    http_status INTEGER,
                    error TEXT,
                    bytes_sent INTEGER NOT NULL,
                    outcome TEXT NOT NULL
                );
                CREATE INDEX attempt_by_job ON attempt(job_seq, seq);
                """)
        }
        migrator.registerMigration("v2: hold, cancel, events, pause") { db in
            try db.execute(sql: """
                ALTER TABLE job ADD COLUMN held_at REAL;
                ALTER TABLE job ADD COLUMN age_base REAL;
                ALTER TABLE job ADD COLUMN attempt_base INTEGER NOT NULL DEFAULT 0;
                -- A held job still owns its file in the spool.
                DROP INDEX job_active_path;
                CREATE UNIQUE INDEX job_active_path ON job(spool, relative_path)
                    WHERE state IN ('queued', 'uploading', 'retrying', 'held');
                DROP INDEX job_undisposed;
                CREATE INDEX job_undisposed ON job(seq)
                    WHERE disposed_at IS NULL AND state IN ('done', 'failed', 'cancelled');
                CREATE INDEX job_by_created ON job(created_at);

                -- Every state change, written in the transaction that makes it: `watch` replays
                -- from here, so a client that reconnects misses nothing.
                CREATE TABLE event (
                    id INTEGER PRIMARY KEY AUTOINCREMENT,
                    at REAL NOT NULL,
                    job_seq INTEGER NOT NULL REFERENCES job(seq) ON DELETE CASCADE,
                    kind TEXT NOT NULL,
                    state TEXT NOT NULL,
                    attempt INTEGER,
                    http_status INTEGER,
                    message TEXT
                );

                -- Spools paused by an operator ('*' pauses all); a pause survives a restart.
                CREATE TABLE paused_spool (
                    spool TEXT PRIMARY KEY,
                    paused_at REAL NOT NULL
                );
                """)
        }
        migrator.registerMigration("v3: metrics indexes") { db in
            try db.execute(sql: """
                -- The oldest job waiting to be delivered, per spool, by its max_age clock (metrics).
                CREATE INDEX job_waiting_age ON job(spool, COALESCE(age_base, created_at))
                    WHERE state IN ('queued', 'uploading', 'retrying');
                -- The last delivery per spool (metrics).
                CREATE INDEX job_done_by_spool ON job(spool, finished_at) WHERE state = 'done';
                """)
        }
        migrator.registerMigration("v4: counts index") { db in
            try db.execute(sql: """
                -- `status`, the STATUS= line and the ferry_jobs gauge count jobs by state and spool:
                -- a scan of this small covering index instead of the whole table (145 ms → a few
                -- ms with 100,000 jobs).
                CREATE INDEX job_by_state_spool ON job(state, spool);
                """)
        }
        migrator.registerMigration("v5: resumable uploads") { db in
            try db.execute(sql: """
                -- tus: the upload the server created for the job, the offset it confirmed and when
                -- it expires; kept the moment each is known, so a restart resumes rather than resends.
                ALTER TABLE job ADD COLUMN upload_url TEXT;
                ALTER TABLE job ADD COLUMN upload_offset INTEGER;
                ALTER TABLE job ADD COLUMN upload_expires REAL;
                ALTER TABLE job ADD COLUMN upload_endpoint TEXT;
                """)
        }
        return migrator
    }

    /// Runs a write transaction that a cancelled caller cannot abandon half-way: an outcome that
    /// decides the fate of a file (a 2xx, an interruption at shutdown) is recorded even while the task
    /// that learned it is being cancelled. Writes that arrive together are committed together
    /// (``GroupCommitter``: each in its own savepoint, one durable `COMMIT` for the group); each
    /// returns only once its transaction is committed, as before.
    func write<T: Sendable>(_ updates: @escaping @Sendable (Database) throws -> T) async throws -> T {
        defer { changes.notify() }
        return try await committer.write(updates)
    }

    /// A read that a cancelled caller still completes (a sidecar written during shutdown still lists
    /// the attempts).
    func read<T: Sendable>(_ value: @escaping @Sendable (Database) throws -> T) async throws -> T {
        let pool = self.pool
        return try await Task.detached { try await pool.read(value) }.value
    }

    // MARK: - Intake

    /// A file found in a spool, not yet known to be queued.
    public struct DiscoveredFile: Sendable, Hashable {
        public var spool: String
        public var relativePath: [UInt8]
        public var identity: FileIdentity
        public init(spool: String, relativePath: [UInt8], identity: FileIdentity) {
            self.spool = spool
            self.relativePath = relativePath
            self.identity = identity
        }
    }

    /// Queues each file that is not already queued or already handled, in one transaction, and
    /// returns the new jobs. A file is already handled when the latest job for its path is still
    /// active, still being disposed of, or was deliberately left in place (`keep`, or changed during
    /// its upload) with this very identity.
    public func enqueue(
        _ files: [DiscoveredFile], now: Date, notBefore: Date? = nil, makeBoundary: @escaping @Sendable () -> String
    ) async throws -> [Job] {
        guard !files.isEmpty else { return [] }
        return try await write { db in
            var created: [Job] = []
            let latest = try db.cachedStatement(sql: """
                SELECT state, device, inode, size, mtime_ns, disposition, disposed_at
                FROM job WHERE spool = ? AND relative_path = ? ORDER BY seq DESC LIMIT 1
                """)
            for file in files {
                latest.setUncheckedArguments([file.spool, Data(file.relativePath)])
                if let row = try Row.fetchOne(latest) {
                    let state: JobState = row["state"]
                    if !state.isFinal { continue }
                    if row["disposed_at"] as Double? == nil { continue }
                    let identity = FileIdentity(
                        device: UInt64(bitPattern: row["device"]), inode: UInt64(bitPattern: row["inode"]),
                        size: row["size"], modificationTime: row["mtime_ns"])
                    let disposition = (row["disposition"] as String?).flatMap(Disposition.init(rawValue:))
                    let leftInPlace = disposition == .kept || disposition == .left
                    if leftInPlace && identity == file.identity { continue }
                }
                var job = Job(
                    id: JobID.generate(milliseconds: UInt64(max(0, now.timeIntervalSince1970 * 1000))),
                    spool: file.spool, relativePath: file.relativePath, identity: file.identity,
                    boundary: makeBoundary(), now: now)
                if let notBefore { job.nextAttemptAt = notBefore }
                try job.insert(db)
                try JobEvent.record(db, job, kind: .queued, at: now)
                created.append(job)
            }
            return created
        }
    }

    // MARK: - Scheduling

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
            var jobs = try Job.fetchAll(db, sql: sql, arguments: arguments)
            for index in jobs.indices {
                jobs[index].state = .uploading
                jobs[index].updatedAt = now
                try db.execute(
                    sql: "UPDATE job SET state = 'uploading', updated_at = ? WHERE seq = ?",
                    arguments: [now.timeIntervalSince1970, jobs[index].sequence])
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

    // MARK: - Outcomes

    /// How an attempt changes its job.
    public enum Transition: Sendable {
        /// The server accepted the file; the source's disposition is still to be applied.
        case succeeded(status: Int, body: [UInt8], contentType: String?)
        /// Retry no earlier than `at`.
        case retry(at: Date, error: String, status: Int?, body: [UInt8]?, contentType: String?)
        /// Give up; the source goes to the failed directory.
        case failed(error: String, status: Int?, body: [UInt8]?, contentType: String?)
        /// The attempt was cut short through no fault of the server (shutdown, source changed);
        /// queue again at `at` without counting it.
        case interrupted(at: Date, reason: String)
        /// An operator held the job while it was uploading; the attempt does not count.
        case held(reason: String)
        /// An operator cancelled the job while it was uploading; the attempt does not count and the
        /// file's disposition (to the failed directory) is still to be applied.
        case cancelled(reason: String)
    }

    /// Records an attempt and its effect on the job in one durable transaction, and returns the updated job.
    @discardableResult
    public func finish(
        _ job: Job, startedAt: Date, now: Date, bytesSent: Int64, transition: Transition
    ) async throws -> Job {
        var job = job
        let sequence = job.sequence!
        let counts: Bool
        var attempt = Attempt(
            jobSequence: sequence, number: job.attempts + 1, startedAt: startedAt,
            duration: max(0, now.timeIntervalSince(startedAt)), httpStatus: nil, error: nil,
            bytesSent: bytesSent, outcome: .success)
        job.updatedAt = now
        switch transition {
        case .succeeded(let status, let body, let contentType):
            counts = true
            attempt.httpStatus = status
            job.state = .done
            job.finishedAt = now
            job.nextAttemptAt = nil
            job.keepResponse(status: status, body: body, contentType: contentType)
            job.lastError = nil
        case .retry(let at, let error, let status, let body, let contentType):
            counts = true
            attempt.outcome = .retry
            attempt.httpStatus = status
            attempt.error = error
            job.state = .retrying
            job.nextAttemptAt = at
            job.lastError = error
            job.keepResponse(status: status, body: body, contentType: contentType)
        case .failed(let error, let status, let body, let contentType):
            counts = true
            attempt.outcome = .failure
            attempt.httpStatus = status
            attempt.error = error
            job.state = .failed
            job.finishedAt = now
            job.nextAttemptAt = nil
            job.lastError = error
            job.keepResponse(status: status, body: body, contentType: contentType)
        case .interrupted(let at, let reason):
            counts = false
            attempt.outcome = .interrupted
            attempt.error = reason
            job.state = .queued
            job.nextAttemptAt = at
        case .held(let reason):
            counts = false
            attempt.outcome = .interrupted
            attempt.error = reason
            job.state = .held
            job.heldAt = now
            job.nextAttemptAt = nil
        case .cancelled(let reason):
            counts = false
            attempt.outcome = .interrupted
            attempt.error = reason
            job.state = .cancelled
            job.finishedAt = now
            job.nextAttemptAt = nil
            job.lastError = reason
        }
        if counts { job.attempts += 1 }
        let updated = job
        let record = attempt
        let event: (JobEvent.Kind, String?) = switch transition {
        case .succeeded: (.done, nil)
        case .retry(_, let error, _, _, _): (.retry, error)
        case .failed(let error, _, _, _): (.failed, error)
        case .interrupted(_, let reason): (.requeued, reason)
        case .held(let reason): (.held, reason)
        case .cancelled(let reason): (.cancelled, reason)
        }
        try await write { db in
            try record.insert(db)
            try updated.update(db)
            try JobEvent.record(db, updated, kind: event.0, at: now, attempt: record.number, status: record.httpStatus, message: event.1)
        }
        return updated
    }

    /// Fails a job without an attempt (the source vanished or cannot be read, or it aged out while waiting).
    @discardableResult
    public func fail(_ job: Job, now: Date, error: String) async throws -> Job {
        var job = job
        job.state = .failed
        job.finishedAt = now
        job.updatedAt = now
        job.nextAttemptAt = nil
        job.lastError = error
        let updated = job
        try await write { db in
            try updated.update(db)
            try JobEvent.record(db, updated, kind: .failed, at: now, message: error)
        }
        return updated
    }

    /// Ends a job whose file changed before it was delivered, and queues the new version as a new
    /// job (due at `notBefore`, to let a writer finish), in one transaction. Returns the new job.
    /// The new job has its own id: the server sees new content under a new `Idempotency-Key`.
    @discardableResult
    public func supersede(
        _ job: Job, by identity: FileIdentity, now: Date, notBefore: Date, boundary: String
    ) async throws -> Job {
        var old = job
        old.state = .superseded
        old.finishedAt = now
        old.updatedAt = now
        old.nextAttemptAt = nil
        var successor = Job(
            id: JobID.generate(milliseconds: UInt64(max(0, now.timeIntervalSince1970 * 1000))),
            spool: job.spool, relativePath: job.relativePath, identity: identity, boundary: boundary, now: now)
        successor.nextAttemptAt = notBefore
        old.lastError = "the file changed before it was delivered; its new version is job \(successor.id)"
        let ended = old
        let next = successor
        return try await write { db in
            try ended.update(db)
            try db.execute(
                sql: "UPDATE job SET disposition = ?, disposed_at = ? WHERE seq = ?",
                arguments: [Disposition.left.rawValue, now.timeIntervalSince1970, ended.sequence])
            try JobEvent.record(db, ended, kind: .superseded, at: now, message: ended.lastError)
            var inserted = next
            try inserted.insert(db)
            try JobEvent.record(db, inserted, kind: .queued, at: now)
            return inserted
        }
    }

    /// Records the job's resumable upload (tus): its URL, the offset the server confirmed, and when the
    /// server will forget it; `nil` values clear them (the upload is gone, start over). Durable on return.
    public func recordUpload(_ job: Job, _ upload: ResumableUpload?, now: Date) async throws {
        try await write { db in
            try db.execute(
                sql: "UPDATE job SET upload_url = ?, upload_offset = ?, upload_expires = ?, upload_endpoint = ?, updated_at = ? WHERE seq = ?",
                arguments: [upload?.url, upload?.offset, upload?.expires?.timeIntervalSince1970, upload?.endpointKey,
                            now.timeIntervalSince1970, job.sequence])
        }
    }

    /// Records that the source file has been dealt with.
    public func markDisposed(_ job: Job, disposition: Disposition, finalPath: [UInt8]?, now: Date) async throws {
        try await write { db in
            try db.execute(
                sql: "UPDATE job SET disposition = ?, disposed_at = ?, final_path = ?, updated_at = ? WHERE seq = ?",
                arguments: [disposition.rawValue, now.timeIntervalSince1970, finalPath.map { Data($0) },
                            now.timeIntervalSince1970, job.sequence])
            try JobEvent.record(db, job, kind: .disposed, at: now, message: disposition.rawValue)
        }
    }

    // MARK: - Recovery

    /// After a restart, puts jobs that were `uploading` when the daemon stopped back in the queue,
    /// due now, and returns how many there were. Their interrupted attempt is not counted.
    public func requeueInterrupted(now: Date) async throws -> Int {
        try await write { db in
            try db.execute(sql: """
                INSERT INTO event (at, job_seq, kind, state, message)
                SELECT ?, seq, 'requeued', 'queued', 'the daemon stopped during the upload' FROM job WHERE state = 'uploading'
                """, arguments: [now.timeIntervalSince1970])
            try db.execute(
                sql: "UPDATE job SET state = 'queued', next_attempt_at = ?, updated_at = ? WHERE state = 'uploading'",
                arguments: [now.timeIntervalSince1970, now.timeIntervalSince1970])
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

    // MARK: - Reading

    /// The job with public id `id`.
    public func job(id: JobID) async throws -> Job? {
        try await pool.read { db in try Job.filter(Job.Field.id == id.rawValue).fetchOne(db) }
    }

    /// The job with internal sequence number `sequence`.
    public func job(sequence: Int64) async throws -> Job? {
        try await pool.read { db in try Job.fetchOne(db, key: sequence) }
    }

    /// Jobs, newest first, optionally filtered by state and spool.
    public func jobs(state: JobState? = nil, spool: String? = nil, limit: Int = 100) async throws -> [Job] {
        try await pool.read { db in
            var request = Job.all()
            if let state { request = request.filter(Job.Field.state == state.rawValue) }
            if let spool { request = request.filter(Job.Field.spool == spool) }
            return try request.order(Job.Field.sequence.desc).limit(limit).fetchAll(db)
        }
    }

    /// The attempts made for a job, oldest first.
    public func attempts(of job: Job) async throws -> [Attempt] {
        try await read { db in
            try Attempt.fetchAll(db, sql: "SELECT * FROM attempt WHERE job_seq = ? ORDER BY seq", arguments: [job.sequence])
        }
    }

    /// The number of jobs in each state, per spool.
    public func counts() async throws -> [String: [JobState: Int]] {
        try await pool.read { db in
            var result: [String: [JobState: Int]] = [:]
            let rows = try Row.fetchCursor(db, sql: "SELECT spool, state, COUNT(*) AS n FROM job GROUP BY state, spool")
            while let row = try rows.next() {
                let spool: String = row["spool"]
                if let state = JobState(rawValue: row["state"]) { result[spool, default: [:]][state] = row["n"] }
            }
            return result
        }
    }

    /// The latest job recorded for a file in a spool.
    public func latestJob(spool: String, relativePath: [UInt8]) async throws -> Job? {
        try await pool.read { db in
            try Job.fetchOne(db, sql: """
                SELECT * FROM job WHERE spool = ? AND relative_path = ? ORDER BY seq DESC LIMIT 1
                """, arguments: [spool, Data(relativePath)])
        }
    }

    /// The `synchronous` setting of the writer connection (2 = FULL); for tests and diagnostics.
    public func synchronousSetting() throws -> Int {
        try pool.writeWithoutTransaction { db in try Int.fetchOne(db, sql: "PRAGMA synchronous") ?? -1 }
    }

    /// Closes the database.
    public func close() throws { try pool.close() }
}

extension Job {
    /// Keeps the server's answer (its first 64 KiB) with the job, when there was one.
    mutating func keepResponse(status: Int?, body: [UInt8]?, contentType: String?) {
        guard let status else { return }
        responseStatus = status
        responseBody = body.map { Array($0.prefix(JobStore.responseExcerptLimit)) }
        responseContentType = contentType
    }
}

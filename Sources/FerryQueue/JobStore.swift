import CFerrySQLite
import Foundation
import GRDB
import Synchronization

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
    /// Rung after every commit: `watch` streams read the new events then.
    public let changes: ChangeSignal
    /// Whether ``close()`` ran: a second close does nothing (GRDB's pool may not be used once closed).
    private let closed = Atomic<Bool>(false)

    /// How much of a response body is kept with a job.
    public static let responseExcerptLimit = 64 * 1024
    /// Each reading connection's page cache, in KiB.
    static let readerPageCacheKiB = 256

    /// SQLite's process-wide settings, made once before the first connection opens: no global mutex
    /// around each allocation for memory statistics Ferry does not read (`CFerrySQLite`).
    private static let configureSQLite: Void = { _ = cferry_sqlite_configure() }()

    /// Opens (creating if needed) the database at `path`, checks it, and migrates it to the current schema.
    /// With `readOnly`, opens an existing database for reading only (tests, diagnostics), beside a running daemon.
    /// - Throws: ``QueueError/corrupt(path:details:)`` for a damaged file, never silently replacing it.
    public init(path: String, readOnly: Bool = false) throws(QueueError) {
        Self.configureSQLite
        self.path = path
        var configuration = Configuration()
        configuration.busyMode = .timeout(5)
        configuration.maximumReaderCount = 4
        configuration.label = "ferry-queue"
        configuration.readonly = readOnly
        configuration.prepareDatabase { db in
            try db.execute(sql: "PRAGMA foreign_keys = ON")
            // SQLite's default page cache is 2 MiB per connection. The writer keeps it (every
            // claim and record goes through it); the four readers (status, listings, follow-ups)
            // each keep a small one: measured, 1 MiB less peak RSS over 1,000 uploads.
            if db.configuration.readonly {
                try db.execute(sql: "PRAGMA cache_size = -\(Self.readerPageCacheKiB)")
            } else {
                // Each write of a group commit runs in its own savepoint, and SQLite keeps the pages
                // a savepoint changes in a sub-journal that spills to a file in /var/tmp past 64 KiB:
                // 15 pwrite(2) calls per small file delivered, three quarters of ferryd's writes. In
                // memory it lives as long as its transaction (one group: a few pages per write). The
                // readers keep files: a listing that must sort spills rather than growing the heap.
                try db.execute(sql: "PRAGMA temp_store = MEMORY")
            }
        }
        do {
            // Checked before the pool opens: opening a pool may write (GRDB makes sure a WAL file
            // exists by creating and dropping a table), and nothing may write to a damaged file.
            if !readOnly { try Self.checkIntegrity(path) }
            pool = try DatabasePool(path: path, configuration: configuration)
            let changes = ChangeSignal()
            self.changes = changes
            committer = GroupCommitter(pool: pool, committed: { changes.notify() })
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

    /// Runs a write transaction that a cancelled caller cannot abandon half-way: an outcome that
    /// decides the fate of a file (a 2xx, an interruption at shutdown) is recorded even while the task
    /// that learned it is being cancelled. Writes that arrive together are committed together
    /// (``GroupCommitter``: each in its own savepoint, one durable `COMMIT` for the group); each
    /// returns only once its transaction is committed, as before.
    ///
    /// `.deferred`: for writes whose loss in a crash costs nothing (a claim, a disposition's record),
    /// the caller resumes once the write has run, and it commits with the next durable write (see
    /// ``GroupCommitter``).
    func write<T: Sendable>(
        _ durability: GroupCommitter.Durability = .durable, _ updates: @escaping @Sendable (Database) throws -> T
    ) async throws -> T {
        try await committer.write(durability, updates)
    }

    /// Commits every write made so far (deferred ones too); returns once they are on disk.
    public func flush() async throws {
        try await committer.flush()
    }

    /// A read that a cancelled caller still completes (a sidecar written during shutdown still lists
    /// the attempts).
    func read<T: Sendable>(_ value: @escaping @Sendable (Database) throws -> T) async throws -> T {
        let pool = self.pool
        return try await Task.detached { try await pool.read(value) }.value
    }

    /// The job with public id `id` (read also by a cancelled caller: a pipeline stopped by an
    /// operator still learns the upload it recorded).
    public func job(id: JobID) async throws -> Job? {
        try await read { db in try Job.filter(Job.Field.id == id.rawValue).fetchOne(db) }
    }

    /// The job with internal sequence number `sequence` (read also by a cancelled caller).
    public func job(sequence: Int64) async throws -> Job? {
        try await read { db in try Job.fetchOne(db, key: sequence) }
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

    /// Commits what is pending (deferred writes, for up to 5 s), then closes the database.
    public func close() throws {
        guard !closed.exchange(true, ordering: .acquiringAndReleasing) else { return }
        committer.flushBlocking(timeout: .seconds(5))
        // After a clean stop `queue.sqlite` alone holds the whole queue (so a copy or backup of it
        // is whole): the WAL is written back into it and emptied. SQLite does not when the pool's
        // last connection to close is a read-only one. A read-only store (beside a running ferryd)
        // writes nothing, this included.
        let checkpoint = pool.configuration.readonly
            ? .success(()) : Result { try pool.writeWithoutTransaction { _ = try $0.checkpoint(.truncate) } }
        try pool.close()
        try checkpoint.get()
    }
}

import Dispatch
import GRDB
import Synchronization

/// Group commit for the queue's writes: writes that arrive while a transaction is open run in it,
/// each in its own savepoint, under one `COMMIT` (one WAL sync under `synchronous = FULL`).
///
/// A write is one of two kinds (``Durability``):
/// - **durable** (outcomes, operators' actions, intake, resumable uploads): its caller resumes only
///   after the transaction holding it has committed, exactly as if it had committed alone; a
///   transaction that holds one commits as soon as the writes waiting have run.
/// - **deferred** (a claim, the record of a file's disposition): its caller resumes as soon as it has
///   run, and it commits with the next durable write, or after ``deferralWindow`` at most. These
///   are the writes whose loss in a crash costs nothing: a claim not on disk leaves its job queued,
///   which is what the next start makes of a job claimed but unfinished anyway; a disposition not on
///   disk is applied again at the next start (the file is already gone or moved: it is recorded as
///   such). They no longer cost a sync of their own: one per file instead of three.
///
/// A write that throws is rolled back to its savepoint and only its caller sees the error; the
/// others still commit. If the transaction fails as a whole (it cannot begin, SQLite rolls it back,
/// the commit fails), every durable caller in the group and every write not run yet gets that error
/// (nothing of theirs is on disk), and the deferred writes already run are lost as in a crash.
///
/// The writes run on one serial queue, in arrival order, so their effects are the same as the same
/// writes committed one after another; a read through the pool sees deferred writes once committed.
final class GroupCommitter: Sendable {
    /// Whether a write's caller waits for its commit.
    enum Durability: Sendable {
        case durable
        case deferred
    }

    /// One write: runs inside the group's transaction and returns what to do once it is committed
    /// (resume its caller with its result or its own error); `failed` resumes it when the group's
    /// transaction fails as a whole.
    struct Item: Sendable {
        let durability: Durability
        let run: @Sendable (Database) -> Ran
        let failed: @Sendable (any Error) -> Void
    }

    /// What one write did inside the group's transaction.
    struct Ran: Sendable {
        /// Resumes its caller (with its result, or its own error).
        let resume: @Sendable () -> Void
        /// The error it threw, if any.
        let error: (any Error)?
    }

    private struct State {
        var pending: [Item] = []
        var draining = false
        /// The drainer holds a transaction open for deferred writes and sleeps on `arrivals`.
        var waiting = false
    }

    private let pool: DatabasePool
    private let state = Mutex(State())
    private let arrivals = DispatchSemaphore(value: 0)
    private let queue = DispatchQueue(label: "ferry-queue.group-commit")
    /// Called after every commit (readers may see the new rows now).
    private let committed: @Sendable () -> Void

    /// The most writes committed in one transaction (bounds the work a failed group loses).
    static let maxGroup = 256
    /// How long a transaction holding only deferred writes stays open for others to join.
    static let deferralWindow = DispatchTimeInterval.milliseconds(25)

    init(pool: DatabasePool, committed: @escaping @Sendable () -> Void = {}) {
        self.pool = pool
        self.committed = committed
    }

    /// Runs `updates` in the next group transaction; returns its result once that transaction has
    /// committed (`.durable`) or once it has run (`.deferred`). Not cancellable: once asked for, the
    /// write is made (a cancelled caller must not abandon the record of an outcome half-way).
    func write<T: Sendable>(
        _ durability: Durability = .durable, _ updates: @escaping @Sendable (Database) throws -> T
    ) async throws -> T {
        try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<T, any Error>) in
            submit(Item(
                durability: durability,
                run: { db in
                    do {
                        let value = try Self.inSavepoint(db) { try updates(db) }
                        return Ran(resume: { continuation.resume(returning: value) }, error: nil)
                    } catch {
                        return Ran(resume: { continuation.resume(throwing: error) }, error: error)
                    }
                },
                failed: { error in continuation.resume(throwing: error) }))
        }
    }

    /// Runs `updates` in a savepoint of the group's transaction, rolled back if it throws: what
    /// GRDB's `inSavepoint` does inside a transaction, through cached statements (it prepared its
    /// three statements anew for every write: 1.3 % of ferryd's CPU on small files).
    private static func inSavepoint<T>(_ db: Database, _ updates: () throws -> T) throws -> T {
        try db.cachedStatement(sql: "SAVEPOINT ferry_write").execute()
        let value: T
        do {
            value = try updates()
            // An error the write caught itself may have made SQLite roll the whole transaction
            // back (a full disk): what it did after that was not in the group.
            guard db.isInsideTransaction else {
                throw DatabaseError(resultCode: .SQLITE_ABORT, message: "the group's transaction was rolled back during a write")
            }
        } catch {
            // SQLite may have rolled the whole transaction back: nothing to undo then. A savepoint
            // that cannot be rolled back takes the whole transaction with it, so that the drain
            // fails the group rather than commit half a write.
            if db.isInsideTransaction {
                do {
                    try db.cachedStatement(sql: "ROLLBACK TO SAVEPOINT ferry_write").execute()
                    try db.cachedStatement(sql: "RELEASE SAVEPOINT ferry_write").execute()
                } catch {
                    try? db.rollback()
                }
            }
            throw error
        }
        try db.cachedStatement(sql: "RELEASE SAVEPOINT ferry_write").execute()
        return value
    }

    /// How many writes wait to be taken into a transaction (for tests).
    var waitingCount: Int { state.withLock { $0.pending.count } }

    /// Commits every write made so far, deferred ones included; returns once they are on disk.
    func flush() async throws {
        try await write(.durable) { _ in }
    }

    /// ``flush()`` for synchronous callers (closing the store); waits `timeout` at most.
    func flushBlocking(timeout: DispatchTimeInterval) {
        let done = DispatchSemaphore(value: 0)
        submit(Item(durability: .durable, run: { _ in Ran(resume: { done.signal() }, error: nil) }, failed: { _ in done.signal() }))
        _ = done.wait(timeout: .now() + timeout)
    }

    private func submit(_ item: Item) {
        let (start, wake) = state.withLock { state -> (Bool, Bool) in
            state.pending.append(item)
            if state.waiting {
                state.waiting = false
                return (false, true)
            }
            if state.draining { return (false, false) }
            state.draining = true
            return (true, false)
        }
        if wake { arrivals.signal() }
        if start { queue.async { self.drain() } }
    }

    /// Takes up to `limit` waiting writes; with `until`, sleeps for the first one until then.
    /// Without writes (and past `until`), ends the drain: `nil`.
    private func take(limit: Int, until deadline: DispatchTime?) -> [Item]? {
        while true {
            let taken = state.withLock { state -> [Item]? in
                if !state.pending.isEmpty {
                    let count = min(state.pending.count, limit)
                    defer { state.pending.removeFirst(count) }
                    return Array(state.pending.prefix(count))
                }
                if deadline == nil || DispatchTime.now() >= deadline! {
                    if deadline == nil { state.draining = false }
                    return nil
                }
                state.waiting = true
                return []
            }
            guard let taken else { return nil }
            if !taken.isEmpty { return taken }
            // A signal may outlive its wait (a write arriving just as the wait timed out): harmless,
            // the loop looks at `pending` again.
            _ = arrivals.wait(timeout: deadline!)
            state.withLock { $0.waiting = false }
        }
    }

    /// Commits groups until no write is waiting.
    private func drain() {
        while let first = take(limit: Self.maxGroup, until: nil) {
            var durable: [Item] = []
            var resumeAfterCommit: [@Sendable () -> Void] = []
            // Taken from `pending` and not run yet: when the transaction fails before they run (it
            // could not begin, or SQLite rolled it back), their callers get its error too.
            var unrun = first[...]
            do {
                try pool.writeWithoutTransaction { db in
                    try db.beginTransaction(.immediate)
                    do {
                        let closesAt = DispatchTime.now() + Self.deferralWindow
                        var count = 0
                        while true {
                            while let item = unrun.popFirst() {
                                count += 1
                                let ran = item.run(db)
                                switch item.durability {
                                case .durable:
                                    durable.append(item)
                                    resumeAfterCommit.append(ran.resume)
                                case .deferred:
                                    ran.resume()  // with its own error, if it threw
                                }
                                // Some errors (a full disk, an I/O error) make SQLite roll the whole
                                // transaction back: then nothing of the group may go on, outside it.
                                if let error = ran.error, !db.isInsideTransaction { throw error }
                            }
                            // A durable write is waiting for this commit: no more joins.
                            if !durable.isEmpty || count >= Self.maxGroup { break }
                            guard let more = take(limit: Self.maxGroup - count, until: closesAt) else { break }
                            unrun = more[...]
                        }
                        try db.commit()
                    } catch {
                        if db.isInsideTransaction { try? db.rollback() }
                        throw error
                    }
                }
                committed()
                for resume in resumeAfterCommit { resume() }
            } catch {
                for item in durable { item.failed(error) }
                for item in unrun { item.failed(error) }
            }
        }
    }
}

import Dispatch
import GRDB
import Synchronization

/// Group commit for the queue's writes: writes that arrive while a transaction is being committed
/// wait, and then all run in the next transaction, each in its own savepoint, with one `COMMIT`
/// (one WAL sync under `synchronous = FULL`) for all of them.
///
/// Durability is unchanged: a caller resumes only after the transaction holding its write has
/// committed (and so has been synced), exactly as if it had committed alone. A write that throws is
/// rolled back to its savepoint and only its caller sees the error; the others still commit. If the
/// commit itself fails, every caller in the group gets that error (nothing of theirs is on disk).
///
/// The writes run on one serial queue, in arrival order, so their effects are the same as the same
/// writes committed one after another.
final class GroupCommitter: Sendable {
    /// One write: runs inside the group's transaction and returns what to do once it is committed
    /// (resume its caller with its result or its own error); `failed` resumes it when the group's
    /// transaction fails as a whole.
    struct Item: Sendable {
        let run: @Sendable (Database) -> Ran
        let failed: @Sendable (any Error) -> Void
    }

    /// What one write did inside the group's transaction.
    struct Ran: Sendable {
        /// Resumes its caller (with its result, or its own error) once the group has committed.
        let resume: @Sendable () -> Void
        /// The error it threw, if any.
        let error: (any Error)?
    }

    private struct State {
        var pending: [Item] = []
        var draining = false
    }

    private let pool: DatabasePool
    private let state = Mutex(State())
    private let queue = DispatchQueue(label: "ferry-queue.group-commit")

    /// The most writes committed in one transaction (bounds the work a failed group loses).
    static let maxGroup = 256

    init(pool: DatabasePool) { self.pool = pool }

    /// Runs `updates` in the next group transaction; returns its result once that transaction has
    /// committed. Not cancellable: once asked for, the write is made (a cancelled caller must not
    /// abandon the record of an outcome half-way).
    func write<T: Sendable>(_ updates: @escaping @Sendable (Database) throws -> T) async throws -> T {
        try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<T, any Error>) in
            let item = Item(
                run: { db in
                    do {
                        nonisolated(unsafe) var result: T?
                        try db.inSavepoint {
                            result = try updates(db)
                            return .commit
                        }
                        let value = result!
                        return Ran(resume: { continuation.resume(returning: value) }, error: nil)
                    } catch {
                        return Ran(resume: { continuation.resume(throwing: error) }, error: error)
                    }
                },
                failed: { error in continuation.resume(throwing: error) })
            submit(item)
        }
    }

    private func submit(_ item: Item) {
        let start = state.withLock { state -> Bool in
            state.pending.append(item)
            if state.draining { return false }
            state.draining = true
            return true
        }
        if start { queue.async { self.drain() } }
    }

    /// Commits groups until no write is waiting.
    private func drain() {
        while true {
            let group = state.withLock { state -> [Item] in
                if state.pending.isEmpty {
                    state.draining = false
                    return []
                }
                let count = min(state.pending.count, Self.maxGroup)
                defer { state.pending.removeFirst(count) }
                return Array(state.pending.prefix(count))
            }
            if group.isEmpty { return }
            do {
                let completions = try pool.write { db in
                    var completions: [@Sendable () -> Void] = []
                    for item in group {
                        let ran = item.run(db)
                        // Some errors (a full disk, an I/O error) make SQLite roll the whole
                        // transaction back: then nothing of the group may go on, outside it.
                        if let error = ran.error, !db.isInsideTransaction { throw error }
                        completions.append(ran.resume)
                    }
                    return completions
                }
                for complete in completions { complete() }
            } catch {
                for item in group { item.failed(error) }
            }
        }
    }
}

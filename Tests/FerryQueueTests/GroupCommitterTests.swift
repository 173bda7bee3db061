@testable import FerryQueue
import Dispatch
import Foundation
import GRDB
import Synchronization
import Testing

/// The group commit's promise to its callers: each one resumes, with its result or an error.
@Suite("Group commit: every caller resumes")
struct GroupCommitterTests {
    struct RolledBack: Error {}

    /// Waits until `condition` holds, for 10 s at most.
    static func eventually(_ condition: () -> Bool) async throws -> Bool {
        let deadline = ContinuousClock.now + .seconds(10)
        while !condition() {
            if ContinuousClock.now > deadline { return false }
            try await Task.sleep(for: .milliseconds(5))
        }
        return true
    }

    @Test("a write that makes SQLite roll the whole transaction back: it and the writes waiting behind it in the group get an error, none waits forever")
    func rolledBackGroup() async throws {
        let queue = try TestQueue()
        let pool = try DatabasePool(path: queue.path + "-group")
        defer { try? pool.close() }
        try await pool.write { db in try db.execute(sql: "CREATE TABLE t(x INTEGER)") }
        let committer = GroupCommitter(pool: pool)
        let running = Atomic(false)
        let gate = DispatchSemaphore(value: 0)
        // A deferred write holds the group open (it runs on the committer's queue) until the others wait.
        let holder = Task {
            try await committer.write(.deferred) { db in
                running.store(true, ordering: .sequentiallyConsistent)
                gate.wait()
                try db.execute(sql: "INSERT INTO t VALUES (1)")
            }
        }
        #expect(try await Self.eventually { running.load(ordering: .sequentiallyConsistent) })
        let rollingBack = Task {
            try await committer.write { db in
                try db.execute(sql: "ROLLBACK")
                throw RolledBack()
            }
        }
        #expect(try await Self.eventually { committer.waitingCount == 1 })
        let finished = Atomic(0)
        let behind = Task {
            defer { finished.add(1, ordering: .sequentiallyConsistent) }
            try await committer.write { db in try db.execute(sql: "INSERT INTO t VALUES (3)") }
        }
        #expect(try await Self.eventually { committer.waitingCount == 2 })
        gate.signal()
        _ = await holder.result
        await #expect(throws: (any Error).self) { try await rollingBack.value }
        let resumed = try await Self.eventually { finished.load(ordering: .sequentiallyConsistent) == 1 }
        #expect(resumed, "the write behind it resumed")
        guard resumed else { return }  // it would wait forever
        await #expect(throws: (any Error).self) { try await behind.value }
        // The committer goes on: the next write commits.
        try await committer.write { db in try db.execute(sql: "INSERT INTO t VALUES (4)") }
        #expect(try await pool.read { db in try Int.fetchAll(db, sql: "SELECT x FROM t") } == [4])
    }
}

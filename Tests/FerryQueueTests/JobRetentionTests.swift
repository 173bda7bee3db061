@testable import FerryQueue
import Foundation
import GRDB
import Testing

@Suite("Job retention: finished jobs are forgotten after job_retention")
struct JobRetentionTests {
    static let now = Date(timeIntervalSince1970: 1_800_000_000)
    static let old = now.addingTimeInterval(-40 * 86_400)
    static let recent = now.addingTimeInterval(-86_400)
    static let cutoff = now.addingTimeInterval(-30 * 86_400)
    /// Before this, a clock that was not set yet.
    static let plausible = Date(timeIntervalSince1970: 1_700_000_000)

    /// Queues `name`, claims it and records `transition` at `at` (with `hooks` to run); the job returned is final or not.
    private func attempt(
        _ queue: TestQueue, _ name: String, inode: UInt64, at: Date, transition: JobStore.Transition? = nil, hooks: [HookRun.Kind] = []
    ) async throws -> Job {
        let queued = try #require(try await queue.store.enqueue([file(name, inode: inode)], now: at, makeBoundary: boundary).first)
        let claimed = try #require(try await queue.store.claimDue(now: at, limit: 10).first { $0.id == queued.id })
        return try await queue.store.finish(
            claimed, startedAt: at, now: at, bytesSent: 10,
            transition: transition ?? .succeeded(status: 201, body: [], contentType: nil), hooks: hooks)
    }

    private func delivered(
        _ queue: TestQueue, _ name: String, inode: UInt64, at: Date, disposition: Disposition, hooks: [HookRun.Kind] = []
    ) async throws -> Job {
        let job = try await attempt(queue, name, inode: inode, at: at, hooks: hooks)
        try await queue.store.markDisposed(job, disposition: disposition, finalPath: nil, now: at)
        return job
    }

    private func rows(_ queue: TestQueue, _ table: String, of job: Job) async throws -> Int {
        let pool = try DatabasePool(path: queue.path)
        defer { try? pool.close() }
        return try await pool.read { db in
            try Int.fetchOne(db, sql: "SELECT count(*) FROM \(table) WHERE job_seq = ?", arguments: [job.sequence]) ?? 0
        }
    }

    @Test("Forgotten: final jobs whose file is gone, disposed before the cutoff, with their attempts and events; kept: the rest")
    func forgetsWhatIsOver() async throws {
        let queue = try TestQueue()
        let store = queue.store
        let deletedLongAgo = try await delivered(queue, "a", inode: 1, at: Self.old, disposition: .deleted)
        let movedLongAgo = try await delivered(queue, "b", inode: 2, at: Self.old, disposition: .moved)
        let missingLongAgo = try await delivered(queue, "c", inode: 3, at: Self.old, disposition: .missing)
        let failed = try await attempt(
            queue, "d", inode: 4, at: Self.old, transition: .failed(error: "refused", status: 422, body: nil, contentType: nil))
        try await store.markDisposed(failed, disposition: .moved, finalPath: Array("failed/d".utf8), now: Self.old)
        // Stay: disposed of too recently; the newest job of a file still in the spool; a hook still
        // to run; not final; superseded by nothing (the newest of its path, kept).
        let deletedRecently = try await delivered(queue, "e", inode: 5, at: Self.recent, disposition: .deleted)
        let keptLongAgo = try await delivered(queue, "f", inode: 6, at: Self.old, disposition: .kept)
        let hookPending = try await delivered(queue, "g", inode: 7, at: Self.old, disposition: .deleted, hooks: [.delivered])
        let retrying = try await attempt(
            queue, "h", inode: 8, at: Self.old, transition: .retry(at: Self.now, error: "503", status: 503, body: nil, contentType: nil))
        #expect(try await rows(queue, "attempt", of: deletedLongAgo) == 1)
        #expect(try await rows(queue, "event", of: deletedLongAgo) >= 2)

        #expect(try await store.forgetFinishedJobs(disposedBefore: Self.cutoff, plausible: Self.plausible, batch: 2) == 4)
        for job in [deletedLongAgo, movedLongAgo, missingLongAgo, failed] {
            #expect(try await store.job(id: job.id) == nil, "\(job.displayPath) is remembered")
            #expect(try await rows(queue, "attempt", of: job) == 0)
        }
        // Their events are no longer shown (they go with the event log's pruning).
        let shown = Set(try await store.events(after: 0, limit: 1_000).map(\.jobID))
        #expect(shown.isDisjoint(with: [deletedLongAgo.id, movedLongAgo.id, missingLongAgo.id, failed.id]))
        #expect(shown.contains(keptLongAgo.id))
        for job in [deletedRecently, keptLongAgo, hookPending, retrying] {
            #expect(try await store.job(id: job.id) != nil, "\(job.displayPath) is forgotten")
        }
        #expect(try await rows(queue, "hook_run", of: hookPending) == 1)
        // Nothing more to forget.
        #expect(try await store.forgetFinishedJobs(disposedBefore: Self.cutoff, plausible: Self.plausible) == 0)
    }

    @Test("A spool's last delivery stays, however old (its metric's timestamp); so does a job dealt with while the clock was not set")
    func lastDeliveryAndUnsetClock() async throws {
        let queue = try TestQueue()
        let store = queue.store
        let last = try await delivered(queue, "only.bin", inode: 1, at: Self.old, disposition: .deleted)
        let failed = try await attempt(
            queue, "boot.bin", inode: 2, at: Date(timeIntervalSince1970: 86_400),
            transition: .failed(error: "refused", status: 400, body: nil, contentType: nil))
        try await store.markDisposed(failed, disposition: .moved, finalPath: nil, now: Date(timeIntervalSince1970: 86_400))
        #expect(try await store.forgetFinishedJobs(disposedBefore: Self.cutoff, plausible: Self.plausible) == 0)
        #expect(try await store.job(id: last.id) != nil)
        #expect(try await store.job(id: failed.id) != nil)
        // Once the clock is set, the job dealt with before counts its retention from then.
        #expect(try await store.restampUnknownDisposals(before: Self.plausible, now: Self.now) == 1)
        #expect(try await store.job(id: failed.id)?.disposedAt == Self.now)
        #expect(try await store.restampUnknownDisposals(before: Self.plausible, now: Self.now) == 0)
        // A later delivery, even a recent one, frees the old one.
        _ = try await delivered(queue, "next.bin", inode: 3, at: Self.recent, disposition: .deleted)
        #expect(try await store.forgetFinishedJobs(disposedBefore: Self.cutoff, plausible: Self.plausible) == 1)
        #expect(try await store.job(id: last.id) == nil)
    }

    @Test("Of a path's jobs, the older ones go once over, the newest stays while its file is in the spool")
    func olderVersionsOfAKeptFile() async throws {
        let queue = try TestQueue()
        let store = queue.store
        let first = try await delivered(queue, "report.csv", inode: 1, at: Self.old, disposition: .kept)
        let second = try await delivered(queue, "report.csv", inode: 2, at: Self.old.addingTimeInterval(60), disposition: .kept)
        // A version superseded before delivery (disposition `left`, its successor owns the file).
        let queued = try #require(try await store.enqueue([file("log.txt", inode: 3)], now: Self.old, makeBoundary: boundary).first)
        let claimed = try #require(try await store.claimDue(now: Self.old, limit: 10).first { $0.id == queued.id })
        let successor = try await store.supersede(
            claimed, by: identity(4), now: Self.old, notBefore: Self.old, boundary: "b")

        #expect(try await store.forgetFinishedJobs(disposedBefore: Self.cutoff, plausible: Self.plausible) == 2)
        #expect(try await store.job(id: first.id) == nil)
        #expect(try await store.job(id: claimed.id) == nil)
        #expect(try await store.job(id: second.id)?.disposition == .kept)
        #expect(try await store.job(id: successor.id)?.state == .queued)
        // The newest kept version still keeps the same file from being queued again.
        let again = try await store.enqueue([file("report.csv", inode: 2)], now: Self.now, makeBoundary: boundary)
        #expect(again.isEmpty)
    }
}

@Suite("Migration v11: events without a foreign key")
struct EventMigrationTests {
    @Test("A queue made before v11 keeps its events and their numbering; a job can then be deleted without them")
    func upgrade() async throws {
        var template = Array("/tmp/ferry-migration.XXXXXX".utf8CString)
        let directory = String(cString: mkdtemp(&template)!)
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let path = directory + "/queue.sqlite"
        do {
            let pool = try DatabasePool(path: path)
            try JobStore.migrator.migrate(pool, upTo: "v10: no index of due jobs across spools")
            try await pool.write { db in
                try db.execute(sql: """
                    INSERT INTO job (id, spool, relative_path, device, inode, size, mtime_ns, state, boundary, created_at, updated_at)
                    VALUES ('01JOLD', 's', x'61', 1, 1, 1, 1, 'queued', 'b', 1, 1);
                    INSERT INTO event (at, job_seq, kind, state) VALUES (1, 1, 'queued', 'queued'), (2, 1, 'claimed', 'uploading');
                    DELETE FROM event WHERE id = 2;
                    """)
            }
            try pool.close()
        }
        let store = try JobStore(path: path)
        defer { try? store.close() }
        #expect(try await store.events(after: 0, limit: 10).map(\.id) == [1])
        #expect(try await store.eventBounds().newest == 2, "the next event is numbered after the old table's last")
        let pool = try DatabasePool(path: path)
        defer { try? pool.close() }
        let foreignKeys = try pool.read { db in try Row.fetchAll(db, sql: "PRAGMA foreign_key_list(event)") }
        #expect(foreignKeys.isEmpty)
    }
}

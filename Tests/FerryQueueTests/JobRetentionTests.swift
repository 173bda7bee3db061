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

        #expect(try await store.forgetFinishedJobs(disposedBefore: Self.cutoff, batch: 2) == 4)
        for job in [deletedLongAgo, movedLongAgo, missingLongAgo, failed] {
            #expect(try await store.job(id: job.id) == nil, "\(job.displayPath) is remembered")
            #expect(try await rows(queue, "attempt", of: job) == 0)
            #expect(try await rows(queue, "event", of: job) == 0)
        }
        for job in [deletedRecently, keptLongAgo, hookPending, retrying] {
            #expect(try await store.job(id: job.id) != nil, "\(job.displayPath) is forgotten")
        }
        #expect(try await rows(queue, "hook_run", of: hookPending) == 1)
        // Nothing more to forget.
        #expect(try await store.forgetFinishedJobs(disposedBefore: Self.cutoff) == 0)
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

        #expect(try await store.forgetFinishedJobs(disposedBefore: Self.cutoff) == 2)
        #expect(try await store.job(id: first.id) == nil)
        #expect(try await store.job(id: claimed.id) == nil)
        #expect(try await store.job(id: second.id)?.disposition == .kept)
        #expect(try await store.job(id: successor.id)?.state == .queued)
        // The newest kept version still keeps the same file from being queued again.
        let again = try await store.enqueue([file("report.csv", inode: 2)], now: Self.now, makeBoundary: boundary)
        #expect(again.isEmpty)
    }
}

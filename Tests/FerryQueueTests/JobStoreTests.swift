@testable import FerryQueue
import FerrySystem
import Foundation
import GRDB
import Testing

#if canImport(Glibc)
import Glibc
#endif

/// A queue in a fresh temporary directory.
final class TestQueue {
    let directory: String
    let store: JobStore
    var path: String { directory + "/queue.sqlite" }

    init() throws {
        var template = Array("/tmp/ferry-queue.XXXXXX".utf8CString)
        directory = String(cString: mkdtemp(&template)!)
        store = try JobStore(path: directory + "/queue.sqlite")
    }

    deinit {
        try? store.close()
        try? FileManager.default.removeItem(atPath: directory)
    }
}

func identity(_ inode: UInt64, size: Int64 = 10, mtime: Int64 = 1_000) -> FileIdentity {
    FileIdentity(device: 1, inode: inode, size: size, modificationTime: mtime)
}

func file(_ name: String, inode: UInt64, spool: String = "s", size: Int64 = 10, mtime: Int64 = 1_000) -> JobStore.DiscoveredFile {
    JobStore.DiscoveredFile(spool: spool, relativePath: Array(name.utf8), identity: identity(inode, size: size, mtime: mtime))
}

let boundary: @Sendable () -> String = { "ferry-test-boundary" }

@Suite("Job queue (SQLite)")
struct JobStoreTests {
    @Test("Every commit is durable: WAL with synchronous=FULL")
    func durability() throws {
        let queue = try TestQueue()
        #expect(try queue.store.synchronousSetting() == 2)
        let mode = try DatabaseQueue(path: queue.path).read { try String.fetchOne($0, sql: "PRAGMA journal_mode") }
        #expect(mode == "wal")
    }

    @Test("The writer keeps savepoints' sub-journals in memory (no temporary file per group commit); readers spill sorts to files")
    func temporaryStore() throws {
        let queue = try TestQueue()
        #expect(try queue.store.pool.writeWithoutTransaction { try Int.fetchOne($0, sql: "PRAGMA temp_store") } == 2)
        #expect(try queue.store.pool.read { try Int.fetchOne($0, sql: "PRAGMA temp_store") } == 0)
    }

    @Test("A file is queued once; queueing it again while active adds nothing")
    func enqueueOnce() async throws {
        let queue = try TestQueue()
        let first = try await queue.store.enqueue([file("a.jpg", inode: 1), file("b.jpg", inode: 2)], now: Date(), makeBoundary: boundary)
        #expect(first.count == 2)
        #expect(first.allSatisfy { $0.state == .queued && $0.sequence != nil && JobID.isWellFormed($0.id.rawValue) })
        let again = try await queue.store.enqueue([file("a.jpg", inode: 1), file("a.jpg", inode: 9)], now: Date(), makeBoundary: boundary)
        #expect(again.isEmpty)
        let counts = try await queue.store.counts()
        #expect(counts["s"]?[.queued] == 2)
    }

    @Test("A file whose older job an operator reopened, after a newer version was delivered, is that job's: the batch adds nothing and fails nothing")
    func olderJobReopened() async throws {
        let queue = try TestQueue()
        let store = queue.store
        // report.csv fails (moved aside); a new report.csv is delivered and deleted; retry reopens the first.
        let first = try #require(try await store.enqueue([file("report.csv", inode: 1)], now: Date(), makeBoundary: boundary).first)
        let failed = try await store.fail(first, now: Date(), error: "rejected", hooks: [])
        try await store.markDisposed(failed, disposition: .moved, finalPath: Array("/f/report.csv".utf8), now: Date())
        let second = try #require(try await store.enqueue([file("report.csv", inode: 2)], now: Date(), makeBoundary: boundary).first)
        let claimed = try #require(try await store.claimDue(now: Date(), limit: 1).first { $0.id == second.id })
        let done = try await store.finish(claimed, startedAt: Date(), now: Date(), bytesSent: 1,
                                          transition: .succeeded(status: 200, body: [], contentType: nil))
        try await store.markDisposed(done, disposition: .deleted, finalPath: nil, now: Date())
        _ = try await store.reopen(failed, now: Date())
        // The watcher sees the file back in the spool, with another file beside it in the same batch.
        let added = try await store.enqueue([file("report.csv", inode: 1), file("other.csv", inode: 3)], now: Date(), makeBoundary: boundary)
        #expect(added.map(\.displayPath) == ["other.csv"])
        #expect(try await store.job(id: first.id)?.state == .held)
    }

    @Test("A job a retry reopened (held, with its finish time) refuses release, retry, hold and cancel until the retry is done; it is found as interrupted")
    func reopenedRefusesActions() async throws {
        let queue = try TestQueue()
        let store = queue.store
        let queued = try #require(try await store.enqueue([file("scan.pdf", inode: 1)], now: Date(), makeBoundary: boundary).first)
        let failed = try await store.fail(queued, now: Date(), error: "rejected", hooks: [])
        try await store.markDisposed(failed, disposition: .moved, finalPath: Array("/f/scan.pdf".utf8), now: Date())
        let reopened = try await store.reopen(failed, now: Date())
        #expect(reopened.state == .held)
        for outcome in [try await store.release(reopened, now: Date(), reason: "t"), try await store.retryNow(reopened, now: Date(), reason: "t"),
                        try await store.hold(reopened, now: Date(), reason: "t"), try await store.cancel(reopened, now: Date(), reason: "t")] {
            guard case .notAllowed = outcome else { Issue.record("\(outcome)"); continue }
        }
        let interrupted = try await store.interruptedRetries()
        #expect(interrupted.map(\.job.id) == [queued.id] && interrupted.first?.previous == .failed)
        _ = try await store.requeueReopened(reopened, identity: identity(1), now: Date(), reason: "t")
        #expect(try await store.interruptedRetries().isEmpty)
        #expect(try await store.job(id: queued.id)?.state == .queued)
    }

    @Test("While a finished job's file is being deleted or moved, its own version is not queued again; another version at the name is, at once")
    func newVersionDuringDisposition() async throws {
        let queue = try TestQueue()
        let store = queue.store
        let queued = try #require(try await store.enqueue([file("snap.jpg", inode: 1)], now: Date(), makeBoundary: boundary).first)
        let claimed = try #require(try await store.claimDue(now: Date(), limit: 1).first)
        #expect(claimed.id == queued.id)
        let done = try await store.finish(claimed, startedAt: Date(), now: Date(), bytesSent: 10,
                                          transition: .succeeded(status: 201, body: [], contentType: nil))
        #expect(done.disposedAt == nil, "the delete is still to come")
        #expect(try await store.enqueue([file("snap.jpg", inode: 1)], now: Date(), makeBoundary: boundary).isEmpty)
        let next = try await store.enqueue([file("snap.jpg", inode: 2)], now: Date(), makeBoundary: boundary)
        #expect(next.count == 1 && next.first?.identity == identity(2))
        // The delete then finds the new version at the name: left, and its requeue adds nothing more.
        try await store.markDisposed(done, disposition: .left, finalPath: nil, now: Date())
        #expect(try await store.enqueue([file("snap.jpg", inode: 2)], now: Date(), makeBoundary: boundary).isEmpty)
    }

    @Test("Events are pruned to the newest kept, in batches of their own transactions")
    func pruneEvents() async throws {
        let queue = try TestQueue()
        let files = (0..<25).map { file("f\($0)", inode: UInt64(100 + $0)) }
        _ = try await queue.store.enqueue(files, now: Date(), makeBoundary: boundary)
        let before = try await queue.store.eventBounds()
        #expect(try await queue.store.pruneEvents(keep: 5, batch: 10) == 20)
        let after = try await queue.store.eventBounds()
        #expect(after.newest == before.newest && after.oldest == before.newest - 4, "\(before) → \(after)")
        #expect(try await queue.store.pruneEvents(keep: 5, batch: 10) == 0)
    }

    @Test("The database refuses a second active job for the same file, whatever the caller does")
    func uniqueActivePath() async throws {
        let queue = try TestQueue()
        let job = try #require(try await queue.store.enqueue([file("a", inode: 1)], now: Date(), makeBoundary: boundary).first)
        let pool = try DatabasePool(path: queue.path)
        defer { try? pool.close() }
        #expect(throws: DatabaseError.self) {
            try pool.write { db in
                var duplicate = Job(id: JobID.generate(milliseconds: 1), spool: "s", relativePath: job.relativePath,
                                    identity: identity(2), boundary: "b", now: Date())
                try duplicate.insert(db)
            }
        }
    }

    @Test("Waiting jobs: queued or retrying, due or not; none once every job is claimed")
    func waitingJobs() async throws {
        let queue = try TestQueue()
        let now = Date()
        #expect(try await !queue.store.hasWaitingJobs())
        _ = try await queue.store.enqueue([file("a", inode: 1), file("b", inode: 2, spool: "t")], now: now, makeBoundary: boundary)
        #expect(try await queue.store.hasWaitingJobs())
        let claimed = try await queue.store.claimDue(now: now, limit: 2)
        #expect(claimed.count == 2)
        #expect(try await !queue.store.hasWaitingJobs())
        try await queue.store.finish(claimed[0], startedAt: now, now: now, bytesSent: 0, transition: .retry(
            at: now.addingTimeInterval(600), error: "503", status: 503, body: nil, contentType: nil))
        #expect(try await queue.store.hasWaitingJobs())
    }

    @Test("Claims are oldest-due first, bounded, and skip jobs not yet due")
    func claimOrder() async throws {
        let queue = try TestQueue()
        let now = Date()
        let jobs = try await queue.store.enqueue((1...5).map { file("f\($0)", inode: UInt64($0)) }, now: now, makeBoundary: boundary)
        // Make f1 wait for a retry in the future.
        let claimed = try await queue.store.claimDue(now: now, limit: 1)
        #expect(claimed.map(\.displayPath) == ["f1"])
        try await queue.store.finish(claimed[0], startedAt: now, now: now, bytesSent: 0, transition: .retry(
            at: now.addingTimeInterval(60), error: "503", status: 503, body: nil, contentType: nil))
        let next = try await queue.store.claimDue(now: now, limit: 3)
        #expect(next.map(\.displayPath) == ["f2", "f3", "f4"])
        #expect(next.allSatisfy { $0.state == .uploading })
        let rest = try await queue.store.claimDue(now: now, limit: 10)
        #expect(rest.map(\.displayPath) == ["f5"])
        let due = try await queue.store.nextDueDate(inSpools: ["s"])
        #expect(abs((due?.timeIntervalSince1970 ?? 0) - now.addingTimeInterval(60).timeIntervalSince1970) < 0.01)
        #expect(try await queue.store.hasWaitingJobs())
        #expect(jobs.count == 5)
    }

    @Test("Outcomes: success, retry, failure and interruption each record an attempt")
    func transitions() async throws {
        let queue = try TestQueue()
        let now = Date()
        _ = try await queue.store.enqueue([file("a", inode: 1), file("b", inode: 2), file("c", inode: 3)], now: now, makeBoundary: boundary)
        let claimed = try await queue.store.claimDue(now: now, limit: 3)
        let large = [UInt8](repeating: 0x41, count: 100_000)

        let interrupted = try await queue.store.finish(claimed[0], startedAt: now, now: now, bytesSent: 5, transition: .interrupted(at: now, reason: "shutdown"))
        #expect(interrupted.state == .queued)
        #expect(interrupted.attempts == 0)

        let retried = try await queue.store.finish(claimed[1], startedAt: now, now: now, bytesSent: 10, transition: .retry(
            at: now.addingTimeInterval(5), error: "server answered 503", status: 503, body: [1, 2], contentType: "text/plain"))
        #expect(retried.state == .retrying)
        #expect(retried.attempts == 1)
        #expect(retried.lastError == "server answered 503")

        let done = try await queue.store.finish(claimed[2], startedAt: now, now: now, bytesSent: 10, transition: .succeeded(
            status: 201, body: large, contentType: "application/json"))
        #expect(done.state == .done)
        #expect(done.attempts == 1)
        #expect(done.disposedAt == nil)

        let stored = try #require(try await queue.store.job(id: done.id))
        #expect(stored.responseStatus == 201)
        #expect(stored.responseBody?.count == JobStore.responseExcerptLimit)
        #expect(stored.responseContentType == "application/json")

        let attempts = try await queue.store.attempts(of: stored)
        #expect(attempts.map(\.outcome) == [.success])
        #expect(attempts.first?.httpStatus == 201)
        #expect(attempts.first?.bytesSent == 10)
        let interruptedAttempts = try await queue.store.attempts(of: interrupted)
        #expect(interruptedAttempts.map(\.outcome) == [.interrupted])

        let pending = try await queue.store.pendingDispositions(limit: 10)
        #expect(pending.map(\.id) == [done.id])
        try await queue.store.markDisposed(done, disposition: .deleted, finalPath: nil, now: now)
        #expect(try await queue.store.pendingDispositions(limit: 10).isEmpty)
    }

    @Test("A job put back unsent goes back to the queue, due when asked, with a requeued event and no attempt row")
    func putBackUnsent() async throws {
        let queue = try TestQueue()
        let now = Date()
        _ = try await queue.store.enqueue([file("a", inode: 1)], now: now, makeBoundary: boundary)
        let claimed = try #require(try await queue.store.claimDue(now: now, limit: 1).first)
        let due = now.addingTimeInterval(7)
        let back = try await queue.store.finish(claimed, startedAt: now, now: now, bytesSent: 0, transition: .putBack(at: due, reason: "server unreachable"))
        #expect(back.state == .queued && back.attempts == 0 && back.nextAttemptAt == due)
        let stored = try #require(try await queue.store.job(id: claimed.id))
        // Stored as seconds since 1970 in a REAL: equal to the microsecond, not to the bit.
        let storedDue = try #require(stored.nextAttemptAt)
        #expect(stored.state == .queued && abs(storedDue.timeIntervalSince(due)) < 0.000_01)
        #expect(try await queue.store.attempts(of: stored).isEmpty)
        let events = try await queue.store.events(after: 0, limit: 10).filter { $0.jobID == claimed.id }
        #expect(events.map(\.kind) == [.queued, .started, .requeued])
        #expect(events.last?.message == "server unreachable" && events.last?.attempt == nil)
        // Claimed again, it is the first attempt.
        let again = try #require(try await queue.store.claimDue(now: due, limit: 1).first)
        #expect(again.id == claimed.id && again.attempts == 0)
    }

    @Test("Closing writes the WAL back into the database and empties it; a read-only store beside it writes nothing; a second close does nothing")
    func closeCheckpoints() async throws {
        let queue = try TestQueue()
        _ = try await queue.store.enqueue([file("a", inode: 1), file("b", inode: 2)], now: Date(), makeBoundary: boundary)
        func walSize() -> Int64 {
            var info = stat()
            return stat(queue.path + "-wal", &info) == 0 ? Int64(info.st_size) : -1
        }
        let before = walSize()
        #expect(before > 0)
        let reader = try JobStore(path: queue.path, readOnly: true)
        #expect(try await reader.jobs().count == 2)
        try reader.close()
        #expect(walSize() == before, "a read-only store does not checkpoint")
        try queue.store.close()
        try queue.store.close()
        #expect(walSize() <= 0)
        let reopened = try JobStore(path: queue.path, readOnly: true)
        defer { try? reopened.close() }
        #expect(try await reopened.jobs().count == 2)
    }

    @Test("After a crash, uploads in flight go back to the queue and are not counted")
    func recovery() async throws {
        let queue = try TestQueue()
        _ = try await queue.store.enqueue([file("a", inode: 1), file("b", inode: 2)], now: Date(), makeBoundary: boundary)
        _ = try await queue.store.claimDue(now: Date(), limit: 2)
        try queue.store.close()
        let reopened = try JobStore(path: queue.path)
        defer { try? reopened.close() }
        #expect(try await reopened.requeueInterrupted(now: Date()) == (requeued: 2, withUpload: 0))
        let jobs = try await reopened.jobs()
        #expect(jobs.allSatisfy { $0.state == .queued && $0.attempts == 0 })
    }

    @Test("After a crash, the requeued jobs with an upload on the server are counted apart: they wait for the dead process's bytes to land")
    func recoveryWithUploads() async throws {
        let queue = try TestQueue()
        _ = try await queue.store.enqueue([file("a", inode: 1), file("b", inode: 2)], now: Date(), makeBoundary: boundary)
        let claimed = try await queue.store.claimDue(now: Date(), limit: 2)
        let resumable = try #require(claimed.first { $0.displayPath == "a" })
        try await queue.store.recordUpload(resumable, ResumableUpload(url: "http://s3.test/b/a?uploadId=U", offset: 8), now: Date())
        try queue.store.close()
        let reopened = try JobStore(path: queue.path)
        defer { try? reopened.close() }
        let now = Date()
        #expect(try await reopened.requeueInterrupted(now: now) == (requeued: 2, withUpload: 1))
        let jobs = try await reopened.jobs()
        #expect(jobs.allSatisfy { $0.state == .queued && abs($0.nextAttemptAt?.timeIntervalSince(now) ?? 1) < 0.001 }, "due at once, in their order")
    }

    @Test("A file dropped again after its job deleted it is a new job, even with the same inode")
    func redropAfterDelete() async throws {
        let queue = try TestQueue()
        let job = try #require(try await queue.store.enqueue([file("a", inode: 7)], now: Date(), makeBoundary: boundary).first)
        let claimed = try await queue.store.claimDue(now: Date(), limit: 1)
        let done = try await queue.store.finish(claimed[0], startedAt: Date(), now: Date(), bytesSent: 1, transition: .succeeded(status: 200, body: [], contentType: nil))
        // Not yet disposed: a rescan must not queue it again.
        #expect(try await queue.store.enqueue([file("a", inode: 7)], now: Date(), makeBoundary: boundary).isEmpty)
        try await queue.store.markDisposed(done, disposition: .deleted, finalPath: nil, now: Date())
        let again = try await queue.store.enqueue([file("a", inode: 7)], now: Date(), makeBoundary: boundary)
        #expect(again.count == 1)
        #expect(again.first?.id != job.id)
        #expect((again.first?.sequence ?? 0) > (job.sequence ?? 0))
    }

    @Test("A file seen by a rescan before its job delivered and deleted it is not queued again; seen after (put back), it is", arguments: [
        Disposition.deleted, .moved, .missing,
    ])
    func rescanRacingTheDelete(_ disposition: Disposition) async throws {
        let queue = try TestQueue()
        _ = try await queue.store.enqueue([file("a", inode: 7)], now: Date(), makeBoundary: boundary)
        let claimed = try await queue.store.claimDue(now: Date(), limit: 1)
        let seenBefore = Date()
        let done = try await queue.store.finish(claimed[0], startedAt: Date(), now: Date(), bytesSent: 1, transition: .succeeded(status: 200, body: [], contentType: nil))
        let disposedAt = seenBefore.addingTimeInterval(0.5)
        try await queue.store.markDisposed(done, disposition: disposition, finalPath: nil, now: disposedAt)
        var stale = file("a", inode: 7)
        stale.observedAt = seenBefore
        #expect(try await queue.store.enqueue([stale], now: Date(), makeBoundary: boundary).isEmpty, "the stat predates the delete")
        var changed = file("a", inode: 7, mtime: 2_000)
        changed.observedAt = seenBefore
        #expect(try await queue.store.enqueue([changed], now: Date(), makeBoundary: boundary).count == 1, "another version is queued")
        // Put back (moved in again from the failed directory, say) and seen after: queued.
        let queue2 = try TestQueue()
        _ = try await queue2.store.enqueue([file("b", inode: 8)], now: Date(), makeBoundary: boundary)
        let claimed2 = try await queue2.store.claimDue(now: Date(), limit: 1)
        let done2 = try await queue2.store.finish(claimed2[0], startedAt: Date(), now: Date(), bytesSent: 1, transition: .succeeded(status: 200, body: [], contentType: nil))
        try await queue2.store.markDisposed(done2, disposition: disposition, finalPath: nil, now: disposedAt)
        var back = file("b", inode: 8)
        back.observedAt = disposedAt.addingTimeInterval(0.001)
        #expect(try await queue2.store.enqueue([back], now: Date(), makeBoundary: boundary).count == 1)
    }

    @Test("Jobs queued while the clock said 1970 get their max_age started once the clock is set; not before, and not other jobs")
    func unknownAges() async throws {
        let queue = try TestQueue()
        let floor = Date(timeIntervalSince1970: 1_767_225_600)
        let boot = Date(timeIntervalSince1970: 3600)
        _ = try await queue.store.enqueue([file("early", inode: 1)], now: boot, makeBoundary: boundary)
        _ = try await queue.store.enqueue([file("late", inode: 2)], now: floor.addingTimeInterval(100), makeBoundary: boundary)
        #expect(try await queue.store.restartUnknownAges(before: floor, now: boot.addingTimeInterval(60)) == 0, "the clock is still unset")
        let set = floor.addingTimeInterval(86_400 * 400)
        #expect(try await queue.store.restartUnknownAges(before: floor, now: set) == 1)
        let jobs = try await queue.store.jobs()
        #expect(jobs.first { $0.relativePath == Array("early".utf8) }?.ageStart == set)
        #expect(jobs.first { $0.relativePath == Array("late".utf8) }?.ageStart == floor.addingTimeInterval(100))
        #expect(try await queue.store.restartUnknownAges(before: floor, now: set) == 0, "once")
    }

    @Test("A kept file is not uploaded again unless it changes")
    func keptFile() async throws {
        let queue = try TestQueue()
        _ = try await queue.store.enqueue([file("a", inode: 7)], now: Date(), makeBoundary: boundary)
        let claimed = try await queue.store.claimDue(now: Date(), limit: 1)
        let done = try await queue.store.finish(claimed[0], startedAt: Date(), now: Date(), bytesSent: 1, transition: .succeeded(status: 200, body: [], contentType: nil))
        try await queue.store.markDisposed(done, disposition: .kept, finalPath: nil, now: Date())
        #expect(try await queue.store.enqueue([file("a", inode: 7)], now: Date(), makeBoundary: boundary).isEmpty)
        #expect(try await queue.store.enqueue([file("a", inode: 7, mtime: 2_000)], now: Date(), makeBoundary: boundary).count == 1)
    }

    @Test("The disposition column holds the same text as ever; Job reads it as a Disposition, and a name it does not know as pending")
    func dispositionColumn() async throws {
        let queue = try TestQueue()
        let jobs = try await queue.store.enqueue(
            Disposition.allCases.enumerated().map { file("f\($0.offset)", inode: UInt64($0.offset + 1)) }, now: Date(), makeBoundary: boundary)
        let claimed = try await queue.store.claimDue(now: Date(), limit: jobs.count)
        for (job, disposition) in zip(claimed, Disposition.allCases) {
            let done = try await queue.store.finish(job, startedAt: Date(), now: Date(), bytesSent: 1, transition: .succeeded(status: 200, body: [], contentType: nil))
            try await queue.store.markDisposed(done, disposition: disposition, finalPath: nil, now: Date())
        }
        let database = try DatabaseQueue(path: queue.path)
        let texts = try await database.read { try String.fetchAll($0, sql: "SELECT disposition FROM job ORDER BY seq") }
        #expect(texts == ["deleted", "moved", "kept", "left", "missing"])
        #expect(try await queue.store.jobs().reversed().map(\.disposition) == Disposition.allCases)
        try await database.write { try $0.execute(sql: "UPDATE job SET disposition = 'archived' WHERE seq = 1") }
        try database.close()
        #expect(try await queue.store.job(sequence: 1)?.disposition == nil)
    }

    @Test("An outcome's update writes every outcome column as the whole record would, and nothing else; a missing row is an error; inserted rows read back whole")
    func outcomeUpdate() async throws {
        let queue = try TestQueue()
        let queued = try await queue.store.enqueue([file("f", inode: 1)], now: Date(), makeBoundary: boundary)
        let at = { (seconds: Double) in Date(timeIntervalSince1970: 1_700_000_000 + seconds) }
        let sequence = try #require(queued.first?.sequence)
        var changed = try #require(try await queue.store.job(sequence: sequence))
        changed.state = .held
        changed.attempts = 3
        changed.updatedAt = at(1.5)
        changed.nextAttemptAt = at(2.25)
        changed.finishedAt = at(3.125)
        changed.lastError = "HTTP 503"
        changed.responseStatus = 503
        changed.responseBody = Array("busy".utf8)
        changed.responseContentType = "text/plain"
        changed.responseHeaders = [ResponseHeader(name: "Location", value: "/x/1")]
        changed.contentDigest = "sha-256=:AAAA:"
        changed.disposition = .kept
        changed.disposedAt = at(4.5)
        changed.heldAt = at(5.75)
        changed.attemptBase = 1
        changed.upload = ResumableUpload(url: "http://127.0.0.1/u/1", offset: 42, expires: at(6.5), endpointKey: "k")
        changed.fieldsSidecar = FileVersion(device: 7, inode: 8, size: 9, modificationTime: 10)
        var unchanged = changed
        unchanged.boundary = "not-written"   // not an outcome column
        unchanged.finalPath = Array("elsewhere".utf8)
        let written = unchanged
        try await queue.store.write { db in try written.updateOutcome(db) }
        #expect(try await queue.store.job(sequence: sequence) == changed)

        let attempt = Attempt(
            jobSequence: sequence, number: 4, startedAt: at(7.5), duration: 0.125, httpStatus: 503,
            error: "server answered 503", bytesSent: 16_384, outcome: .retry)
        try await queue.store.write { db in try attempt.insertRow(db) }
        #expect(try await queue.store.attempts(of: changed) == [attempt])

        var copy = changed
        copy.sequence = nil
        copy.id = JobID.generate(milliseconds: 1_700_000_000_000)
        copy.relativePath = Array("g".utf8)
        copy.finalPath = Array("elsewhere".utf8)
        copy.ageBase = at(8.5)
        copy.kind = .bundle
        let inserting = copy
        let inserted = try await queue.store.write { db in
            var row = inserting
            try row.insertRow(db)
            return row
        }
        #expect(inserted.sequence != nil && inserted.sequence != sequence)
        #expect(try await queue.store.job(sequence: #require(inserted.sequence)) == inserted)

        // Every column of the table is written by one of the two lists (a migration that adds a
        // column adds it to one of them).
        let columns = try await queue.store.read { db in try db.columns(in: "job").map(\.name) }
        #expect(Set(columns) == Set(["seq"] + Job.settledColumns + Job.outcomeColumns))
        #expect(columns.count == 1 + Job.settledColumns.count + Job.outcomeColumns.count)

        var gone = changed
        gone.sequence = 999
        let missing = gone
        await #expect(throws: RecordError.self) { try await queue.store.write { db in try missing.updateOutcome(db) } }
    }

    @Test("Kept response headers are stored as a JSON array of pairs that JSONSerialization reads back exactly", arguments: [
        "plain", "", "with \"quotes\" and \\backslashes\\", "tab\tnewline\ncr\r", "ctl \u{01}\u{08}\u{0C}\u{1F}\u{7F}", "/x/1?a=b&c=<d>",
        "ünïcødé 名前 ☃ 🚢", "\u{2028}\u{2029}",
    ])
    func responseHeaderJSON(value: String) throws {
        let headers = [ResponseHeader(name: "Location", value: value), ResponseHeader(name: "X-\"odd\"", value: "2")]
        let text = try #require(ResponseHeader.encoded(headers))
        let parsed = try JSONSerialization.jsonObject(with: Data(text.utf8)) as? [[String]]
        #expect(parsed == [["location", value], ["x-\"odd\"", "2"]])
        #expect(ResponseHeader.decoded(text) == headers)
        #expect(ResponseHeader.encoded([]) == nil)
    }

    @Test("Job ids are 26-character ULIDs that sort by creation time and are never reused")
    func ids() async throws {
        var previous = JobID.generate(milliseconds: 1_700_000_000_000)
        var seen = Set([previous])
        for offset in 1...2000 {
            let id = JobID.generate(milliseconds: 1_700_000_000_000 + UInt64(offset))
            #expect(id > previous)
            #expect(id.rawValue.count == 26)
            seen.insert(id)
            previous = id
        }
        #expect(seen.count == 2001)
        let sameMillisecond = Set((0..<1000).map { _ in JobID.generate(milliseconds: 5) })
        #expect(sameMillisecond.count == 1000)
    }

    @Test("A damaged database is refused with a clear error, never replaced")
    func corruptDatabase() throws {
        var template = Array("/tmp/ferry-corrupt.XXXXXX".utf8CString)
        let directory = String(cString: mkdtemp(&template)!)
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let path = directory + "/queue.sqlite"
        let garbage = Data((0..<8192).map { UInt8(truncatingIfNeeded: $0 &* 37) })
        _ = FileManager.default.createFile(atPath: path, contents: garbage)
        do {
            _ = try JobStore(path: path)
            Issue.record("a garbage file was opened as a queue")
        } catch {
            guard case .corrupt = error else {
                Issue.record("expected .corrupt, got \(error)")
                return
            }
            #expect(error.description.contains("will not start over it"))
        }
        #expect(FileManager.default.contents(atPath: path) == garbage)
    }

    @Test("Claims read a bounded number of rows however long the queue")
    func boundedClaims() async throws {
        let queue = try TestQueue()
        let files = (0..<5000).map { file("f\($0)", inode: UInt64($0)) }
        let jobs = try await queue.store.enqueue(files, now: Date(), makeBoundary: boundary)
        #expect(jobs.count == 5000)
        let claimed = try await queue.store.claimDue(now: Date(), limit: 4)
        #expect(claimed.count == 4)
        #expect(try await queue.store.counts()["s"]?[.queued] == 4996)
    }

    @Test("Metrics: the oldest waiting job and the last delivery per spool, read through their indexes")
    func spoolTimes() async throws {
        let queue = try TestQueue()
        let start = Date(timeIntervalSince1970: 1_700_000_000)
        #expect(try await queue.store.spoolTimes(["s", "t"]) == ["s": .init(), "t": .init()])
        _ = try await queue.store.enqueue([file("a", inode: 1)], now: start, makeBoundary: boundary)
        _ = try await queue.store.enqueue([file("b", inode: 2)], now: start.addingTimeInterval(10), makeBoundary: boundary)
        _ = try await queue.store.enqueue([file("c", inode: 3, spool: "t")], now: start.addingTimeInterval(20), makeBoundary: boundary)
        let claimed = try await queue.store.claimDue(now: start.addingTimeInterval(30), limit: 1)
        #expect(claimed.map(\.displayPath) == ["a"])
        _ = try await queue.store.finish(claimed[0], startedAt: start.addingTimeInterval(30), now: start.addingTimeInterval(31),
                                         bytesSent: 10, transition: .succeeded(status: 201, body: [], contentType: nil))
        var times = try await queue.store.spoolTimes(["s", "t"])
        #expect(times["s"] == .init(oldestWaiting: start.addingTimeInterval(10), lastSuccess: start.addingTimeInterval(31)))
        #expect(times["t"] == .init(oldestWaiting: start.addingTimeInterval(20), lastSuccess: nil))
        // A held job does not count as waiting.
        let c = try #require(try await queue.store.latestJob(spool: "t", relativePath: Array("c".utf8)))
        _ = try await queue.store.hold(c, now: start.addingTimeInterval(40), reason: "test")
        times = try await queue.store.spoolTimes(["t"])
        #expect(times["t"]?.oldestWaiting == nil)

        let plans = try await queue.store.spoolTimesQueryPlans()
        #expect(plans.count == 2)
        #expect(plans[0].contains("job_waiting_age"), "\(plans)")
        #expect(plans[1].contains("job_done_by_spool"), "\(plans)")
    }

    @Test("Group commit: concurrent writes commit together; one that throws is rolled back alone and only its caller sees the error")
    func groupCommit() async throws {
        let queue = try TestQueue()
        struct Refused: Error {}
        let store = queue.store
        let results = await withTaskGroup(of: (Int, Bool).self) { group in
            for index in 0..<200 {
                group.addTask {
                    do {
                        try await store.write { db in
                            try db.execute(sql: "INSERT INTO paused_spool (spool, paused_at) VALUES (?, 0)", arguments: ["s\(index)"])
                            if index % 7 == 0 { throw Refused() }  // after its insert: the savepoint must undo it
                        }
                        return (index, true)
                    } catch {
                        return (index, false)
                    }
                }
            }
            var results: [Int: Bool] = [:]
            for await (index, ok) in group { results[index] = ok }
            return results
        }
        #expect(results.count == 200)
        #expect(results.allSatisfy { $0.value == ($0.key % 7 != 0) })
        // What each caller was told is what is on disk, read through a separate connection.
        let reader = try DatabaseQueue(path: queue.path)
        defer { try? reader.close() }
        let stored = try await reader.read { try String.fetchSet($0, sql: "SELECT spool FROM paused_spool") }
        #expect(stored == Set((0..<200).filter { $0 % 7 != 0 }.map { "s\($0)" }))
    }

    @Test("The scheduler's queries use the per-spool due index (INDEXED BY: they fail without it), and counting uses a covering index")
    func schedulerQueryPlans() async throws {
        let queue = try TestQueue()
        _ = try await queue.store.enqueue((1...50).map { file("f\($0)", inode: UInt64($0)) }, now: Date(), makeBoundary: boundary)
        let groups = [[JobStore.SpoolSlots(spool: "s", available: .max)]]
        #expect(try await queue.store.claimDue(now: Date(), limit: 3, groups: groups, rotation: 0).count == 3)
        #expect(try await queue.store.nextDueDate(inSpools: ["s", "x"]) != nil)
        #expect(try await queue.store.nextDueDate(inSpools: ["x"]) == nil)
        let reader = try DatabaseQueue(path: queue.path)
        defer { try? reader.close() }
        let plan = try await reader.read { db in
            try Row.fetchAll(db, sql: "EXPLAIN QUERY PLAN SELECT spool, state, COUNT(*) AS n FROM job GROUP BY state, spool")
                .map { $0["detail"] as String? ?? "" }.joined(separator: "; ")
        }
        #expect(plan.contains("COVERING INDEX job_by_state_spool"), "\(plan)")
    }
}

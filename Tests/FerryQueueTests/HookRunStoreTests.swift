@testable import FerryQueue
import Foundation
import Testing

/// `hook_run`: written with the outcome, due once the file is disposed of, recorded run by run.
@Suite("Hook runs in the queue")
struct HookRunStoreTests {
    @Test("runs are queued in the outcome's transaction, wait for the disposition, and keep their answer's headers")
    func queuedWithOutcome() async throws {
        let queue = try TestQueue()
        let store = queue.store
        _ = try await store.enqueue([file("a", inode: 7)], now: Date(), makeBoundary: boundary)
        let claimed = try await store.claimDue(now: Date(), limit: 1)
        let now = Date()
        let done = try await store.finish(
            claimed[0], startedAt: now, now: now, bytesSent: 1,
            transition: .succeeded(status: 201, body: Array("{}".utf8), contentType: "application/json",
                                   headers: [ResponseHeader(name: "Location", value: "/media/1")], digest: "sha-256=:AA==:"),
            hooks: [.result, .delivered])
        let runs = try await store.hookRuns(of: done)
        #expect(runs.map(\.kind) == [.delivered, .result] && runs.allSatisfy { $0.state == .pending && $0.attempts == 0 })
        #expect(try await store.dueHooks(now: now.addingTimeInterval(1), limit: 10, excluding: []).isEmpty, "not before the disposition")
        #expect(try await store.nextHookDue(excluding: []) == nil)
        try await store.markDisposed(done, disposition: .deleted, finalPath: nil, now: now)
        let due = try await store.dueHooks(now: now.addingTimeInterval(1), limit: 10, excluding: [])
        #expect(due.count == 2)
        #expect(due.first?.job.responseHeaders.value("location") == "/media/1")
        #expect(due.first?.job.contentDigest == "sha-256=:AA==:")
        let running: Set<HookKey> = [HookKey(jobSequence: done.sequence!, kind: .delivered)]
        #expect(try await store.dueHooks(now: now.addingTimeInterval(1), limit: 10, excluding: running).map(\.run.kind) == [.result])

        // A run that gave up is pending again after retry-hook, from zero attempts.
        let delivered = try #require(due.first { $0.run.kind == .delivered }).run
        var gaveUp = delivered
        gaveUp.state = .gaveUp
        gaveUp.attempts = 5
        gaveUp.lastExit = 1
        gaveUp.updatedAt = now.addingTimeInterval(2)
        #expect(try await store.recordHookRun(gaveUp, replacing: delivered))
        #expect(try await store.hookRuns(of: done).first { $0.kind == .delivered }?.state == .gaveUp)
        #expect(try await store.retryHooks(of: done, kind: .result, now: now).isEmpty, "the result file did not give up")
        #expect(try await store.retryHooks(of: done, kind: nil, now: now) == [.delivered])
        let again = try #require(try await store.hookRuns(of: done).first { $0.kind == .delivered })
        #expect(again.state == .pending && again.attempts == 0)
    }

    @Test("a failure without an attempt and an operator's cancel queue on_failed too")
    func failuresQueueHooks() async throws {
        let queue = try TestQueue()
        let store = queue.store
        let jobs = try await store.enqueue([file("a", inode: 1), file("b", inode: 2)], now: Date(), makeBoundary: boundary)
        let failed = try await store.fail(jobs[0], now: Date(), error: "gone", hooks: [.failed])
        #expect(try await store.hookRuns(of: failed).map(\.kind) == [.failed])
        guard case .done(let cancelled) = try await store.cancel(jobs[1], now: Date(), reason: "no", hooks: [.failed]) else {
            Issue.record("not cancelled")
            return
        }
        #expect(try await store.hookRuns(of: cancelled).map(\.kind) == [.failed])
    }

    @Test("an operator's retry of a failed job drops its pending on_failed run; a run's end is not recorded over a newer outcome's")
    func retriedJob() async throws {
        let queue = try TestQueue()
        let store = queue.store
        let job = try #require(try await store.enqueue([file("a", inode: 3)], now: Date(), makeBoundary: boundary).first)
        let failed = try await store.fail(job, now: Date(), error: "rejected", hooks: [.failed])
        try await store.markDisposed(failed, disposition: .moved, finalPath: Array("/f/a".utf8), now: Date())
        let first = try #require(try await store.dueHooks(now: Date().addingTimeInterval(1), limit: 5, excluding: []).first).run

        // Reopened: held while the file goes back, so nothing is due; queued again: the pending run is gone.
        let reopened = try await store.reopen(failed, now: Date())
        #expect(try await store.dueHooks(now: Date().addingTimeInterval(1), limit: 5, excluding: []).isEmpty)
        _ = try await store.requeueReopened(reopened, identity: failed.identity, now: Date(), reason: "retry")
        #expect(try await store.hookRuns(of: failed).isEmpty)

        // It fails again: a new run is queued; the old run's end does not overwrite it.
        let claimed = try #require(try await store.claimDue(now: Date().addingTimeInterval(1), limit: 1).first)
        let again = try await store.finish(
            claimed, startedAt: Date(), now: Date().addingTimeInterval(0.01), bytesSent: 1,
            transition: .failed(error: "rejected again", status: 422, body: nil, contentType: nil), hooks: [.failed])
        var ended = first
        ended.state = .succeeded
        ended.attempts = 1
        ended.updatedAt = Date()
        #expect(try await store.recordHookRun(ended, replacing: first) == false)
        let pending = try #require(try await store.hookRuns(of: again).first)
        #expect(pending.state == .pending && pending.attempts == 0)
    }
}

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
        var gaveUp = try #require(due.first { $0.run.kind == .delivered }).run
        gaveUp.state = .gaveUp
        gaveUp.attempts = 5
        gaveUp.lastExit = 1
        try await store.recordHookRun(gaveUp)
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
}

@testable import FerryQueue
import Foundation
import Testing

/// The queue's side of a wall clock that is stepped: pending jobs move with it, and jobs due later
/// than any delay Ferry sets are made due. A real SQLite file, no daemon.
@Suite("JobStore: a wall clock set forward or back")
struct ClockStepStoreTests {
    /// Three jobs: one queued, one retrying in ten minutes, one done; all created at `start`.
    func threeJobs(_ queue: TestQueue, start: Date) async throws {
        _ = try await queue.store.enqueue([file("q", inode: 1), file("r", inode: 2), file("d", inode: 3)], now: start, makeBoundary: boundary)
        let claimed = try await queue.store.claimDue(now: start, limit: 3)
        let retrying = try #require(claimed.first { $0.displayPath == "r" })
        try await queue.store.finish(retrying, startedAt: start, now: start, bytesSent: 0, transition: .retry(
            at: start.addingTimeInterval(600), error: "503", status: 503, body: nil, contentType: nil))
        let done = try #require(claimed.first { $0.displayPath == "d" })
        _ = try await queue.store.finish(done, startedAt: start, now: start, bytesSent: 1, transition: .succeeded(status: 200, body: [], contentType: nil))
        let queued = try #require(claimed.first { $0.displayPath == "q" })
        try await queue.store.finish(queued, startedAt: start, now: start, bytesSent: 0, transition: .retry(
            at: start, error: "cut", status: nil, body: nil, contentType: nil))
    }

    @Test("a step moves the times the old clock stamped on pending jobs; finished jobs, and times read after the step, stay", arguments: [
        Duration.seconds(56 * 365 * 86_400), .seconds(-3 * 3600),
    ])
    func shift(_ step: Duration) async throws {
        let queue = try TestQueue()
        let start = Date(timeIntervalSince1970: 1_000_000_000)
        try await threeJobs(queue, start: start)
        let seconds = Double(step.components.seconds)
        // The step came 20 s after `start`; a file queued 10 s after it is stamped by the new clock.
        let after = start.addingTimeInterval(seconds + 30)
        _ = try await queue.store.enqueue([file("new", inode: 4)], now: after, makeBoundary: boundary)
        let now = start.addingTimeInterval(seconds + 60)
        #expect(try await queue.store.shiftPending(by: step, readAfter: start.addingTimeInterval(seconds)...now, now: now) == 2)
        let jobs = Dictionary(uniqueKeysWithValues: try await queue.store.jobs().map { ($0.displayPath, $0) })
        #expect(jobs["r"]?.nextAttemptAt == start.addingTimeInterval(600 + seconds), "still ten minutes after it was scheduled")
        #expect(jobs["r"]?.ageStart == start.addingTimeInterval(seconds), "no older than before the step")
        #expect(jobs["q"]?.ageStart == start.addingTimeInterval(seconds))
        #expect(jobs["d"]?.ageStart == start, "a finished job keeps its times")
        #expect(jobs["new"]?.ageStart == after && jobs["new"]?.nextAttemptAt == after, "stamped after the step: left alone")
    }

    @Test("a step moves the next try of a pending hook run too")
    func hookRuns() async throws {
        let queue = try TestQueue()
        let start = Date(timeIntervalSince1970: 1_000_000)
        _ = try await queue.store.enqueue([file("a", inode: 7)], now: start, makeBoundary: boundary)
        let claimed = try await queue.store.claimDue(now: start, limit: 1)
        let done = try await queue.store.finish(
            claimed[0], startedAt: start, now: start, bytesSent: 1, transition: .succeeded(status: 201, body: [], contentType: nil), hooks: [.delivered])
        let before = try #require(try await queue.store.hookRuns(of: done).first).nextAt
        _ = try await queue.store.shiftPending(by: .seconds(-7200), readAfter: start.addingTimeInterval(-7180)...start.addingTimeInterval(-7100), now: start)
        #expect(try await queue.store.hookRuns(of: done).first?.nextAt == before.addingTimeInterval(-7200))
    }

    @Test("jobs due later than the horizon (a clock set back while ferryd was stopped) are made due now, once; others keep their time")
    func beyondHorizon() async throws {
        let queue = try TestQueue()
        let ahead = Date(timeIntervalSince1970: 2_000_000_000)
        try await threeJobs(queue, start: ahead)
        let now = ahead.addingTimeInterval(-30 * 86_400)
        #expect(try await queue.store.rescheduleBeyond(horizon: .seconds(2 * 86_400), spool: "other", now: now) == 0, "per spool")
        #expect(try await queue.store.rescheduleBeyond(horizon: .seconds(2 * 86_400), spool: "s", now: now) == 2)
        let jobs = Dictionary(uniqueKeysWithValues: try await queue.store.jobs().map { ($0.displayPath, $0) })
        #expect(jobs["r"]?.nextAttemptAt == now && jobs["q"]?.nextAttemptAt == now)
        #expect(try await queue.store.claimDue(now: now, limit: 10).count == 2, "due at once")
        #expect(try await queue.store.rescheduleBeyond(horizon: .seconds(2 * 86_400), spool: "s", now: now) == 0)
        let near = try TestQueue()
        try await threeJobs(near, start: now)
        #expect(try await near.store.rescheduleBeyond(horizon: .seconds(2 * 86_400), spool: "s", now: now) == 0, "a job due in ten minutes is left alone")
    }
}

import FerryTestSupport
@testable import FerryTransport
import Synchronization
import Testing

/// One loop watches every request of an uploader: it fires a stalled watchdog (and only that one),
/// keeps one that moves, and ends when nothing is watched.
@Suite("Watchdog patrol")
struct WatchdogPatrolTests {
    @Test("A stalled request is fired and cancelled; one whose deadline is far is not; the loop ends when nothing is watched")
    func firesOnlyTheStalled() async throws {
        let timeout = Duration.milliseconds(300)
        let patrol = WatchdogPatrol(timeout: timeout)
        let stalled = ProgressWatchdog(timeout: timeout)
        let moving = ProgressWatchdog(timeout: .seconds(60))
        let cancelled = Mutex<[String]>([])
        let start = ContinuousClock.now
        _ = patrol.watch(stalled) { cancelled.withLock { $0.append("stalled") } }
        let movingID = patrol.watch(moving) { cancelled.withLock { $0.append("moving") } }
        #expect(patrol.isPatrolling)
        try await waitUntil("the stalled watchdog to fire") { stalled.fired }
        // Fired once its deadline passed, and within one interval of it.
        #expect(ContinuousClock.now - start >= timeout)
        #expect(ContinuousClock.now - start < timeout + .seconds(2))
        #expect(cancelled.withLock { $0 } == ["stalled"])
        #expect(!moving.fired)
        patrol.stopWatching(movingID)
        try await waitUntil("the loop to end") { !patrol.isPatrolling }
        #expect(cancelled.withLock { $0 } == ["stalled"])

        // Watching again starts a new loop.
        let again = ProgressWatchdog(timeout: timeout)
        let againID = patrol.watch(again) {}
        #expect(patrol.isPatrolling)
        patrol.stopWatching(againID)
        try await waitUntil("the new loop to end") { !patrol.isPatrolling }
        #expect(!again.fired)
    }

    @Test("An answer that started must end within the timeout of its status line, however it trickles")
    func answerDeadline() async throws {
        let timeout = Duration.milliseconds(300)
        let patrol = WatchdogPatrol(timeout: timeout)
        let watchdog = ProgressWatchdog(timeout: timeout)
        watchdog.answerStarted()
        _ = patrol.watch(watchdog) {}
        try await waitUntil("the watchdog to fire") {
            watchdog.progressed()   // a byte at a time
            return watchdog.fired
        }
        #expect(watchdog.answerOverdue)
        try await waitUntil("the loop to end") { !patrol.isPatrolling }
    }

    @Test("An answer that may trickle (S3's completion, whitespace while it assembles) ends only when nothing moves for the timeout")
    func trickleAllowed() async throws {
        let timeout = Duration.seconds(1)
        let patrol = WatchdogPatrol(timeout: timeout)
        let watchdog = ProgressWatchdog(timeout: timeout, limitsAnswer: false)
        watchdog.answerStarted()
        let start = ContinuousClock.now
        _ = patrol.watch(watchdog) {}
        // Bytes keep coming for three timeouts: not fired.
        try await waitUntil("three timeouts to pass") {
            watchdog.progressed()
            #expect(!watchdog.fired)
            return ContinuousClock.now - start >= timeout * 3
        }
        #expect(!watchdog.fired)
        // Then nothing moves: fired, and not for the answer's deadline.
        try await waitUntil("the watchdog to fire") { watchdog.fired }
        #expect(!watchdog.answerOverdue)
        try await waitUntil("the loop to end") { !patrol.isPatrolling }
    }

    @Test("A request stuck on a spool file that changed under it is fired once nothing has moved for a second, long before the timeout; an unchanged one is not")
    func stuckOnChangedSource() async throws {
        let patrol = WatchdogPatrol(timeout: .seconds(60))
        let asked = Mutex(0)
        let changed = ProgressWatchdog(timeout: .seconds(60)) { asked.withLock { $0 += 1 }; return true }
        let unchanged = ProgressWatchdog(timeout: .seconds(60)) { false }
        let start = ContinuousClock.now
        _ = patrol.watch(changed) {}
        let unchangedID = patrol.watch(unchanged) {}
        try await waitUntil("the stuck watchdog to fire", timeout: .seconds(10)) { changed.fired }
        #expect(ContinuousClock.now - start >= ProgressWatchdog.sourceCheckAfter)
        #expect(asked.withLock { $0 } == 1, "asked only once nothing had moved for a second")
        #expect(!changed.answerOverdue)
        #expect(!unchanged.fired)
        patrol.stopWatching(unchangedID)
        try await waitUntil("the loop to end") { !patrol.isPatrolling }

        // Moving, it is not asked at all.
        let calls = Mutex(0)
        let moving = ProgressWatchdog(timeout: .seconds(60)) { calls.withLock { $0 += 1 }; return true }
        #expect(!moving.stuckOnChangedSource(at: .now))
        #expect(calls.withLock { $0 } == 0)
        #expect(moving.stuckOnChangedSource(at: .now + .seconds(2)))
    }

    @Test("A wait for bandwidth longer than the timeout is no stall: the watchdog counts from its end")
    func bandwidthWait() async throws {
        let timeout = Duration.milliseconds(300)
        let patrol = WatchdogPatrol(timeout: timeout)
        let watchdog = ProgressWatchdog(timeout: timeout)
        let start = ContinuousClock.now
        watchdog.willWait(.seconds(1))
        _ = patrol.watch(watchdog) {}
        try await waitUntil("the watchdog to fire once the wait and the timeout are over", timeout: .seconds(10)) { watchdog.fired }
        #expect(ContinuousClock.now - start >= .seconds(1) + timeout, "fired during the wait")
        try await waitUntil("the loop to end") { !patrol.isPatrolling }
    }
}

import Synchronization
import Testing

@testable import FerrySpool

/// The watcher's timer: a look that is due comes, however many later plans arrive meanwhile.
@Suite("TickTimer")
struct TickTimerTests {
    @Test("A steady stream of plans, each asking for a look soon, does not postpone the look that is due")
    func steadyStreamDoesNotStarve() async throws {
        let timer = TickTimer(firstAt: .now + .seconds(3600))
        let ticks = Atomic<Int>(0)
        let runner = Task { await timer.run(retry: .milliseconds(10)) { ticks.add(1, ordering: .relaxed); return true } }
        defer { runner.cancel() }
        // As the watcher's loop does after every event while a file settles: a look 100 ms on. The
        // events come every 5 ms, so a plan that each of them pushed back would never fall due.
        let deadline = ContinuousClock.now + .seconds(10)
        while ticks.load(ordering: .relaxed) == 0, ContinuousClock.now < deadline {
            timer.schedule(at: .now + .milliseconds(100))
            try await Task.sleep(for: .milliseconds(5))
        }
        #expect(ticks.load(ordering: .relaxed) > 0, "no look within 10 s under a steady stream of plans")
    }

    @Test("A sooner plan wakes the timer; after a tick it waits for the next plan")
    func soonerPlanWakes() async throws {
        let timer = TickTimer(firstAt: .now + .seconds(3600))
        let ticks = Atomic<Int>(0)
        let runner = Task { await timer.run(retry: .milliseconds(10)) { ticks.add(1, ordering: .relaxed); return true } }
        defer { runner.cancel() }
        timer.schedule(at: .now)
        let deadline = ContinuousClock.now + .seconds(10)
        while ticks.load(ordering: .relaxed) == 0, ContinuousClock.now < deadline { await Task.yield() }
        #expect(ticks.load(ordering: .relaxed) == 1)
        // No new plan: the timer sleeps (for a day) rather than ticking again. A second plan brings
        // the second tick.
        timer.schedule(at: .now)
        while ticks.load(ordering: .relaxed) < 2, ContinuousClock.now < deadline { await Task.yield() }
        #expect(ticks.load(ordering: .relaxed) == 2)
    }

    @Test("A tick the loop could not take (its input buffer full) is tried again")
    func droppedTickIsRetried() async throws {
        let timer = TickTimer(firstAt: .now)
        let attempts = Atomic<Int>(0)
        // The first two ticks find the buffer full; the third gets through.
        let runner = Task { await timer.run(retry: .milliseconds(10)) { attempts.add(1, ordering: .relaxed).newValue >= 3 } }
        defer { runner.cancel() }
        let deadline = ContinuousClock.now + .seconds(10)
        while attempts.load(ordering: .relaxed) < 3, ContinuousClock.now < deadline { await Task.yield() }
        #expect(attempts.load(ordering: .relaxed) == 3, "without retries the timer would sleep for a day after the first")
    }
}

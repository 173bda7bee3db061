import FerrySystem
import Synchronization
import Testing

/// One OPTIONS shared by the uploads that start together: a waiter that is cancelled leaves, and
/// the others still get the answer.
@Suite("Waiting for a shared task")
struct SharedTaskWaitTests {
    /// A value that is given when the test says so.
    final class Gate: Sendable {
        private let state = Mutex<(continuation: CheckedContinuation<Void, Never>?, opened: Bool)>((nil, false))
        func wait() async {
            await withCheckedContinuation { continuation in
                let resumeNow = state.withLock { state -> Bool in
                    if state.opened { return true }
                    state.continuation = continuation
                    return false
                }
                if resumeNow { continuation.resume() }
            }
        }
        func open() {
            let continuation = state.withLock { state -> CheckedContinuation<Void, Never>? in
                state.opened = true
                defer { state.continuation = nil }
                return state.continuation
            }
            continuation?.resume()
        }
    }

    @Test("a cancelled waiter gets its own answer at once; the shared task is not cancelled and the other waiter gets its value")
    func cancelledWaiterLeaves() async {
        let gate = Gate()
        let shared = Task<String, Never> {
            await gate.wait()
            return Task.isCancelled ? "cancelled" : "answer"
        }
        let leaving = Task { await SharedTaskWait.value(of: shared, ifCancelled: "left") }
        let staying = Task { await SharedTaskWait.value(of: shared, ifCancelled: "left") }
        leaving.cancel()
        // The cancelled waiter returns while the shared task is still waiting at the gate.
        #expect(await leaving.value == "left")
        gate.open()
        #expect(await staying.value == "answer")
        #expect(await shared.value == "answer")
    }

    @Test("a waiter cancelled before it waits returns at once; one that comes after the value gets it")
    func beforeAndAfter() async {
        let shared = Task<Int, Never> { 7 }
        let early = Task {
            withUnsafeCurrentTask { $0?.cancel() }
            return await SharedTaskWait.value(of: shared, ifCancelled: -1)
        }
        #expect(await early.value == -1)
        _ = await shared.value
        #expect(await SharedTaskWait.value(of: shared, ifCancelled: -1) == 7)
    }
}

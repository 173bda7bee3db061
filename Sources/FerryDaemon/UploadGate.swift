import Synchronization

/// The upload slots, as a gate: at most `capacity` jobs send at once, and the others wait at the
/// gate, higher `priority` first and otherwise in the order they came.
///
/// The scheduler claims a few jobs more than there are slots, and their pipelines open and read
/// their files while they wait here; so a slot given back is taken at once by a job that is
/// ready to send, rather than after a claim's commit and an open. Waiting can be cancelled (an
/// operator stopping the job, shutdown), and a closed gate (shutdown) lets no one in.
final class UploadGate: Sendable {
    /// The gate was closed, or the waiting task cancelled: the job does not send.
    struct Refused: Error {}

    private struct Waiter {
        let id: UInt64
        let priority: Int
        let tag: String
        let continuation: CheckedContinuation<Void, any Error>
    }
    private struct State {
        var capacity: Int
        var inUse = 0
        var waiters: [Waiter] = []
        /// Waiters cancelled before they were queued.
        var cancelled: Set<UInt64> = []
        var nextID: UInt64 = 0
        var closed = false
    }
    private let state: Mutex<State>

    init(capacity: Int) {
        state = Mutex(State(capacity: capacity))
    }

    /// How many jobs may send at once (a configuration reload changes it; slots in use above a
    /// lowered capacity are given back before anyone else enters).
    var capacity: Int {
        get { state.withLock { $0.capacity } }
        set {
            let admitted = state.withLock { state -> [Waiter] in
                state.capacity = newValue
                return Self.admit(&state)
            }
            for waiter in admitted { waiter.continuation.resume() }
        }
    }

    /// The number of jobs sending now.
    var inUse: Int { state.withLock { $0.inUse } }

    /// The number of jobs waiting for a slot.
    var waiting: Int { state.withLock { $0.waiters.count } }

    /// Waits for a slot (behind waiters of the same or a higher `priority`). Throws ``Refused`` if
    /// the gate is closed, the task is cancelled, or ``refuse(where:)`` names its `tag` first.
    func enter(priority: Int = 0, tag: String = "") async throws {
        let id = state.withLock { state -> UInt64 in
            state.nextID &+= 1
            return state.nextID
        }
        // A task cancelled after it entered (or after it was refused) leaves no mark behind; if it
        // entered, it gives the slot back with `leave`.
        defer { state.withLock { _ = $0.cancelled.remove(id) } }
        try await withTaskCancellationHandler {
            try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<Void, any Error>) in
                let outcome = state.withLock { state -> Bool? in
                    if state.closed || state.cancelled.remove(id) != nil { return false }
                    if state.waiters.isEmpty && state.inUse < state.capacity {
                        state.inUse += 1
                        return true
                    }
                    let place = state.waiters.firstIndex { $0.priority < priority } ?? state.waiters.endIndex
                    state.waiters.insert(Waiter(id: id, priority: priority, tag: tag, continuation: continuation), at: place)
                    return nil
                }
                switch outcome {
                case true?: continuation.resume()
                case false?: continuation.resume(throwing: Refused())
                case nil: break
                }
            }
        } onCancel: {
            let waiter = state.withLock { state -> Waiter? in
                guard let index = state.waiters.firstIndex(where: { $0.id == id }) else {
                    state.cancelled.insert(id)
                    return nil
                }
                return state.waiters.remove(at: index)
            }
            waiter?.continuation.resume(throwing: Refused())
        }
    }

    /// Gives a slot back; the first waiter, if any, takes it.
    func leave() {
        let admitted = state.withLock { state -> [Waiter] in
            state.inUse -= 1
            return Self.admit(&state)
        }
        for waiter in admitted { waiter.continuation.resume() }
    }

    /// Refuses those waiting whose `tag` (the scheduler's: their spool) matches: their spool may
    /// not start uploads now.
    func refuse(where matches: (String) -> Bool) {
        let refused = state.withLock { state -> [Waiter] in
            let refused = state.waiters.filter { matches($0.tag) }
            if !refused.isEmpty { state.waiters.removeAll { matches($0.tag) } }
            return refused
        }
        for waiter in refused { waiter.continuation.resume(throwing: Refused()) }
    }

    /// Lets no one in any more; those waiting are refused.
    func close() {
        let refused = state.withLock { state -> [Waiter] in
            state.closed = true
            defer { state.waiters.removeAll() }
            return state.waiters
        }
        for waiter in refused { waiter.continuation.resume(throwing: Refused()) }
    }

    private static func admit(_ state: inout State) -> [Waiter] {
        var admitted: [Waiter] = []
        while !state.closed && state.inUse < state.capacity && !state.waiters.isEmpty {
            state.inUse += 1
            admitted.append(state.waiters.removeFirst())
        }
        return admitted
    }
}

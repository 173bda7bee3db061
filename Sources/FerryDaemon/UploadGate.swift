import Synchronization

/// The upload slots, as a gate: at most `capacity` jobs send at once; the others wait in line,
/// higher `priority` first; within one priority, spools (tags) take turns, and one spool's jobs go
/// in the order they were claimed.
///
/// The scheduler claims a few jobs more than there are slots and gives each a ``Place`` in line at
/// once, in the order it claimed them; their pipelines open and read their files, then
/// ``enter(_:)``. So a slot given back is taken at once by a job that is ready to send, rather than
/// after a claim's commit and an open. A job not ready yet keeps its place: a job of lower priority
/// does not pass it (one of the same priority may). Waiting can be cancelled (an operator stopping
/// the job, shutdown); a closed gate (shutdown) lets no one in.
final class UploadGate: Sendable {
    /// The gate was closed, the waiting task cancelled, or the place refused: the job does not send.
    struct Refused: Error {}

    /// A job's place in line, taken when it is claimed.
    struct Place: Sendable, Hashable {
        fileprivate let id: UInt64
    }

    private struct Entry {
        let id: UInt64
        let priority: Int
        let tag: String
        /// Set once the job is ready to send and waits in ``enter(_:)``.
        var continuation: CheckedContinuation<Void, any Error>?
    }
    private struct State {
        var capacity: Int
        var inUse = 0
        /// Slots in use by tag (spool): a spool sending already waits its turn behind the others.
        var sending: [String: Int] = [:]
        /// Higher priority first, then in the order the places were taken.
        var line: [Entry] = []
        /// Places taken out of line before their job entered (refused, cancelled, closed).
        var refused: Set<UInt64> = []
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
            let admitted = state.withLock { state -> [CheckedContinuation<Void, any Error>] in
                state.capacity = newValue
                return Self.admit(&state)
            }
            for continuation in admitted { continuation.resume() }
        }
    }

    /// The number of jobs sending now.
    var inUse: Int { state.withLock { $0.inUse } }

    /// The number of jobs in line (ready or not).
    var waiting: Int { state.withLock { $0.line.count } }

    /// The number of jobs in line that are ready and wait in ``enter(_:)``.
    var ready: Int { state.withLock { $0.line.filter { $0.continuation != nil }.count } }

    /// Takes a place in line for a job just claimed; `tag` (its spool) is what ``refuse(where:)``
    /// matches.
    func reserve(priority: Int = 0, tag: String = "") -> Place {
        state.withLock { state in
            state.nextID &+= 1
            let id = state.nextID
            if state.closed {
                state.refused.insert(id)
            } else {
                state.line.insert(Entry(id: id, priority: priority, tag: tag), at: Self.index(for: tag, priority: priority, in: state))
            }
            return Place(id: id)
        }
    }

    /// Takes a place and waits for a slot.
    func enter(priority: Int = 0, tag: String = "") async throws {
        try await enter(reserve(priority: priority, tag: tag))
    }

    /// The job is ready: waits for a slot. Throws ``Refused`` if the gate is closed, the task is
    /// cancelled, or the place was refused first; the place is then gone.
    func enter(_ place: Place) async throws {
        defer { state.withLock { _ = $0.refused.remove(place.id) } }
        try await withTaskCancellationHandler {
            try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<Void, any Error>) in
                let (admitted, refused) = state.withLock { state -> ([CheckedContinuation<Void, any Error>], Bool) in
                    guard !state.closed, !state.refused.contains(place.id),
                          let index = state.line.firstIndex(where: { $0.id == place.id }) else {
                        return ([], true)
                    }
                    state.line[index].continuation = continuation
                    return (Self.admit(&state), false)
                }
                if refused { continuation.resume(throwing: Refused()) }
                for continuation in admitted { continuation.resume() }
            }
        } onCancel: {
            let (taken, admitted) = take { $0.id == place.id }
            for continuation in taken { continuation.resume(throwing: Refused()) }
            for continuation in admitted { continuation.resume() }
        }
    }

    /// Gives up a place whose job will not enter (it ended before its send); those behind it move
    /// up. A place already admitted or gone is left alone.
    func withdraw(_ place: Place) {
        let (taken, admitted) = take { $0.id == place.id }
        for continuation in taken { continuation.resume(throwing: Refused()) }
        for continuation in admitted { continuation.resume() }
        state.withLock { _ = $0.refused.remove(place.id) }
    }

    /// Gives back a slot that a job of `tag` held; the first in line that is ready takes it.
    func leave(tag: String = "") {
        let admitted = state.withLock { state -> [CheckedContinuation<Void, any Error>] in
            state.inUse -= 1
            if let held = state.sending[tag] { state.sending[tag] = held > 1 ? held - 1 : nil }
            return Self.admit(&state)
        }
        for continuation in admitted { continuation.resume() }
    }

    /// Where a new place of `tag` goes: behind every higher priority, and within its own, by turns.
    /// A place's turn is how many of its spool's jobs are before it, sending or in line; the new
    /// one goes before the first of its priority whose turn is later than its own. So a spool with
    /// one file waits behind one job of each other spool, not behind a backlog claimed ahead.
    private static func index(for tag: String, priority: Int, in state: State) -> Int {
        var turns = state.sending
        let own = (state.sending[tag] ?? 0) + state.line.filter { $0.priority == priority && $0.tag == tag }.count
        for (index, entry) in state.line.enumerated() {
            if entry.priority < priority { return index }
            guard entry.priority == priority else { continue }
            let turn = turns[entry.tag] ?? 0
            if turn > own { return index }
            turns[entry.tag] = turn + 1
        }
        return state.line.endIndex
    }

    /// Refuses the places whose `tag` (the scheduler's: their spool) matches: their spool may not
    /// start uploads now.
    func refuse(where matches: (String) -> Bool) {
        let (taken, admitted) = take { matches($0.tag) }
        for continuation in taken { continuation.resume(throwing: Refused()) }
        for continuation in admitted { continuation.resume() }
    }

    /// Lets no one in any more; those in line are refused.
    func close() {
        state.withLock { $0.closed = true }
        let (taken, _) = take { _ in true }
        for continuation in taken { continuation.resume(throwing: Refused()) }
    }

    /// Takes the matching entries out of line (refusing the places of those not waiting yet), and
    /// lets in those that no longer wait behind them.
    private func take(where matches: (Entry) -> Bool) -> (taken: [CheckedContinuation<Void, any Error>], admitted: [CheckedContinuation<Void, any Error>]) {
        state.withLock { state in
            var taken: [CheckedContinuation<Void, any Error>] = []
            var kept: [Entry] = []
            for entry in state.line {
                if !matches(entry) {
                    kept.append(entry)
                } else if let continuation = entry.continuation {
                    taken.append(continuation)
                } else {
                    state.refused.insert(entry.id)
                }
            }
            state.line = kept
            return (taken, Self.admit(&state))
        }
    }

    /// Lets in the ready entries that fit, in line order; an entry not ready yet holds back those
    /// of lower priority behind it.
    private static func admit(_ state: inout State) -> [CheckedContinuation<Void, any Error>] {
        var admitted: [CheckedContinuation<Void, any Error>] = []
        var blocking: Int?
        var index = 0
        while !state.closed && state.inUse < state.capacity && index < state.line.count {
            let entry = state.line[index]
            if let blocking, entry.priority < blocking { break }
            if let continuation = entry.continuation {
                state.inUse += 1
                state.sending[entry.tag, default: 0] += 1
                state.line.remove(at: index)
                admitted.append(continuation)
            } else {
                blocking = blocking ?? entry.priority
                index += 1
            }
        }
        return admitted
    }
}

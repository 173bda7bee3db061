@testable import FerryDaemon
import Synchronization
import Testing

/// The upload slots as a gate: how many send at once, in which order the others get in, and that
/// a stopped job or a shutdown lets no one through. No sockets, no files.
@Suite("UploadGate: upload slots, and the jobs claimed ahead waiting for them")
struct UploadGateTests {
    /// Waits (with a deadline) until `condition` holds.
    static func until(_ what: String, _ condition: () -> Bool) async throws {
        let deadline = ContinuousClock.now + .seconds(10)
        while !condition() {
            guard ContinuousClock.now < deadline else {
                Issue.record("timed out waiting for \(what)")
                return
            }
            await Task.yield()
        }
    }

    /// The names of the tasks that got in, in the order they did.
    final class Arrivals: Sendable {
        private let names = Mutex<[String]>([])
        func append(_ name: String) { names.withLock { $0.append(name) } }
        var all: [String] { names.withLock { $0 } }
        var count: Int { all.count }
        var isEmpty: Bool { all.isEmpty }
    }

    /// A gate of one slot, taken.
    static func fullGate() async throws -> (UploadGate, Arrivals) {
        let gate = UploadGate(capacity: 1)
        try await gate.enter()
        return (gate, Arrivals())
    }

    /// A free slot, a place of priority 10 whose job is not ready, and behind it a job of priority 0
    /// named `low` that is ready (its task).
    static func lineHeldByAPlaceNotReady(low: String) async throws -> (UploadGate, Arrivals, UploadGate.Place, Task<Bool, Never>) {
        let gate = UploadGate(capacity: 1)
        let order = Arrivals()
        let high = gate.reserve(priority: 10)
        let task = entering(gate, at: gate.reserve(priority: 0), low, order: order)
        try await until("\(low) ready in line") { gate.ready == 1 && gate.waiting == 2 }
        return (gate, order, high, task)
    }

    /// Starts a task that enters the gate (at `place`, or at a place of `priority` taken now) and,
    /// once in, notes `name` in `order`; it returns whether it got in.
    static func entering(_ gate: UploadGate, at place: UploadGate.Place? = nil, _ name: String, priority: Int = 0, tag: String = "",
                         order: Arrivals) -> Task<Bool, Never> {
        Task {
            do {
                if let place { try await gate.enter(place) } else { try await gate.enter(priority: priority, tag: tag) }
                order.append(name)
                return true
            } catch {
                return false
            }
        }
    }

    @Test("No more than the capacity are in at once; each slot given back lets the next in",
          arguments: [1, 2, 3])
    func capacityHolds(capacity: Int) async throws {
        let gate = UploadGate(capacity: capacity)
        let order = Arrivals()
        let tasks = (0..<6).map { Self.entering(gate, "job\($0)", order: order) }
        try await Self.until("\(capacity) in and the rest waiting") {
            gate.inUse == capacity && gate.waiting == 6 - capacity && order.count == capacity
        }
        for admitted in capacity..<6 {
            gate.leave()
            try await Self.until("one more in") { order.count == admitted + 1 }
            #expect(gate.inUse == capacity)
        }
        for task in tasks { #expect(await task.value) }
        for _ in 0..<capacity { gate.leave() }
        #expect(gate.inUse == 0)
    }

    @Test("Waiters get in by priority, highest first, and in the order they came within one priority")
    func priorityThenArrival() async throws {
        let (gate, order) = try await Self.fullGate()
        var tasks: [Task<Bool, Never>] = []
        for (index, (name, priority)) in [("low1", 0), ("low2", 0), ("high1", 5), ("mid", 2), ("high2", 5), ("low3", 0)].enumerated() {
            tasks.append(Self.entering(gate, name, priority: priority, order: order))
            try await Self.until("\(name) waiting") { gate.waiting == index + 1 }
        }
        for count in 1...6 {
            gate.leave()
            try await Self.until("\(count) in") { order.count == count }
        }
        #expect(order.all == ["high1", "high2", "mid", "low1", "low2", "low3"])
        for task in tasks { #expect(await task.value) }
    }

    @Test("Spools of one priority take turns: one spool's file goes before another's backlog claimed ahead; each spool's own go in order")
    func spoolsTakeTurns() async throws {
        let gate = UploadGate(capacity: 1)
        try await gate.enter(tag: "archives")
        let order = Arrivals()
        var tasks: [Task<Bool, Never>] = []
        for (index, (name, tag)) in [("a2", "archives"), ("a3", "archives"), ("a4", "archives"), ("b1", "scans"), ("b2", "scans"), ("c1", "logs")].enumerated() {
            tasks.append(Self.entering(gate, name, tag: tag, order: order))
            try await Self.until("\(name) waiting") { gate.waiting == index + 1 }
        }
        var holder = "archives"
        for count in 1...6 {
            gate.leave(tag: holder)
            try await Self.until("\(count) in") { order.count == count }
            holder = ["a": "archives", "b": "scans", "c": "logs"][String(order.all[count - 1].prefix(1))]!
        }
        // archives was sending: the others' first files go before its backlog, then turns.
        #expect(order.all == ["b1", "c1", "a2", "b2", "a3", "a4"])
        for task in tasks { #expect(await task.value) }
        gate.leave(tag: holder)
        #expect(gate.inUse == 0)
    }

    @Test("A waiter whose job is stopped is refused and takes no slot; one stopped before it came is refused at once")
    func cancelledWaitersAreRefused() async throws {
        let (gate, order) = try await Self.fullGate()
        let first = Self.entering(gate, "first", order: order)
        try await Self.until("first waiting") { gate.waiting == 1 }
        let second = Self.entering(gate, "second", order: order)
        try await Self.until("second waiting") { gate.waiting == 2 }
        first.cancel()
        #expect(await first.value == false)
        #expect(gate.waiting == 1)
        gate.leave()
        #expect(await second.value)
        #expect(order.all == ["second"])

        let stoppedEarly = Task<Bool, Never> {
            withUnsafeCurrentTask { $0?.cancel() }
            do { try await gate.enter() } catch { return false }
            return true
        }
        #expect(await stoppedEarly.value == false)
        #expect(gate.inUse == 1 && gate.waiting == 0)
    }

    @Test("Closing the gate (shutdown) refuses those waiting and everyone after")
    func closeRefusesEveryone() async throws {
        let (gate, order) = try await Self.fullGate()
        let waiters = (0..<3).map { Self.entering(gate, "job\($0)", order: order) }
        try await Self.until("three waiting") { gate.waiting == 3 }
        gate.close()
        for waiter in waiters { #expect(await waiter.value == false) }
        await #expect(throws: UploadGate.Refused.self) { try await gate.enter() }
        gate.leave()
        #expect(gate.inUse == 0 && order.isEmpty)
    }

    @Test("A larger capacity (a reload) lets waiters in at once; a smaller one lets no one in until enough slots are back")
    func capacityChanges() async throws {
        let (gate, order) = try await Self.fullGate()
        let waiters = (0..<4).map { Self.entering(gate, "job\($0)", order: order) }
        try await Self.until("four waiting") { gate.waiting == 4 }
        gate.capacity = 3
        try await Self.until("two more in") { order.count == 2 }
        #expect(gate.inUse == 3 && gate.waiting == 2)
        gate.capacity = 1
        gate.leave()
        gate.leave()
        #expect(gate.inUse == 1 && gate.waiting == 2, "nobody enters while the slots in use are at or over the capacity")
        gate.leave()
        try await Self.until("one more in") { order.count == 3 }
        #expect(gate.inUse == 1 && gate.waiting == 1)
        gate.close()
        var admitted = 0
        for waiter in waiters {
            if await waiter.value { admitted += 1 }
        }
        #expect(admitted == 3)
    }

    @Test("A place taken at the claim holds back lower priorities until its job is ready; the same priority may pass it")
    func placesKeepTheClaimOrder() async throws {
        let (gate, order, urgent, bulkTask) = try await Self.lineHeldByAPlaceNotReady(low: "bulk")
        #expect(gate.inUse == 0 && order.isEmpty, "the free slot waits for the urgent job, which is still opening its file")
        let urgentTask = Self.entering(gate, at: urgent, "urgent", order: order)
        try await Self.until("urgent in") { order.count == 1 }
        gate.leave()
        try await Self.until("bulk in") { order.count == 2 }
        #expect(order.all == ["urgent", "bulk"])
        #expect(await urgentTask.value)
        #expect(await bulkTask.value)

        let first = gate.reserve(priority: 0)
        let second = gate.reserve(priority: 0)
        let secondTask = Self.entering(gate, at: second, "second", order: order)
        gate.leave()
        try await Self.until("second in, ahead of first, which is not ready") { order.count == 3 }
        #expect(order.all.last == "second" && gate.waiting == 1)
        gate.leave()
        gate.withdraw(first)
        #expect(gate.waiting == 0 && gate.inUse == 0)
        await #expect(throws: UploadGate.Refused.self) { try await gate.enter(first) }
        #expect(await secondTask.value)
    }

    @Test("A withdrawn place (its job ended before its send) lets those behind it in")
    func withdrawnPlaceUnblocks() async throws {
        let (gate, order, gone, lowTask) = try await Self.lineHeldByAPlaceNotReady(low: "low")
        #expect(order.isEmpty)
        gate.withdraw(gone)
        try await Self.until("low in") { order.count == 1 }
        #expect(await lowTask.value)
        #expect(gate.inUse == 1)
    }

    @Test("Refusing a spool's places takes out its jobs, ready or not, and they do not enter later")
    func refusedPlaces() async throws {
        let (gate, order) = try await Self.fullGate()
        let pausedReady = Self.entering(gate, "paused", order: order)
        let pausedLater = gate.reserve(tag: "paused-spool")
        let other = gate.reserve(tag: "other")
        try await Self.until("in line, one of them ready") { gate.ready == 1 && gate.waiting == 3 }
        gate.refuse { $0 == "" || $0 == "paused-spool" }
        #expect(await pausedReady.value == false)
        await #expect(throws: UploadGate.Refused.self) { try await gate.enter(pausedLater) }
        #expect(gate.waiting == 1)
        let otherTask = Self.entering(gate, at: other, "other", order: order)
        gate.leave()
        #expect(await otherTask.value)
        #expect(order.all == ["other"])
    }
}

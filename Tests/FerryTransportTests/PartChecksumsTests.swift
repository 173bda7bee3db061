import FerryTestSupport
import FerryTransport
import Synchronization
import Testing

/// The checksums an S3 upload computes one part ahead: used once, never twice, never stale, and
/// never computed twice for one request.
@Suite("Part checksums computed ahead (pure)")
struct PartChecksumsTests {
    struct Refused: Error, Equatable {}
    typealias Checksums = PartChecksums<String, Refused>

    /// Counts the computations asked of it and answers `"<label> <part>"`.
    final class Computer: Sendable {
        let count = Mutex(0)
        func compute(_ label: String, _ part: Int) -> Checksums.Value {
            count.withLock { $0 += 1 }
            return .success("\(label) \(part)")
        }
        var computed: Int { count.withLock { $0 } }
    }

    /// A computation that does not end before `open()`, and says when it has started.
    final class Gate: Sendable {
        private let stream: AsyncStream<Void>
        private let opener: AsyncStream<Void>.Continuation
        private let begun = Mutex(false)

        init() { (stream, opener) = AsyncStream.makeStream(of: Void.self) }
        var started: Bool { begun.withLock { $0 } }
        func open() { opener.finish() }
        func pass() async {
            begun.withLock { $0 = true }
            for await _ in stream {}
        }
    }

    @Test("a checksum computed ahead is the one the part's request uses, once; a part sent again computes afresh")
    func usedOnce() async {
        let checksums = Checksums(confirmed: [])
        let computer = Computer()
        await checksums.computeAhead(ofPart: 2) { computer.compute("ahead", 2) }
        #expect(await checksums.checksum(ofPart: 2) { computer.compute("asked", 2) } == .success("ahead 2"))
        #expect(await checksums.checksum(ofPart: 2) { computer.compute("asked", 2) } == .success("asked 2"), "sent again: read again")
        #expect(computer.computed == 2)
    }

    @Test("nothing is computed ahead for a part the server has, a part already asked for, or a part being computed")
    func notAhead() async {
        let checksums = Checksums(confirmed: [3])
        let computer = Computer()
        await checksums.computeAhead(ofPart: 3) { computer.compute("ahead", 3) }
        #expect(computer.computed == 0, "part 3 is confirmed")
        _ = await checksums.checksum(ofPart: 4) { computer.compute("asked", 4) }
        await checksums.computeAhead(ofPart: 4) { computer.compute("ahead", 4) }
        #expect(computer.computed == 1, "part 4's request computed its own")
        await checksums.computeAhead(ofPart: 5) { computer.compute("ahead", 5) }
        await checksums.computeAhead(ofPart: 5) { computer.compute("again", 5) }
        #expect(await checksums.checksum(ofPart: 5) { computer.compute("asked", 5) } == .success("ahead 5"))
        #expect(computer.computed == 2)
    }

    @Test("a request that asks while its checksum is being computed ahead waits for that one")
    func waitsForAhead() async throws {
        let checksums = Checksums(confirmed: [])
        let computer = Computer()
        let gate = Gate()
        async let ahead: Void = checksums.computeAhead(ofPart: 7) {
            await gate.pass()
            return computer.compute("ahead", 7)
        }
        try await waitUntil("the computation ahead started") { gate.started }
        async let asked = checksums.checksum(ofPart: 7) { computer.compute("asked", 7) }
        try await waitUntil("part 7's request waits") { checksums.isWaiting(forPart: 7) }
        gate.open()
        #expect(await asked == .success("ahead 7"))
        await ahead
        #expect(computer.computed == 1)
        #expect(await checksums.checksum(ofPart: 7) { computer.compute("asked", 7) } == .success("asked 7"), "handed over, not kept")
    }

    @Test("a failure computed ahead is computed again when asked for, waiting or not")
    func failureNotReused() async throws {
        let checksums = Checksums(confirmed: [])
        await checksums.computeAhead(ofPart: 1) { .failure(Refused()) }
        #expect(await checksums.checksum(ofPart: 1) { .success("asked 1") } == .success("asked 1"))

        let gate = Gate()
        async let ahead: Void = checksums.computeAhead(ofPart: 2) {
            await gate.pass()
            return .failure(Refused())
        }
        try await waitUntil("the computation ahead started") { gate.started }
        async let asked = checksums.checksum(ofPart: 2) { .success("asked 2") }
        try await waitUntil("part 2's request waits") { checksums.isWaiting(forPart: 2) }
        gate.open()
        #expect(await asked == .success("asked 2"))
        await ahead
    }

    @Test("a failure the request computes itself is its answer")
    func ownFailure() async {
        let checksums = Checksums(confirmed: [])
        #expect(await checksums.checksum(ofPart: 1) { .failure(Refused()) } == .failure(Refused()))
    }
}

import FerryDelivery
import FerryQueue
import FerrySystem
import Foundation
import Testing

/// The S3 upload machine's sending phase with parts in flight: how many start, in what order
/// answers may come, and what a failure among them does. Pure: scripted answers, no network.
@Suite("S3 upload machine: parts in flight")
struct S3UploadMachinePartsTests {
    static let mib: Int64 = 1 << 20

    /// Drives the machine with answers only (no part reported written whole, so a part starts only
    /// when one is answered); `pick` chooses which part in flight is answered next (an index into
    /// them, in the order they started); `answer` gives each part's answer.
    static func run(
        _ settings: S3UploadMachine.Settings, pick: ([Int]) -> Int,
        answer: (Int) -> S3UploadMachine.Response = { .stored(etag: "\"\(String(repeating: String($0 % 10), count: 32))\"", checksum: nil) }
    ) -> S3PartsScript.Trace {
        S3PartsScript.run(settings, choose: { possible in
            let answers = possible.compactMap { event -> Int? in if case .answered(let number) = event { number } else { nil } }
            return possible.firstIndex(of: .answered(answers[pick(answers)]))!
        }, answer: answer)
    }

    static func settings(parts: Int, concurrency: Int) -> S3UploadMachine.Settings {
        .init(length: Int64(parts) * 5 * mib, partSize: 5 * mib, multipartThreshold: 5 * mib, checksum: nil, partConcurrency: concurrency)
    }

    @Test("one part at a time by default: a part starts when the one before is answered")
    func oneAtATimeByDefault() {
        let trace = Self.run(Self.settings(parts: 6, concurrency: 1)) { _ in 0 }
        #expect(trace.mostInFlight == 1)
        #expect(trace.requests == ["create", "part 1", "part 2", "part 3", "part 4", "part 5", "part 6", "complete [1, 2, 3, 4, 5, 6]"])
        #expect(trace.recordedParts == [1, 2, 3, 4, 5, 6])
        #expect(trace.report == .answered(ServerAnswer(status: 200)))
    }

    @Test("part_concurrency parts start at once, and one more each time one is answered")
    func window() {
        let trace = Self.run(Self.settings(parts: 6, concurrency: 3)) { _ in 0 }
        #expect(trace.mostInFlight == 3)
        #expect(trace.requests == ["create", "part 1", "part 2", "part 3", "part 4", "part 5", "part 6", "complete [1, 2, 3, 4, 5, 6]"])
        #expect(Self.run(Self.settings(parts: 20, concurrency: 50)) { _ in 0 }.mostInFlight == S3UploadMachine.concurrencyLimit, "clamped")
    }

    @Test("a failed part stops new parts; those in flight are answered and recorded before the failure is decided")
    func failureIsHeld() {
        // Part 3 is answered first (with SlowDown), while parts 1 and 2 are in flight.
        let trace = Self.run(Self.settings(parts: 8, concurrency: 3), pick: { inFlight in inFlight.firstIndex(of: 3) ?? 0 }, answer: { number in
            number == 3 ? .error(S3ErrorAnswer(status: 503, code: "SlowDown", message: "slow down")) : .stored(etag: "\"e\(number)\"", checksum: nil)
        })
        #expect(trace.requests == ["create", "part 1", "part 2", "part 3"], "no part starts after a failure")
        #expect(trace.recordedParts == [1, 2], "the parts answered after the failure are recorded")
        guard case .answered(let answer)? = trace.report else { Issue.record("expected an answer, got \(String(describing: trace.report))"); return }
        #expect(answer.during == "uploading part 3 of 8")
        #expect(answer.verdict(now: Date()) == .retry(notBefore: nil))
    }

    @Test("a part refused for its checksum is sent again once the parts in flight are answered")
    func rejectedPartAfterDrain() {
        var refused = false
        let trace = Self.run(Self.settings(parts: 4, concurrency: 2), pick: { _ in 0 }, answer: { number in
            if number == 2 && !refused {
                refused = true
                return .error(S3ErrorAnswer(status: 400, code: "BadDigest", message: "bad"))
            }
            return .stored(etag: "\"e\(number)\"", checksum: nil)
        })
        #expect(trace.requests.filter { $0 == "part 2" }.count == 2)
        #expect(trace.requests.last == "complete [1, 2, 3, 4]")
        #expect(trace.report == .answered(ServerAnswer(status: 200)))
    }
}

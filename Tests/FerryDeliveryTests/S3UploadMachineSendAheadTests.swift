import FerryDelivery
import FerryQueue
import FerrySystem
import Foundation
import Testing

/// The S3 upload machine sends the next part while the one before waits for its answer: a part
/// starts once the one before has been written whole. Pure: scripted events, no network.
@Suite("S3 upload machine: the next part while one waits for its answer")
struct S3UploadMachineSendAheadTests {
    static let mib: Int64 = 1 << 20
    static let url = S3PartsScript.url

    typealias Event = S3PartsScript.Event

    static func run(
        _ settings: S3UploadMachine.Settings, choose: ([Event]) -> Int,
        answer: (Int) -> S3UploadMachine.Response = { .stored(etag: "\"e\($0)\"", checksum: nil) }
    ) -> S3PartsScript.Trace {
        S3PartsScript.run(settings, choose: choose, answer: answer)
    }

    static func settings(parts: Int, concurrency: Int = 1) -> S3UploadMachine.Settings {
        .init(length: Int64(parts) * 5 * mib, partSize: 5 * mib, multipartThreshold: 5 * mib, checksum: nil, partConcurrency: concurrency)
    }

    @Test("by default a part starts once the one before is written whole, and two at most are unanswered")
    func nextPartWhileOneWaits() {
        // Events in the order a server that is slow to answer gives them: written first.
        let trace = Self.run(Self.settings(parts: 4)) { possible in possible.firstIndex { if case .written = $0 { true } else { false } } ?? 0 }
        #expect(trace.log == [
            "create", "part 1", "written 1", "part 2", "written 2", "answered 1", "part 3", "written 3", "answered 2", "part 4",
            "written 4", "answered 3", "answered 4", "complete [1, 2, 3, 4]",
        ])
        #expect(trace.mostWriting == 1, "one body written at a time: a cut costs at most the part being written")
        #expect(trace.mostInFlight == 2)
        #expect(trace.recordedParts == [1, 2, 3, 4])
        #expect(trace.report == .answered(ServerAnswer(status: 200)))
    }

    @Test("a part answered before its body was written whole (an early error, a fast server) frees its place")
    func answeredBeforeWritten() {
        let trace = Self.run(Self.settings(parts: 3)) { possible in possible.firstIndex { if case .answered = $0 { true } else { false } } ?? 0 }
        #expect(trace.log == ["create", "part 1", "answered 1", "part 2", "answered 2", "part 3", "answered 3", "complete [1, 2, 3]"])
        #expect(trace.mostInFlight == 1)
    }

    @Test("a written event for a part already answered changes nothing")
    func staleWritten() {
        var machine = S3UploadMachine(settings: Self.settings(parts: 3), known: nil, parts: [])
        guard case .record = machine.start(), machine.recorded() == .create,
              case .record = machine.created(.uploadCreated(url: Self.url)) else { Issue.record("expected the marker, create, the upload"); return }
        #expect(machine.recorded() == .uploadPart(url: Self.url, number: 1, offset: 0, length: 5 * Self.mib))
        #expect(machine.partStarted() == .awaitPart)
        guard case .record = machine.storedPart(1, .stored(etag: "\"e1\"", checksum: nil)) else { Issue.record("expected a record"); return }
        #expect(machine.recorded() == .uploadPart(url: Self.url, number: 2, offset: 5 * Self.mib, length: 5 * Self.mib))
        #expect(machine.partStarted() == .awaitPart)
        #expect(machine.partWritten(1) == .awaitPart, "part 1's late event does not start part 3 while part 2 is written")
        #expect(machine.partWritten(2) == .uploadPart(url: Self.url, number: 3, offset: 10 * Self.mib, length: 5 * Self.mib))
    }

    @Test("whatever order the events come in: at most part_concurrency bodies written and twice that unanswered (part_concurrency with answers alone), every part once",
          arguments: [1, 2, 3, 8], [true, false])
    func anyOrder(_ concurrency: Int, reportsWritten: Bool) {
        for seed in UInt64(0)..<80 {
            var random = SplitMix64(seed: seed)
            let parts = 1 + Int(seed % 14)
            let trace = Self.run(Self.settings(parts: parts, concurrency: concurrency)) { possible in
                let allowed = reportsWritten ? possible.indices.map { $0 } : possible.indices.filter { if case .answered = possible[$0] { true } else { false } }
                return allowed[Int.random(in: 0..<allowed.count, using: &random)]
            }
            #expect(trace.mostWriting <= concurrency, "seed \(seed)")
            #expect(trace.mostInFlight <= (reportsWritten ? 2 : 1) * concurrency, "seed \(seed)")
            #expect(trace.requests.filter { $0.hasPrefix("part ") }.count == parts, "each part sent once (seed \(seed))")
            #expect(trace.requests.last == "complete \(Array(1...parts))", "seed \(seed)")
            #expect(trace.recordedParts.sorted() == Array(1...parts), "seed \(seed)")
            #expect(trace.report == .answered(ServerAnswer(status: 200)), "seed \(seed)")
        }
    }

    @Test("a part that fails while the next is written: the next is answered and recorded, then the failure is decided")
    func failureWhileNextIsWritten() {
        let trace = Self.run(Self.settings(parts: 6), choose: { possible in
            // Part 2 is written, then part 1 fails, then part 2 is written and answered.
            possible.firstIndex(of: .written(1)) ?? possible.firstIndex(of: .answered(1)) ?? 0
        }, answer: { number in
            number == 1 ? .error(S3ErrorAnswer(status: 500, code: "InternalError", message: "try again")) : .stored(etag: "\"e\(number)\"", checksum: nil)
        })
        #expect(trace.log == ["create", "part 1", "written 1", "part 2", "answered 1", "written 2", "answered 2"], "no part starts after the failure")
        #expect(trace.recordedParts == [2])
        guard case .answered(let answer)? = trace.report else { Issue.record("expected an answer, got \(String(describing: trace.report))"); return }
        #expect(answer.during == "uploading part 1 of 6")
    }
}

import FerryQueue
import FerryReceiver
import FerryTestSupport
import Foundation
import Testing

/// A server that trickles its answer (one byte every half second) moves, so the no-progress
/// watchdog alone never fires; the rest of an answer is due within `no_progress_timeout` of its
/// status line, and then the status stands.
@Suite("A trickled answer does not hold an upload slot", .serialized)
struct AnswerDeadlineTests {
    @Test("A 500 trickled a byte at a time ends the attempt within no_progress_timeout of its status; the retry delivers")
    func trickledErrorIsRetried() async throws {
        let spool = TestSpool(options: ["no_progress_timeout = \"2s\""])
        try await withDaemonHarness(spools: [spool], plan: { info in
            info.index == 0 ? .trickleAnswer(status: 500, interval: .milliseconds(500)) : .store()
        }) { harness in
            try await harness.start()
            try harness.drop("report.csv", Array("a,b\n1,2\n".utf8))
            try await harness.waitForAccepted(1, timeout: .seconds(20))
            try await harness.waitForQuiet()
            let job = try #require(try await jobs(harness).first)
            let history = try await attempts(harness, job)
            #expect(history.map(\.outcome) == [.retry, .success])
            #expect(history.first?.httpStatus == 500)
            let first = try #require(history.first)
            #expect(first.duration >= 1.5 && first.duration < 8, "the trickled answer was cut after about 2 s, not followed: \(first.duration) s")
            #expect(harness.daemon?.log.contains("the status stands") == true)
        }
    }

    @Test("A 200 trickled a byte at a time is a delivery once no_progress_timeout has passed since its status")
    func trickledSuccessDelivers() async throws {
        let spool = TestSpool(options: ["no_progress_timeout = \"2s\""])
        try await withDaemonHarness(spools: [spool], plan: { _ in .trickleAnswer(status: 200, interval: .milliseconds(500)) }) { harness in
            try await harness.start()
            try harness.drop("photo.jpg", pseudoRandomBytes(10_000, seed: 93))
            try await waitUntil("the job to be done", timeout: .seconds(20)) { try await jobs(harness).first?.state == .done }
            let job = try #require(try await jobs(harness).first)
            #expect(job.attempts == 1 && job.responseStatus == 200)
        }
    }
}

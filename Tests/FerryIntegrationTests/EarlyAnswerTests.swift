import FerryQueue
import FerryReceiver
import FerryTestSupport
import Foundation
import Testing

/// A server that answers 2xx before it has read the whole body cannot have the file; ferryd knows
/// how much it sent, so it does not take such an answer as proof of delivery.
@Suite("A 2xx before the whole body was sent", .serialized)
struct EarlyAnswerTests {
    /// Sends a 48 MiB file (more than the socket buffers hold) to a server that answers 200 after
    /// 64 KiB and closes; returns the job and whether the file is still in the spool.
    func sendToEarlyAnswer(
        options: [String], action: ReceiverAction = .acceptPartial(afterBytes: 64 * 1024, status: 200)
    ) async throws -> (Job, Bool, String) {
        var outcome: (Job, Bool, String)?
        try await withDaemonHarness(spools: [TestSpool(options: options)], plan: { _ in action }) { harness in
            try await harness.start()
            let path = try harness.drop("scan.tiff", pseudoRandomBytes(48 << 20, seed: 99))
            try await waitUntil("the job to be done and its file dealt with") {
                let job = try await jobs(harness).first
                return job?.state == .done && job?.disposedAt != nil
            }
            let job = try #require(try await jobs(harness).first)
            outcome = (job, fileExists(path), harness.daemon?.log ?? "")
        }
        return try #require(outcome)
    }

    @Test("The 2xx stands (no retry), but the file is kept in the spool and the log says why")
    func keptByDefault() async throws {
        let (job, stillThere, log) = try await sendToEarlyAnswer(options: [])
        #expect(job.attempts == 1 && job.responseStatus == 200)
        #expect(job.disposition == .kept)
        #expect(stillThere, "after_upload (delete) is not applied")
        #expect(log.contains("answered 2xx before the whole body was sent"), "\(log)")
    }

    /// Node's http server reads and drops the body of a request its handler answered without
    /// reading it: ferryd's writes all succeed, but the answer came first.
    @Test("A 2xx after 64 KiB from a server that then reads and drops the rest is early too, for multipart, put and a file sent whole by the resumable draft to a server that does not offer it: the file is kept",
          arguments: ["multipart", "put", "resumable"])
    func answeredThenDrained(_ uploadProtocol: String) async throws {
        let (job, stillThere, log) = try await sendToEarlyAnswer(
            options: ["protocol = \"\(uploadProtocol)\""], action: .answerThenDrain(afterBytes: 64 * 1024, status: 200))
        #expect(job.attempts == 1 && job.responseStatus == 200)
        #expect(job.disposition == .kept)
        #expect(stillThere, "after_upload (delete) is not applied")
        #expect(log.contains("answered 2xx before the whole body was sent"), "\(log)")
    }

    @Test("trust_early_answers = true applies after_upload all the same")
    func trusted() async throws {
        let (job, stillThere, _) = try await sendToEarlyAnswer(options: ["trust_early_answers = true"])
        #expect(job.disposition == .deleted)
        #expect(!stillThere)
    }
}

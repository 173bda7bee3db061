import FerryQueue
import FerryReceiver
import FerryTestSupport
import Foundation
import Synchronization
import Testing

/// A server that says "wait" (429 or 503 with Retry-After, or a rate limit's reset time) is not sent
/// the spool's other files meanwhile: each would be uploaded whole into the same refusal.
@Suite("The server asked to wait", .serialized)
struct ServerWaitTests {
    /// Refuses every request for 1.5 s after the first, as a rate limit does, with `headers`.
    static func refusingPlan(status: Int, headers: [HeaderField]) -> @Sendable (RequestInfo) -> ReceiverAction {
        let firstRefusal = Mutex<Date?>(nil)
        return { _ in
            let now = Date()
            let first = firstRefusal.withLock { first in
                if first == nil { first = now }
                return first!
            }
            return now.timeIntervalSince(first) < 1.5 ? .respond(status: status, headers: headers) : .store()
        }
    }

    @Test("429 Retry-After: 2, Mastodon's 429 with only X-RateLimit-Reset, and 503 Retry-After: no other file of the spool is sent until then", arguments: [
        (429, "Retry-After", "2"), (429, "X-RateLimit-Reset", "2"), (503, "Retry-After", "2"),
    ])
    func spoolWaits(status: Int, header: String, value: String) async throws {
        let plan = Self.refusingPlan(status: status, headers: [HeaderField(name: header, value: value)])
        try await withDaemonHarness(topLevel: ["max_concurrent_uploads = 1"], plan: plan) { harness in
            try await harness.start()
            for index in 0..<5 { try harness.drop("page-\(index).pdf", pseudoRandomBytes(20_000, seed: UInt64(300 + index))) }
            let done = try await waitForState(harness, .done, count: 5, timeout: .seconds(60))
            #expect(done.count == 5)
            let requests = harness.receiver.requests
            #expect(requests.filter { $0.status == status }.count == 1, "one file met the refusal, not each: \(requests.map(\.status))")
            #expect(requests.count == 6)
            #expect(harness.daemon?.log.contains("the server asked to wait; no upload of this spool starts before then") == true)
        }
    }
}

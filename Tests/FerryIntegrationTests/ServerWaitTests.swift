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

    /// The spool's `server_wait` in `ferryctl status --json`, if any.
    static func serverWait(_ harness: DaemonHarness) async throws -> [String: Any]? {
        let status = try await harness.ctl("status", "--json").json()
        let spool = (status["spools"] as? [[String: Any]])?.first { $0["name"] as? String == "test" }
        return spool?["server_wait"] as? [String: Any]
    }

    @Test("a server that cannot be reached holds the spool: its files do not each try it in turn, and all go once it is back")
    func unreachableServer() async throws {
        // A port nothing listens on (a receiver's, closed), where one starts later.
        let directory = try TemporaryDirectory()
        let probe = try await Receiver.start(directory: directory.url("probe"))
        let port = probe.port
        try await probe.stop()
        let spool = TestSpool(retry: ["initial_delay = \"200ms\"", "max_delay = \"2s\""])
        try await withDaemonHarness(spools: [spool], topLevel: ["max_concurrent_uploads = 2"], url: "http://127.0.0.1:\(port)/upload/test") { harness in
            for index in 0..<24 { try harness.drop("reading-\(index).csv", pseudoRandomBytes(2_000, seed: UInt64(700 + index))) }
            try await harness.start()
            try await waitUntil("three waits in a row", timeout: .seconds(60)) {
                (try await Self.serverWait(harness)?["tries"] as? Int ?? 0) >= 3
            }
            // The attempts first, then the tries: every attempt counted was made in one of the
            // waits' rounds, and a round starts at most max_concurrent_uploads (2) uploads.
            let attempts = try await jobs(harness).map(\.attempts)
            let wait = try #require(try await Self.serverWait(harness))
            let tries = try #require(wait["tries"] as? Int)
            #expect(wait["reason"] as? String == "unreachable")
            #expect((wait["message"] as? String)?.contains("Connection refused") == true, "\(wait)")
            #expect(attempts.reduce(0, +) <= 2 * (tries + 1), "\(attempts.reduce(0, +)) attempts in \(tries) rounds: \(attempts)")
            #expect(attempts.filter { $0 == 0 }.count >= 24 - 2 * (tries + 1), "files that never tried the dead server: \(attempts)")
            // A wait may just have ended (full jitter: some are short); the next begins at the next failure.
            var text = ""
            try await waitUntil("status to show the wait: \(text)") {
                text = try await harness.ctl("status").stdout
                return text.contains("server of test unreachable: connection to 127.0.0.1:\(port) failed")
                    && text.contains("server unreachable, next try")
            }
            #expect(harness.daemon?.log.contains("the server cannot be reached; no upload of this spool starts before the next try") == true)
            let metrics = try await harness.ctl("metrics").stdout
            let gauge = metrics.split(separator: "\n").first { $0.hasPrefix(#"ferry_server_unreachable_tries{spool="test"} "#) }
            #expect((gauge?.split(separator: " ").last.flatMap { Int($0) } ?? 0) >= 3, "\(gauge ?? "no gauge")")

            // The server comes back: the next round finds it, and the whole backlog goes.
            let received = try await Receiver.start(port: port, directory: directory.url("received"))
            do {
                let done = try await waitForState(harness, .done, count: 24, timeout: .seconds(60))
                #expect(done.count == 24)
                #expect(received.requests.count == 24)
                // Jobs claimed ahead and put back unsent at each wait left no attempt rows: only
                // the refused connections and the deliveries are on record.
                var outcomes: [String] = []
                for job in done {
                    let shown = try await harness.ctl("show", job.id.rawValue, "--json").json()
                    outcomes += (shown["attempts"] as? [[String: Any]] ?? []).compactMap { $0["outcome"] as? String }
                }
                #expect(!outcomes.contains("interrupted"), "\(outcomes)")
                #expect(outcomes.filter { $0 == "success" }.count == 24)
                #expect(try await Self.serverWait(harness) == nil)
                #expect(try await harness.ctl("metrics").stdout.contains(#"ferry_server_unreachable_tries{spool="test"} 0"#))
            } catch {
                try? await received.stop()
                throw error
            }
            try await received.stop()
        }
    }
}

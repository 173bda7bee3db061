import FerryQueue
import FerryReceiver
import FerryTestSupport
import Foundation
import Testing

/// Upload windows, per-spool slots and priority, through the real ferryd.
@Suite("Traffic policy: windows, slots, priority", .serialized)
struct TrafficPolicyTests {
    /// ferryd's clock offset (`FERRY_TEST_CLOCK_OFFSET`) that puts UTC noon today `seconds` away.
    static func offset(toNoonIn seconds: TimeInterval) -> String {
        var calendar = Calendar(identifier: .gregorian)
        calendar.timeZone = TimeZone(identifier: "UTC")!
        let noon = calendar.date(bySettingHour: 12, minute: 0, second: 0, of: Date())!
        return String(noon.timeIntervalSinceNow - seconds)
    }

    @Test("outside its upload window a file is queued, not started; it goes when the window opens")
    func windowOpens() async throws {
        let spool = TestSpool(options: ["upload_window = [\"12:00-13:00\"]"])
        try await withDaemonHarness(spools: [spool]) { harness in
            let start = ContinuousClock.now
            try await harness.start(environment: ["FERRY_TEST_CLOCK_OFFSET": Self.offset(toNoonIn: 8), "TZ": "UTC"])
            try harness.drop("night.txt", Array("after dark".utf8))
            try await waitUntil("the file to be queued") { try await jobs(harness).count == 1 }
            #expect(try await jobs(harness).first?.state == .queued)
            #expect(harness.receiver.requests.isEmpty, "nothing is sent outside the window")
            let spoolStatus = try #require((try await harness.ctl("status", "--json").json()["spools"] as? [[String: Any]])?.first)
            #expect(spoolStatus["window_open"] as? Bool == false && spoolStatus["window_change"] != nil, "\(spoolStatus)")
            let text = try await harness.ctl("status")
            #expect(text.stdout.contains("window closed opens"), "\(text)")
            try await harness.waitForAccepted(1)
            let elapsed = ContinuousClock.now - start
            #expect(elapsed >= .seconds(7.5) && elapsed <= .seconds(12), "sent \(elapsed) after the start; the window opened at 8 s")
        }
    }

    @Test("window_end = \"pause\": an upload in flight when the window closes stops, queued again, not counted")
    func windowEndPauses() async throws {
        let scratch = try TemporaryDirectory()
        let receiver = try await Receiver.start(directory: scratch.url("received"), discard: true)
        let spool = TestSpool(options: [
            "protocol = \"put\"", "upload_window = [\"11:00-12:00\"]", "window_end = \"pause\"", "bandwidth_limit = \"1MiB/s\"",
        ])
        try await withDaemonHarness(spools: [spool], url: receiver.url(path: "/in")) { harness in
            try await harness.start(environment: ["FERRY_TEST_CLOCK_OFFSET": Self.offset(toNoonIn: 8), "TZ": "UTC"])
            try harness.drop("long.bin", pseudoRandomBytes(32 << 20, seed: 5))
            try await waitUntil("the upload to be under way") { (receiver.requests.first?.bodyBytes ?? 0) > 0 }
            try await waitUntil("the upload to be paused when the window closes", timeout: .seconds(25)) {
                let state = try await jobs(harness).first?.state
                return harness.daemon?.log.contains("pausing its upload") == true && state == .queued
            }
            let job = try #require(try await jobs(harness).first)
            #expect(job.attempts == 0, "a paused upload is not an attempt")
            #expect(fileExists(harness.spoolPath() + "/long.bin"))
        }
        try await receiver.stop()
    }

    @Test("slots short: the higher priority spool goes first; spools of one priority take turns")
    func priorityAndTurns() async throws {
        let spools = [
            TestSpool(name: "bulk", options: ["priority = 0"]), TestSpool(name: "other", options: ["priority = 0"]),
            TestSpool(name: "urgent", options: ["priority = 10"]),
        ]
        try await withDaemonHarness(spools: spools, topLevel: ["max_concurrent_uploads = 1"]) { harness in
            try await harness.start()
            #expect(try await harness.ctl("pause").status == 0)
            for index in 0..<6 { try harness.drop("b\(index).txt", Array("b".utf8), spool: "bulk") }
            try await waitUntil("bulk's files to be queued") { try await jobs(harness).count == 6 }
            for index in 0..<2 { try harness.drop("o\(index).txt", Array("o".utf8), spool: "other") }
            for index in 0..<2 { try harness.drop("u\(index).txt", Array("u".utf8), spool: "urgent") }
            try await waitUntil("all files to be queued") { try await jobs(harness).count == 10 }
            #expect(try await harness.ctl("resume").status == 0)
            try await harness.waitForAccepted(10)
            let order = harness.receiver.acceptedRequests.map { $0.uri.split(separator: "/").last.map(String.init) ?? "" }
            #expect(Array(order.prefix(2)) == ["urgent", "urgent"], "\(order)")
            // bulk's six are older, but other's two are not left until they are all sent.
            let others = order.indices.filter { order[$0] == "other" }
            #expect(others.allSatisfy { $0 < 7 }, "other's files at \(others) in \(order)")
        }
    }

    @Test("a spool's own max_concurrent_uploads bounds its uploads within the daemon's")
    func spoolSlots() async throws {
        let scratch = try TemporaryDirectory()
        let receiver = try await Receiver.start(directory: scratch.url("received"), discard: true)
        // Slow the link so the uploads overlap, and count how many are in flight at once.
        let proxy = try await CutProxy(target: receiver.port, rate: 256 * 1024, logPath: scratch.url("proxy.log"))
        let spool = TestSpool(options: ["protocol = \"put\"", "max_concurrent_uploads = 2"])
        try await withDaemonHarness(spools: [spool], topLevel: ["max_concurrent_uploads = 8"], url: proxy.url + "/in") { harness in
            try await harness.start()
            #expect(try await harness.ctl("pause").status == 0)
            for index in 0..<5 { try harness.drop("f\(index).bin", pseudoRandomBytes(256 * 1024, seed: UInt64(index))) }
            try await waitUntil("the files to be queued") { try await jobs(harness).count == 5 }
            #expect(try await harness.ctl("resume").status == 0)
            try await waitUntil("every delivery", timeout: .seconds(60)) { try await jobs(harness).allSatisfy { $0.state == .done } }
            #expect(try proxy.stats().mostInFlight == 2)
        }
        await proxy.stop()
        try await receiver.stop()
    }

    /// One upload slot, a slow link, three files: runs `body` once one upload is sending and the
    /// other two jobs wait for the slot (their ids).
    func withTwoWaiting(_ body: (DaemonHarness, Receiver, [String]) async throws -> Void) async throws {
        let scratch = try TemporaryDirectory()
        let receiver = try await Receiver.start(directory: scratch.url("received"), discard: true)
        let spool = TestSpool(options: ["protocol = \"put\"", "bandwidth_limit = \"1MiB/s\""])
        try await withDaemonHarness(spools: [spool], topLevel: ["max_concurrent_uploads = 1"], url: receiver.url(path: "/in")) { harness in
            try await harness.start()
            #expect(try await harness.ctl("pause").status == 0)
            for index in 0..<3 { try harness.drop("f\(index).bin", pseudoRandomBytes(6 << 20, seed: UInt64(index))) }
            try await waitUntil("the files to be queued") { try await jobs(harness).count == 3 }
            #expect(try await harness.ctl("resume").status == 0)
            var waiting: [String] = []
            try await waitUntil("one upload sending and two waiting for the slot") {
                let uploads = try await harness.ctl("status", "--json").json()["uploads"] as? [[String: Any]] ?? []
                let phases = uploads.compactMap { $0["phase"] as? String }.sorted()
                waiting = uploads.filter { $0["phase"] as? String == "waiting" }.compactMap { $0["job"] as? String }
                return phases == ["sending", "waiting", "waiting"] && (receiver.requests.first?.bodyBytes ?? 0) > 0
            }
            #expect(receiver.requests.count == 1, "one slot: one request at a time")
            try await body(harness, receiver, waiting)
        }
        try await receiver.stop()
    }

    @Test("jobs claimed ahead wait for a slot; paused, they go back to the queue unsent while the upload in flight finishes")
    func claimedAheadPause() async throws {
        try await withTwoWaiting { harness, receiver, _ in
            #expect(try await harness.ctl("pause", "test").status == 0)
            try await waitUntil("the two waiting jobs to be queued again") {
                try await jobs(harness).filter { $0.state == .queued }.count == 2
            }
            try await waitUntil("the upload in flight to finish", timeout: .seconds(40)) {
                try await jobs(harness).filter { $0.state == .done }.count == 1
            }
            let queued = try await jobs(harness).filter { $0.state == .queued }
            #expect(queued.count == 2 && queued.allSatisfy { $0.attempts == 0 }, "\(queued)")
            #expect(receiver.requests.count == 1, "nothing of a paused spool starts")
            #expect(harness.daemon?.log.contains("the spool is paused") == true)
            #expect(try await harness.ctl("resume").status == 0)
            try await waitUntil("every delivery", timeout: .seconds(60)) { try await jobs(harness).allSatisfy { $0.state == .done } }
            #expect(receiver.requests.count == 3)
        }
    }

    @Test("a job waiting for a slot is held or cancelled at once, unsent, while the upload in flight goes on")
    func claimedAheadHoldAndCancel() async throws {
        try await withTwoWaiting { harness, receiver, waiting in
            let held = try await harness.ctl("hold", waiting[0])
            #expect(held.status == 0 && held.stdout.contains("held"), "\(held)")
            let cancelled = try await harness.ctl("cancel", waiting[1])
            #expect(cancelled.status == 0, "\(cancelled)")
            let states = Dictionary(uniqueKeysWithValues: try await jobs(harness).map { ($0.id.rawValue, $0.state) })
            #expect(states[waiting[0]] == .held && states[waiting[1]] == .cancelled, "\(states)")
            #expect(states.values.filter { $0 == .uploading }.count == 1, "the upload in flight goes on: \(states)")
            #expect(receiver.requests.count == 1, "neither stopped job sent anything")
            let stopped = try await jobs(harness).filter { waiting.contains($0.id.rawValue) }
            #expect(stopped.count == 2 && stopped.allSatisfy { $0.attempts == 0 }, "a job stopped before its send has made no attempt")
            try await waitUntil("the upload in flight to finish", timeout: .seconds(40)) {
                try await jobs(harness).contains { $0.state == .done }
            }
            #expect(receiver.requests.count == 1)
        }
    }
}

import FerryQueue
import FerryReceiver
import FerryTestSupport
import Foundation
import Testing

#if canImport(Glibc)
import Glibc
#endif

/// `bandwidth_limit`, through the real ferryd: every body byte, on both transport paths, waits for
/// its tokens.
@Suite("Bandwidth limits", .serialized)
struct BandwidthTests {
    /// A file of `size` bytes (sparse: zeros), renamed into `directory` as `name`.
    static func dropSparse(_ name: String, size: Int64, in directory: String) throws {
        let temporary = directory + "/." + name
        let fd = open(temporary, O_CREAT | O_WRONLY | O_TRUNC, 0o644)
        guard fd >= 0, ftruncate(fd, off_t(size)) == 0 else { throw TestFailure("cannot create \(temporary)") }
        close(fd)
        guard rename(temporary, directory + "/" + name) == 0 else { throw TestFailure("cannot rename \(temporary)") }
    }

    /// Waits until every job of `harness` is done; returns how long that took from `start`.
    static func waitDone(_ harness: DaemonHarness, count: Int, since start: ContinuousClock.Instant,
                         timeout: Duration = .seconds(60)) async throws -> Duration {
        try await waitUntil("\(count) deliveries", timeout: timeout) {
            try await jobs(harness).filter { $0.state == .done }.count == count
        }
        return ContinuousClock.now - start
    }

    /// Starts ferryd with `spools` and `topLevel` against `receiver` (with `environment`, made just
    /// before the start), drops `files` (spool, name, size) once it is ready and returns how long from
    /// the drop until all were delivered: start-up, which a loaded machine may slow, is not counted.
    /// `check` runs as soon as they are.
    static func timeDeliveries(
        _ spools: [TestSpool], topLevel: [String], receiver: Receiver, files: [(String, String, Int64)],
        environment: () -> [String: String] = { [:] }, check: (DaemonHarness) -> Void = { _ in }
    ) async throws -> Duration {
        try await withDaemonHarness(spools: spools, topLevel: topLevel, url: receiver.url(path: "/in")) { harness in
            try await harness.start(environment: environment())
            let start = ContinuousClock.now
            for (spool, name, size) in files { try Self.dropSparse(name, size: size, in: harness.spoolPath(spool)) }
            let elapsed = try await Self.waitDone(harness, count: files.count, since: start)
            check(harness)
            return elapsed
        }
    }

    @Test("256 MiB at bandwidth_limit = \"16MiB/s\" takes about 16 s, over plain HTTP (sendfile) and over TLS (streamed)",
          arguments: [false, true])
    func limitedFile(tls: Bool) async throws {
        let pki = try TemporaryDirectory("ferry-pki")
        let certificates = try TestCertificates(in: pki.url("pki"))
        let receiver = try await Receiver.start(
            directory: pki.url("received"), discard: true, tls: tls ? try certificates.serverConfiguration() : nil)
        let spool = TestSpool(options: ["protocol = \"put\""] + (tls ? ["ca_file = \"\(certificates.caFile)\""] : []))
        let elapsed = try await Self.timeDeliveries(
            [spool], topLevel: ["bandwidth_limit = \"16MiB/s\""], receiver: receiver, files: [("test", "big.bin", 256 << 20)])
        // 16 MiB of burst, then 240 MiB at 16 MiB/s: 15 s; the bound is 16 s ± 10 %.
        #expect(elapsed >= .seconds(14.4) && elapsed <= .seconds(17.6), "256 MiB took \(elapsed)")
        try await receiver.stop()
    }

    @Test("two spools at 8 MiB/s each under a global 10 MiB/s share the 10 MiB/s, and neither goes past its own 8")
    func sharedGlobalLimit() async throws {
        let scratch = try TemporaryDirectory()
        let receiver = try await Receiver.start(directory: scratch.url("received"), discard: true)
        let spools = ["a", "b"].map { TestSpool(name: $0, options: ["protocol = \"put\"", "bandwidth_limit = \"8MiB/s\""]) }
        let elapsed = try await Self.timeDeliveries(
            spools, topLevel: ["bandwidth_limit = \"10MiB/s\""], receiver: receiver, files: [("a", "a.bin", 48 << 20), ("b", "b.bin", 48 << 20)])
        // 96 MiB through 10 MiB/s after a 10 MiB burst: 8.6 s (alone, each spool would take 5 s).
        #expect(elapsed >= .seconds(7.7) && elapsed <= .seconds(11), "96 MiB took \(elapsed)")
        try await receiver.stop()
    }

    @Test("no limit: a 256 MiB file is not slowed (well under the limited time)")
    func unlimited() async throws {
        let scratch = try TemporaryDirectory()
        let receiver = try await Receiver.start(directory: scratch.url("received"), discard: true)
        let elapsed = try await Self.timeDeliveries(
            [TestSpool(options: ["protocol = \"put\""])], topLevel: [], receiver: receiver, files: [("test", "big.bin", 256 << 20)])
        #expect(elapsed < .seconds(10), "256 MiB took \(elapsed) with no limit")
        try await receiver.stop()
    }

    @Test("a schedule's change mid-upload takes effect within a second (a clock moved to 3 s before it)")
    func scheduleChangesMidUpload() async throws {
        let scratch = try TemporaryDirectory()
        let receiver = try await Receiver.start(directory: scratch.url("received"), discard: true)
        // UTC noon today is 3 s away on ferryd's clock: 1 MiB/s until then, no limit after.
        var calendar = Calendar(identifier: .gregorian)
        calendar.timeZone = TimeZone(identifier: "UTC")!
        let noon = calendar.date(bySettingHour: 12, minute: 0, second: 0, of: Date())!
        var offsetMade = ContinuousClock.now
        var delivered = ContinuousClock.now
        _ = try await Self.timeDeliveries(
            [TestSpool(options: ["protocol = \"put\""])], topLevel: ["bandwidth_schedule = [\"00:00 1MiB/s\", \"12:00 off\"]"],
            receiver: receiver, files: [("test", "big.bin", 64 << 20)],
            environment: {
                offsetMade = ContinuousClock.now
                return ["FERRY_TEST_CLOCK_OFFSET": String(noon.timeIntervalSinceNow - 3), "TZ": "UTC"]
            }
        ) { harness in
            delivered = ContinuousClock.now
            #expect(harness.daemon?.log.contains("bandwidth limit changed") == true)
        }
        // At 1 MiB/s the file would take a minute: it cannot be done before the change, 3 s after the
        // offset was made, and the change takes effect within a second (the rest of the file goes in a
        // fraction of it; 6 s leaves room for a loaded machine and still proves it).
        let elapsed = delivered - offsetMade
        #expect(elapsed >= .seconds(2.9) && elapsed <= .seconds(6), "took \(elapsed)")
        try await receiver.stop()
    }

    @Test("ferryctl limit takes effect mid-upload, shows in status and metrics, and ends with a reload")
    func liveLimit() async throws {
        let scratch = try TemporaryDirectory()
        let receiver = try await Receiver.start(directory: scratch.url("received"), discard: true)
        try await withDaemonHarness(spools: [TestSpool(options: ["protocol = \"put\""])], topLevel: ["bandwidth_limit = \"1MiB/s\""],
                                    url: receiver.url(path: "/in")) { harness in
            try await harness.start()
            try Self.dropSparse("big.bin", size: 64 << 20, in: harness.spoolPath())
            try await waitUntil("the upload to be under way") { (receiver.requests.first?.bodyBytes ?? 0) > 0 }
            let lifted = ContinuousClock.now
            let set = try await harness.ctl("limit", "off")
            #expect(set.status == 0 && set.stdout.contains("all spools: off"), "\(set)")
            _ = try await Self.waitDone(harness, count: 1, since: lifted, timeout: .seconds(30))
            #expect(ContinuousClock.now - lifted < .seconds(10), "at 1 MiB/s the rest would take a minute")

            let status = try await harness.ctl("status", "--json").json()
            let shared = try #require((status["bandwidth"] as? [[String: Any]])?.first { $0["scope"] as? String == "*" })
            #expect(shared["source"] as? String == "override" && shared["limit"] as? String == "off")
            #expect(try await harness.ctl("limit", "--spool", "test", "2MiB/s").status == 0)
            let metrics = try await harness.ctl("metrics").stdout
            #expect(metrics.contains("ferry_bandwidth_limit_bytes_per_second{spool=\"test\"} 2097152"), "\(metrics)")
            #expect(try await harness.ctl("status").stdout.contains("test 2 MiB/s (override)"))

            let unknown = try await harness.ctl("limit", "--spool", "nosuch", "1MiB/s")
            #expect(unknown.status == 1 && unknown.stderr.contains("no spool named"), "\(unknown)")
            let bad = try await harness.ctl("limit", "fast")
            #expect(bad.status == 1 && bad.stderr.contains("is not a rate"), "\(bad)")

            #expect(try await harness.ctl("reload").status == 0)
            try await waitUntil("the override to end with the reload") {
                let states = try await harness.ctl("status", "--json").json()["bandwidth"] as? [[String: Any]]
                return states?.first { $0["scope"] as? String == "*" }?["source"] as? String == "config"
            }
        }
        try await receiver.stop()
    }
}

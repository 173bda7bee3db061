import FerryReceiver
import FerryTestSupport
import Foundation
import Testing

#if canImport(Glibc)
import Glibc
#endif

@Suite("Metrics: ferryctl metrics and metrics_listen", .serialized)
struct MetricsTests {
    @Test("ferry_uploads_in_flight counts the uploads holding a slot, not the jobs claimed ahead that wait for one")
    func inFlightIsSlots() async throws {
        let plan: @Sendable (RequestInfo) -> ReceiverAction = { _ in .stall(afterBytes: 0) }
        // shutdown_timeout 1 s: the stalled requests never end, and the harness stops ferryd at the end.
        try await withDaemonHarness(topLevel: ["max_concurrent_uploads = 1", "shutdown_timeout = \"1s\""], plan: plan) { harness in
            try await harness.start()
            for index in 0..<5 { try harness.drop("stalled-\(index).txt", Array("held".utf8)) }
            var values: [String: Double] = [:]
            // One request held by the receiver; two more claimed ahead (claimAhead(slots: 1)).
            try await waitUntil("three uploading jobs: \(values)") {
                values = try await metricValues(harness)
                return values[#"ferry_jobs{spool="test",state="uploading"}"#] == 3
            }
            #expect(values["ferry_uploads_in_flight"] == 1)
        }
    }

    @Test("ferryctl metrics and GET /metrics show deliveries, a rejection, bytes, durations, jobs, queue age and the last success")
    func scrape() async throws {
        let port = try freeLoopbackPort()
        let plan: @Sendable (RequestInfo) -> ReceiverAction = { info in
            info.uri.contains("strict") ? .respond(status: 400, body: "nope") : .store()
        }
        try await withDaemonHarness(
            spools: [TestSpool(), TestSpool(name: "strict")], topLevel: ["metrics_listen = \"127.0.0.1:\(port)\""], plan: plan
        ) { harness in
            try await harness.start()
            #expect(harness.daemon?.log.contains("metrics endpoint ready") == true)
            try harness.drop("good1.txt", Array("good one".utf8))
            try harness.drop("good2.txt", pseudoRandomBytes(200_000, seed: 4))
            try harness.drop("bad.txt", Array("rejected".utf8), spool: "strict")
            #expect(try await harness.ctl("wait", "--timeout", "30s").status == 1)

            // Attempts are counted once their outcome is on record: wait for the counters, not a sleep.
            var values: [String: Double] = [:]
            try await waitUntil("the counters to show 2 deliveries and 1 failure: \(values)") {
                values = try await metricValues(harness)
                return values[#"ferry_uploads_total{spool="test",outcome="delivered"}"#] == 2
                    && values[#"ferry_uploads_total{spool="strict",outcome="failed"}"#] == 1
            }
            #expect(values[#"ferry_uploads_total{spool="test",outcome="retry"}"#] == 0)
            #expect(values[#"ferry_uploads_total{spool="test",outcome="failed"}"#] == 0)
            #expect(values[#"ferry_uploads_total{spool="strict",outcome="delivered"}"#] == 0)
            let accepted = harness.receiver.acceptedRequests.reduce(Int64(0)) { $0 + $1.bodyBytes }
            let rejected = harness.receiver.requests.filter { $0.uri.contains("strict") }.reduce(Int64(0)) { $0 + $1.bodyBytes }
            #expect(accepted > 200_000 && rejected > 0)
            #expect(values[#"ferry_upload_bytes_total{spool="test",outcome="delivered"}"#] == Double(accepted))
            #expect(values[#"ferry_upload_bytes_total{spool="strict",outcome="failed"}"#] == Double(rejected))
            #expect(values["ferry_bytes_sent_total"] == Double(accepted + rejected))
            #expect(values[#"ferry_attempt_duration_seconds_count{spool="test"}"#] == 2)
            #expect(values[#"ferry_attempt_duration_seconds_bucket{spool="test",le="+Inf"}"#] == 2)
            #expect(values[#"ferry_attempt_duration_seconds_count{spool="strict"}"#] == 1)
            #expect((values[#"ferry_attempt_duration_seconds_sum{spool="test"}"#] ?? 0) > 0)
            #expect(values[#"ferry_jobs{spool="test",state="done"}"#] == 2)
            #expect(values[#"ferry_jobs{spool="strict",state="failed"}"#] == 1)
            #expect(values[#"ferry_jobs{spool="test",state="queued"}"#] == 0)
            let lastSuccess = try #require(values[#"ferry_last_success_timestamp_seconds{spool="test"}"#])
            #expect(abs(lastSuccess - Date().timeIntervalSince1970) < 300, "\(lastSuccess)")
            #expect(values[#"ferry_last_success_timestamp_seconds{spool="strict"}"#] == 0)
            #expect(values[#"ferry_oldest_job_age_seconds{spool="test"}"#] == 0)
            #expect(values[#"ferry_server_unreachable_tries{spool="test"}"#] == 0)
            #expect(values["ferry_uploads_in_flight"] == 0)
            #expect((values["ferry_uptime_seconds"] ?? 0) > 0)

            // The text: HELP and TYPE once per family, every sample line `name{labels} value`.
            let printed = try await harness.ctl("metrics")
            #expect(printed.status == 0)
            let families = try checkExposition(printed.stdout)
            #expect(families["ferry_uploads_total"] == "counter")
            #expect(families["ferry_upload_bytes_total"] == "counter")
            #expect(families["ferry_attempt_duration_seconds"] == "histogram")
            #expect(families["ferry_jobs"] == "gauge")
            #expect(families["ferry_oldest_job_age_seconds"] == "gauge")
            #expect(families["ferry_last_success_timestamp_seconds"] == "gauge")
            #expect(families["ferry_bytes_sent_total"] == "counter")
            #expect(printed.stdout.contains(#"ferry_uploads_total{spool="test",outcome="delivered"} 2"#), "\(printed.stdout)")

            // The same over HTTP.
            let scraped = try httpRequest(port: port, path: "/metrics")
            #expect(scraped.status == 200, "\(scraped)")
            #expect(scraped.headers["content-type"] == "text/plain; version=0.0.4; charset=utf-8")
            #expect(try checkExposition(scraped.body) == families)
            #expect(Set(sampleNames(scraped.body)) == Set(sampleNames(printed.stdout)))
            #expect(scraped.body.contains(#"ferry_uploads_total{spool="strict",outcome="failed"} 1"#))
            #expect(scraped.body.contains(#"ferry_attempt_duration_seconds_count{spool="test"} 2"#))
            let keptAlive = try httpRequest(port: port, path: "/metrics?x=1", keepAlive: true)
            #expect(keptAlive.status == 200 && keptAlive.body.contains("ferry_jobs"))
            #expect(try httpRequest(port: port, path: "/other").status == 404)
            #expect(try httpRequest(port: port, path: "/").status == 404)
            let post = try httpRequest(port: port, path: "/metrics", method: "POST")
            #expect(post.status == 405 && post.headers["allow"] == "GET, HEAD", "\(post)")
            let withBody = try httpRequest(port: port, path: "/metrics", method: "GET", keepAlive: true, body: "0123456789")
            #expect(withBody.status == 413 && withBody.headers["connection"] == "close", "\(withBody)")

            // A file waiting in a paused spool ages.
            #expect(try await harness.ctl("pause", "test").status == 0)
            try harness.drop("waiting.txt", Array("waiting".utf8))
            try await waitUntil("the waiting file to show in the queue age") {
                let values = try await metricValues(harness)
                return values[#"ferry_jobs{spool="test",state="queued"}"#] == 1
                    && (values[#"ferry_oldest_job_age_seconds{spool="test"}"#] ?? 0) > 0
            }

            // Changing metrics_listen needs a restart; the endpoint stays where it was.
            let original = try String(contentsOfFile: harness.configPath, encoding: .utf8)
            try original.replacingOccurrences(of: "127.0.0.1:\(port)", with: "127.0.0.1:\(try freeLoopbackPort())")
                .write(toFile: harness.configPath, atomically: true, encoding: .utf8)
            let reloaded = try await harness.ctl("reload")
            #expect(reloaded.status == 0 && reloaded.stderr.contains("metrics_listen"), "\(reloaded)")
            #expect(try httpRequest(port: port, path: "/metrics").status == 200)
        }
    }

    @Test("A metrics_listen port in use stops start-up with a clear error and leaves no control socket")
    func portInUse() async throws {
        let holder = try ListeningSocket()
        try await withDaemonHarness(topLevel: ["metrics_listen = \"localhost:\(holder.port)\""]) { harness in
            let daemon = try Ferryd(configPath: harness.configPath, logPath: harness.logPath)
            let status = try await daemon.child.waitForExit()
            #expect(status == 70, "\(daemon.log)")
            #expect(daemon.log.contains("cannot listen on metrics_listen 127.0.0.1:\(holder.port): Address already in use"), "\(daemon.log)")
            #expect(!fileExists(harness.controlSocket))
        }
    }
}

/// `ferryctl metrics --json`'s values.
private func metricValues(_ harness: DaemonHarness) async throws -> [String: Double] {
    let result = try await harness.ctl("metrics", "--json")
    guard result.status == 0, let values = try result.json()["values"] as? [String: Any] else {
        throw TestFailure("ferryctl metrics --json failed: \(result)")
    }
    return values.compactMapValues { ($0 as? NSNumber)?.doubleValue }
}

/// The series in a scrape, `name{labels}`.
private func sampleNames(_ text: String) -> [String] {
    text.split(separator: "\n").filter { !$0.hasPrefix("#") }.compactMap { line in line.lastIndex(of: " ").map { String(line[..<$0]) } }
}

/// Checks the Prometheus text exposition format line by line: `# HELP` and `# TYPE` at most once per
/// family and before its samples, a family's lines together, every sample `name{label="value",…} number`.
/// Returns each family's type.
private func checkExposition(_ text: String) throws -> [String: String] {
    let sample = #/^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{[a-zA-Z_][a-zA-Z0-9_]*="(?:[^"\\\n]|\\.)*"(?:,[a-zA-Z_][a-zA-Z0-9_]*="(?:[^"\\\n]|\\.)*")*\})? (-?(?:[0-9]+(?:\.[0-9]+)?(?:[eE][-+]?[0-9]+)?|\+Inf|NaN))$/#
    let type = #/^# TYPE ([a-zA-Z_:][a-zA-Z0-9_:]*) (counter|gauge|histogram|summary|untyped)$/#
    let help = #/^# HELP ([a-zA-Z_:][a-zA-Z0-9_:]*) .+$/#
    guard text.hasSuffix("\n") else { throw TestFailure("the text does not end with a newline") }
    var types: [String: String] = [:]
    var helped: Set<String> = []
    var finished: Set<String> = []
    var current: String?
    func enter(_ family: String) throws {
        if current != family {
            if let current { finished.insert(current) }
            guard !finished.contains(family) else { throw TestFailure("family \(family) is split:\n\(text)") }
            current = family
        }
    }
    for line in text.split(separator: "\n", omittingEmptySubsequences: false).dropLast().map(String.init) {
        if let match = line.wholeMatch(of: help) {
            let family = String(match.1)
            guard helped.insert(family).inserted, types[family] == nil else { throw TestFailure("misplaced HELP: \(line)") }
            try enter(family)
        } else if let match = line.wholeMatch(of: type) {
            let family = String(match.1)
            guard types[family] == nil else { throw TestFailure("a second TYPE: \(line)") }
            try enter(family)
            types[family] = String(match.2)
        } else if let match = line.wholeMatch(of: sample) {
            var family = String(match.1)
            for suffix in ["_bucket", "_sum", "_count"] where family.hasSuffix(suffix) && types[family] == nil {
                let base = String(family.dropLast(suffix.count))
                if types[base] == "histogram" { family = base }
            }
            guard types[family] != nil, current == family else { throw TestFailure("a sample outside its family: \(line)") }
        } else {
            throw TestFailure("not a Prometheus text line: \"\(line)\"")
        }
    }
    return types
}

/// A port on 127.0.0.1 that was free a moment ago.
private func freeLoopbackPort() throws -> Int {
    let socket = try ListeningSocket()
    return socket.port
}

/// A TCP socket listening on 127.0.0.1, on a port the kernel picks; closed when released.
private final class ListeningSocket {
    let descriptor: Int32
    let port: Int

    init() throws {
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        guard fd >= 0 else { throw TestFailure("socket: \(String(cString: strerror(errno)))") }
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        address.sin_port = 0
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        let bound = withUnsafeMutablePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                bind(fd, $0, length) == 0 && listen(fd, 4) == 0 && getsockname(fd, $0, &length) == 0
            }
        }
        guard bound else {
            let message = String(cString: strerror(errno))
            close(fd)
            throw TestFailure("bind 127.0.0.1:0: \(message)")
        }
        descriptor = fd
        port = Int(UInt16(bigEndian: address.sin_port))
    }

    deinit { close(descriptor) }
}


import FerryQueue
import FerryReceiver
import FerryTestSupport
import Foundation
import Testing

/// tus against scripted hostile servers, through the real ferryd: credentials stay on their origin,
/// and no server can keep an attempt in a request loop.
@Suite("tus hardening: credentials and request loops", .serialized)
struct TusHardeningTests {
    static let tus = HeaderField(name: "Tus-Resumable", value: "1.0.0")

    /// A tus server whose creation answer points at `http://localhost:PORT/elsewhere/1`: the same
    /// receiver, but another origin than the endpoint's `127.0.0.1`.
    static func elsewherePlan(size: Int) -> @Sendable (RequestInfo) -> ReceiverAction {
        { info in
            switch info.method {
            case "OPTIONS":
                return .respond(status: 204, headers: [tus, HeaderField(name: "Tus-Extension", value: "creation,termination")])
            case "POST":
                let port = info.header("Host")?.split(separator: ":").last.map(String.init) ?? ""
                return .respond(status: 201, headers: [tus, HeaderField(name: "Location", value: "http://localhost:\(port)/elsewhere/1")])
            default:
                return .respond(status: 204, headers: [tus, HeaderField(name: "Upload-Offset", value: String(size))])
            }
        }
    }

    @Test("Configured headers go only to the endpoint's origin, not to a Location on another one")
    func headersStayOnTheirOrigin() async throws {
        let size = 20_000
        let spool = TestSpool(options: ["protocol = \"tus\""], headers: ["Authorization = \"Bearer sekret\"", "X-Tenant = \"t1\""])
        try await withDaemonHarness(spools: [spool], plan: Self.elsewherePlan(size: size)) { harness in
            try await harness.start()
            try harness.drop("a.bin", pseudoRandomBytes(size, seed: 90))
            try await waitUntil("the job to be done\n\(harness.daemon?.log ?? "")") { try await jobs(harness).first?.state == .done }
            let requests = harness.receiver.requests
            let post = try #require(requests.first { $0.method == "POST" })
            #expect(post.header("Authorization") == "Bearer sekret" && post.header("X-Tenant") == "t1")
            let patch = try #require(requests.first { $0.method == "PATCH" })
            #expect(patch.uri == "/elsewhere/1" && patch.header("Host")?.hasPrefix("localhost:") == true)
            #expect(patch.header("Authorization") == nil, "a bearer token must not follow a server-given URL to another origin")
            #expect(patch.header("X-Tenant") == nil)
            #expect(patch.header("Tus-Resumable") == "1.0.0", "the protocol's own headers still go")
            #expect(harness.daemon?.log.contains("another origin") == true)
        }
    }

    @Test("send_headers_to lets the configured headers reach a named origin")
    func sendHeadersToNamedOrigin() async throws {
        let size = 20_000
        let spool = TestSpool(options: ["protocol = \"tus\""], headers: ["Authorization = \"Bearer sekret\""])
        try await withDaemonHarness(spools: [spool], plan: Self.elsewherePlan(size: size)) { harness in
            let port = try #require(URLComponents(string: harness.receiver.url(path: "/"))?.port)
            var config = try String(contentsOfFile: harness.configPath, encoding: .utf8)
            config = config.replacingOccurrences(of: "[spool.headers]", with: "send_headers_to = [\"http://LOCALHOST:\(port)/\"]\n[spool.headers]")
            try config.write(toFile: harness.configPath, atomically: true, encoding: .utf8)
            try await harness.start()
            try harness.drop("a.bin", pseudoRandomBytes(size, seed: 91))
            try await waitUntil("the job to be done\n\(harness.daemon?.log ?? "")") { try await jobs(harness).first?.state == .done }
            let patch = try #require(harness.receiver.requests.first { $0.method == "PATCH" })
            #expect(patch.header("Authorization") == "Bearer sekret")
        }
    }

    @Test("A server answering every PATCH with 409 while HEAD alternates offsets 1 and 0 ends each attempt; max_attempts applies")
    func requestLoopIsBounded() async throws {
        let size = 50_000
        let heads = Counter()
        let spool = TestSpool(options: ["protocol = \"tus\""], retry: ["initial_delay = \"100ms\"", "max_delay = \"200ms\"", "max_attempts = 2"])
        try await withDaemonHarness(spools: [spool], plan: { info in
            switch info.method {
            case "OPTIONS": return .respond(status: 204, headers: [Self.tus, HeaderField(name: "Tus-Extension", value: "creation")])
            case "POST": return .respond(status: 201, headers: [Self.tus, HeaderField(name: "Location", value: "/files/loop")])
            case "HEAD":
                return .respond(status: 200, headers: [
                    Self.tus, HeaderField(name: "Upload-Offset", value: heads.next() % 2 == 0 ? "1" : "0"),
                    HeaderField(name: "Upload-Length", value: String(size)),
                ])
            default: return .respond(status: 409, headers: [Self.tus])
            }
        }) { harness in
            try await harness.start()
            try harness.drop("loop.bin", pseudoRandomBytes(size, seed: 92))
            try await waitUntil("the job to fail\n\(harness.daemon?.log ?? "")", timeout: .seconds(30)) {
                try await jobs(harness).first?.state == .failed
            }
            let job = try #require(try await jobs(harness).first)
            #expect(job.attempts == 2)
            #expect(job.lastError?.contains("gave up after 2 attempts") == true, "\(job.lastError ?? "")")
            let requests = harness.receiver.requests.count
            #expect(requests <= 2 * 20, "two attempts, each bounded: \(requests) requests")
        }
    }

    @Test("A creation cut before its answer is followed by an empty one: on a link that drops it, the file still goes, in appends")
    func cutCreationThenEmptyCreation() async throws {
        let size = 300_000
        let posts = Counter()
        let bytes = pseudoRandomBytes(size, seed: 93)
        let spool = TestSpool(options: ["protocol = \"tus\""], retry: ["initial_delay = \"100ms\"", "max_delay = \"200ms\""])
        try await withDaemonHarness(spools: [spool], plan: { info in
            switch info.method {
            case "OPTIONS":
                return .respond(status: 204, headers: [Self.tus, HeaderField(name: "Tus-Extension", value: "creation,creation-with-upload")])
            case "POST":
                // The first creation carries the whole file; the link drops it 100 kB in.
                if posts.next() == 0 { return .reset(afterBytes: 100_000) }
                return .respond(status: 201, headers: [Self.tus, HeaderField(name: "Location", value: "/files/one"), HeaderField(name: "Upload-Offset", value: "0")])
            default:
                return .respond(status: 204, headers: [Self.tus, HeaderField(name: "Upload-Offset", value: String(size))])
            }
        }) { harness in
            try await harness.start()
            try harness.drop("scan.pdf", bytes)
            try await waitUntil("the job to be done\n\(harness.daemon?.log ?? "")") { try await jobs(harness).first?.state == .done }
            let requests = harness.receiver.requests
            #expect(requests.map(\.method) == ["OPTIONS", "POST", "POST", "PATCH"], "\(requests.map(\.method))")
            let creations = requests.filter { $0.method == "POST" }
            #expect(creations.first?.header("Content-Type") == "application/offset+octet-stream", "the first creation carried the file")
            #expect(creations.last?.bodyBytes == 0 && creations.last?.header("Content-Type") == nil, "the second carried nothing")
            let patch = try #require(requests.first { $0.method == "PATCH" })
            #expect(patch.bodyBytes == Int64(size) && patch.header("Upload-Offset") == "0")
            let job = try #require(try await jobs(harness).first)
            #expect(job.attempts == 2)
        }
    }
}

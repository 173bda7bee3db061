import FerryQueue
import FerryTestSupport
import Foundation
import Testing

/// `digest = "sha-256"` / `"sha-512"`: RFC 9530 `Repr-Digest` and `Content-Digest` sent with each
/// upload and checked in 2xx answers, against a server that checks them and one that echoes them,
/// behind a proxy that changes a byte in transit.
@Suite("End-to-end digests", .serialized)
struct DigestTests {
    static func base64Digest(_ hex: String) -> String {
        var bytes: [UInt8] = []
        var index = hex.startIndex
        while index < hex.endIndex {
            let next = hex.index(index, offsetBy: 2)
            bytes.append(UInt8(hex[index..<next], radix: 16)!)
            index = next
        }
        return Data(bytes).base64EncodedString()
    }

    @Test("multipart (small and large) and put send digests a checking server accepts; the digest is kept with the job",
          arguments: [("multipart", 2_000), ("multipart", 3_000_000), ("put", 2_000), ("put", 3_000_000)])
    func digestsAccepted(protocolName: String, size: Int) async throws {
        let serverDirectory = try TemporaryDirectory()
        let server = try await AnswerServer(directory: serverDirectory.url("server"), checkDigest: true)
        defer { Task { await server.stop() } }
        let spool = TestSpool(options: ["protocol = \"\(protocolName)\"", "digest = \"sha-256\""])
        try await withDaemonHarness(spools: [spool], url: server.url + "/in") { harness in
            try await harness.start()
            let bytes = pseudoRandomBytes(size, seed: UInt64(size))
            try harness.drop("data.bin", bytes)
            try await harness.waitForQuiet()
            let job = try #require(try await jobs(harness).first)
            #expect(job.state == .done, "\(job.lastError ?? "")")
            let request = try #require(server.requests.last)
            #expect(request.status == 201)
            let expected = "sha-256=:\(Self.base64Digest(sha256Hex(bytes))):"
            #expect(request.header("Repr-Digest") == expected)
            #expect(request.header("Content-Digest") != nil)
            if protocolName == "put" { #expect(request.header("Content-Digest") == expected, "the body is the file") }
            #expect(job.contentDigest == expected)
        }
    }

    @Test("sha-512 for put")
    func sha512() async throws {
        let serverDirectory = try TemporaryDirectory()
        let server = try await AnswerServer(directory: serverDirectory.url("server"), checkDigest: true)
        defer { Task { await server.stop() } }
        let spool = TestSpool(options: ["protocol = \"put\"", "digest = \"sha-512\""])
        try await withDaemonHarness(spools: [spool], url: server.url + "/in") { harness in
            try await harness.start()
            try harness.drop("data.bin", pseudoRandomBytes(70_000, seed: 9))
            try await harness.waitForQuiet()
            #expect(try await jobs(harness).first?.state == .done)
            #expect(server.requests.last?.header("Repr-Digest")?.hasPrefix("sha-512=:") == true)
        }
    }

    @Test("a byte changed in transit: a 2xx whose Repr-Digest differs is no delivery; the attempt is retried and the clean one delivers")
    func echoedMismatchRetried() async throws {
        let serverDirectory = try TemporaryDirectory()
        let server = try await AnswerServer(directory: serverDirectory.url("server"), echoDigest: true)
        let proxy = try await CutProxy(target: server.port, flip: "FLIPME", logPath: serverDirectory.url("proxy.log"))
        defer { Task { await proxy.stop(); await server.stop() } }
        let spool = TestSpool(options: ["digest = \"sha-256\""])
        try await withDaemonHarness(spools: [spool], url: proxy.url + "/in") { harness in
            try await harness.start()
            let bytes = Array("header\nFLIPME and the rest of the scan\n".utf8)
            try harness.drop("scan.txt", bytes)
            try await harness.waitForQuiet()
            #expect(try proxy.stats().flips == 1)
            let job = try #require(try await jobs(harness).first)
            #expect(job.state == .done)
            #expect(job.attempts == 2)
            let attempts = try await { () async throws -> [Attempt] in
                let store = try harness.queue()
                defer { try? store.close() }
                return try await store.attempts(of: job)
            }()
            #expect(attempts.first?.error?.contains("Repr-Digest") == true, "\(attempts.first?.error ?? "")")
            #expect(server.requests.map(\.sha256).last == sha256Hex(bytes), "the second request carried the file unchanged")
            #expect(!fileExists(harness.spoolPath() + "/scan.txt"))
        }
    }

    @Test("a byte changed in transit to a server that checks the digest: its 400 fails the job, the sidecar says why, the file is kept aside")
    func checkedMismatchRejected() async throws {
        let serverDirectory = try TemporaryDirectory()
        let server = try await AnswerServer(directory: serverDirectory.url("server"), checkDigest: true)
        let proxy = try await CutProxy(target: server.port, flip: "FLIPME", logPath: serverDirectory.url("proxy.log"))
        defer { Task { await proxy.stop(); await server.stop() } }
        let spool = TestSpool(options: ["protocol = \"put\"", "digest = \"sha-256\""])
        try await withDaemonHarness(spools: [spool], url: proxy.url + "/in") { harness in
            try await harness.start()
            try harness.drop("scan.txt", Array("FLIPME please".utf8))
            try await harness.waitForQuiet()
            let job = try #require(try await jobs(harness).first)
            #expect(job.state == .failed && job.responseStatus == 400)
            let sidecar = try String(contentsOfFile: harness.spoolPath() + "/.failed/scan.txt.error.json", encoding: .utf8)
            #expect(sidecar.contains("digest mismatch"))
            #expect(fileExists(harness.spoolPath() + "/.failed/scan.txt"))
        }
    }
}

import FerryQueue
import FerryTestSupport
import Foundation
import Testing

/// `protocol = "resumable"` (the IETF draft "Resumable Uploads for HTTP") through the real ferryd
/// against two servers on 127.0.0.1: swift-nio-extras' NIOResumableUpload (interop 6, what Apple's
/// URLSession speaks) and the project's own `Tests/Servers/resumable_server.py` (interop 9, with
/// faults to order), behind `Tests/Servers/cut_proxy.py`, which counts what ferryd sends and can cut
/// the connection or hold it to a rate.
@Suite("Resumable uploads (IETF draft) through the real ferryd", .serialized)
struct ResumableProtocolTests {
    static let mib = 1 << 20

    /// The spool's `interop_version` for a server of `kind`.
    static func interop(_ kind: ResumableServer.Kind) -> Int { kind == .nio ? 6 : 9 }

    /// Runs `body` with a server of `kind` (`serverOptions`: the Python server's faults), a proxy
    /// in front of it and a ferryd whose one spool sends to `/upload` through the proxy.
    func withResumable(
        _ kind: ResumableServer.Kind, serverOptions: [String] = [], options: [String] = [], interop: Int? = nil,
        topLevel: [String] = [], cutAt: Int? = nil, cutEvery: Int? = nil, rate: Int? = nil, _ body: (DaemonHarness, ResumableServer, CutProxy) async throws -> Void
    ) async throws {
        let directory = try TemporaryDirectory("ferry-resumable")
        let server = try await ResumableServer(kind, logPath: directory.url("server.log"), options: serverOptions)
        let proxy: CutProxy
        do {
            proxy = try await CutProxy(target: server.port, cutAt: cutAt, cutEvery: cutEvery, rate: rate, logPath: directory.url("proxy.log"))
        } catch {
            await server.stop()
            throw error
        }
        let spool = TestSpool(options: ["protocol = \"resumable\"", "interop_version = \(interop ?? Self.interop(kind))"] + options)
        do {
            try await withDaemonHarness(spools: [spool], topLevel: topLevel, url: proxy.url + "/upload") { harness in
                do {
                    try await body(harness, server, proxy)
                } catch {
                    throw TestFailure("\(error)\n--- \(kind) server ---\n\(server.log.suffix(4000))\n--- ferryd ---\n\(harness.daemon?.log.suffix(6000) ?? "")")
                }
            }
        } catch {
            await proxy.stop()
            await server.stop()
            throw error
        }
        await proxy.stop()
        await server.stop()
    }

    @Test("Files of every size arrive whole; small ones in one request, large ones created empty and appended", arguments: [ResumableServer.Kind.nio, .python])
    func delivers(_ kind: ResumableServer.Kind) async throws {
        try await withResumable(kind) { harness, server, _ in
            try await harness.start()
            let files: [(String, Int)] = [("empty.json", 0), ("note «1» \"a\".txt", 100_000), ("clip.mp4", 5 * Self.mib + 17), ("scan.pdf", 9 * Self.mib)]
            var contents: [String: [UInt8]] = [:]
            for (index, (name, size)) in files.enumerated() {
                contents[name] = pseudoRandomBytes(size, seed: UInt64(index + 300))
                try harness.drop(name, contents[name]!)
            }
            _ = try await waitForState(harness, .done, count: files.count)
            try await harness.waitForQuiet()
            let stats = try server.stats()
            #expect(Set(stats.completed.map(\.sha256)) == Set(contents.values.map(sha256Hex)), "every file arrived byte-exact")
            #expect(stats.completed.allSatisfy { $0.path == "/upload" })
            #expect(stats.completed.contains { $0.size == 5 * Self.mib + 17 && $0.contentType == "video/mp4" })
            if kind == .python {
                #expect(Set(stats.completed.compactMap(\.filename)) == Set(contents.keys), "Content-Disposition names each file")
            }
            #expect(stats.counts["OPTIONS"] == 1, "support is discovered once per endpoint, and only for large files")
            #expect(stats.counts["POST"] == 4)
            #expect(stats.counts["PATCH"] == 2, "the two large files: one append each")
            #expect(stats.totalBodyBytes == contents.values.reduce(0) { $0 + $1.count }, "no byte sent twice")
            let creations = stats.requests.filter { $0.method == "POST" }
            #expect(creations.filter { $0.uploadComplete == "?0" }.allSatisfy { $0.bodyBytes == 0 }, "large files are created empty")
            #expect(creations.filter { $0.uploadComplete == "?1" }.count == 2)
            #expect(stats.requests.filter { $0.method == "PATCH" }.allSatisfy { $0.contentType == "application/partial-upload" && $0.uploadComplete == "?1" })
            #expect(stats.requests.allSatisfy { $0.interop == String(Self.interop(kind)) })
            if kind == .nio {
                // Every creation got a 104 first (AsyncHTTPClient drops it and waits for the final answer).
                #expect(creations.allSatisfy { $0.statuses?.first == 104 }, "\(creations.map(\.statuses))")
            }
            for job in try await jobs(harness) {
                #expect(job.attempts == 1)
                // The application's answer to the upload is kept with the job.
                let body = String(decoding: job.responseBody ?? [], as: UTF8.self)
                #expect(body.contains(sha256Hex(contents[job.displayPath]!)), "\(job.displayPath): \(body)")
            }
            for name in contents.keys { #expect(!fileExists(harness.spoolPath() + "/" + name)) }
        }
    }

    @Test("Large files one after another on reused connections: none stalls (NIOResumableUpload stalls a PATCH after a completing one)")
    func connectionsReused() async throws {
        try await withResumable(.nio, topLevel: ["max_concurrent_uploads = 2"]) { harness, server, _ in
            try await harness.start()
            // Two small files at once open two connections; the pool then alternates between them, so a
            // large file is created on one and appended on the other.
            var digests: [String] = []
            for index in 0..<2 {
                let bytes = pseudoRandomBytes(1000, seed: UInt64(320 + index))
                digests.append(sha256Hex(bytes))
                try harness.drop("small-\(index).txt", bytes)
            }
            _ = try await waitForState(harness, .done, count: 2)
            for index in 0..<4 {
                let bytes = pseudoRandomBytes(5 * Self.mib + index, seed: UInt64(330 + index))
                digests.append(sha256Hex(bytes))
                try harness.drop("frame-\(index).raw", bytes)
                _ = try await waitForState(harness, .done, count: 3 + index, timeout: .seconds(30))
            }
            #expect(Set(try server.stats().completed.map(\.sha256)) == Set(digests))
            #expect(try await jobs(harness).allSatisfy { $0.attempts == 1 }, "no append stalled into a retry")
        }
    }

    @Test("A connection cut at 60% of 64 MiB resumes from the server's offset: at most 10% is sent again", arguments: [ResumableServer.Kind.nio, .python])
    func resumesAfterCut(_ kind: ResumableServer.Kind) async throws {
        let size = 64 * Self.mib
        try await withResumable(kind, cutAt: size * 6 / 10) { harness, server, proxy in
            try await harness.start()
            let bytes = pseudoRandomBytes(size, seed: 310)
            try harness.drop("video.bin", bytes)
            let done = try await waitForState(harness, .done)
            try await harness.waitForQuiet()
            let stats = try server.stats()
            #expect(try proxy.stats().cuts == 1)
            #expect(stats.completed.map(\.sha256) == [sha256Hex(bytes)])
            let received = stats.totalBodyBytes
            print("resumable \(kind): cut at 60% of 64 MiB: the server read \(received) bytes for \(size) (\(received - size) re-sent)")
            #expect(received <= size + size / 10, "re-sent at most 10%")
            #expect(stats.counts["POST"] == 1, "the upload was resumed, not created again")
            #expect(stats.counts["HEAD"] == 1, "the resume asked the server for its offset")
            #expect(done.first?.attempts == 2)
        }
    }

    @Test("A small file's creation cut before its answer is followed by an empty creation and an append", arguments: [ResumableServer.Kind.nio, .python])
    func cutCreationThenEmptyCreation(_ kind: ResumableServer.Kind) async throws {
        let size = 1 * Self.mib
        try await withResumable(kind, cutAt: size / 2) { harness, server, proxy in
            try await harness.start()
            let bytes = pseudoRandomBytes(size, seed: 312)
            try harness.drop("scan.pdf", bytes)
            let done = try await waitForState(harness, .done)
            try await harness.waitForQuiet()
            let stats = try server.stats()
            #expect(try proxy.stats().cuts == 1)
            #expect(stats.completed.map(\.sha256) == [sha256Hex(bytes)])
            let creations = stats.requests.filter { $0.method == "POST" }
            #expect(creations.count == 2, "\(stats.requests.map(\.method))")
            #expect(creations.first?.uploadComplete == "?1", "the first attempt sent the file whole in its creation")
            #expect(creations.last?.uploadComplete == "?0" && creations.last?.bodyBytes == 0, "the retry created the upload empty")
            #expect(stats.requests.filter { $0.method == "PATCH" }.map(\.bodyBytes) == [size])
            #expect(done.first?.attempts == 2)
            if kind == .python, let id = done.first?.id.rawValue {
                // The creation without the bytes is another request: another key (a server that keeps
                // keys would refuse the job's own key with another payload, 422).
                #expect(creations.map(\.idempotencyKey) == [id, id + "-empty"])
            }
        }
    }

    @Test("A link that drops every connection after 256 KiB still delivers files of 1 and 5 MiB", arguments: [ResumableServer.Kind.nio, .python])
    func linkThatKeepsDropping(_ kind: ResumableServer.Kind) async throws {
        try await withResumable(kind, cutEvery: 256 << 10) { harness, server, proxy in
            try await harness.start()
            let files = [("page.pdf", pseudoRandomBytes(Self.mib, seed: 313)), ("film.mov", pseudoRandomBytes(5 * Self.mib, seed: 314))]
            for (name, bytes) in files { try harness.drop(name, bytes) }
            _ = try await waitForState(harness, .done, count: files.count, timeout: .seconds(120))
            try await harness.waitForQuiet()
            #expect(Set(try server.stats().completed.map(\.sha256)) == Set(files.map { sha256Hex($0.1) }))
            #expect(try proxy.stats().cuts >= 20, "the link dropped again and again")
        }
    }

    @Test("kill -9 of ferryd at 60% of 64 MiB, then a restart, resumes from the server's offset", arguments: [ResumableServer.Kind.nio, .python])
    func resumesAfterKill(_ kind: ResumableServer.Kind) async throws {
        let size = 64 * Self.mib
        // Held to 8 MiB/s: the kill comes in the 3 s between 60% and the end.
        try await withResumable(kind, rate: 8 * Self.mib) { harness, server, proxy in
            try await harness.start()
            let bytes = pseudoRandomBytes(size, seed: 311)
            try harness.drop("archive.tar", bytes)
            try await waitUntil("60% of the file sent", timeout: .seconds(60)) { try proxy.stats().upstreamBytes >= size * 6 / 10 }
            try await harness.kill9()
            let before = try #require(try await jobs(harness).first)
            #expect(before.upload?.url.contains("/") == true, "the upload URL was in the queue before the kill")
            try await harness.start()
            let done = try await waitForState(harness, .done)
            try await harness.waitForQuiet()
            let stats = try server.stats()
            #expect(stats.completed.map(\.sha256) == [sha256Hex(bytes)])
            let sent = try proxy.stats().upstreamBytes
            print("resumable \(kind): kill -9 at 60% of 64 MiB: \(sent) bytes on the wire for \(size), the server read \(stats.totalBodyBytes)")
            #expect(stats.totalBodyBytes <= size + size / 10, "re-sent at most 10%")
            #expect(stats.counts["POST"] == 1)
            #expect(done.first?.attempts == 1, "the attempt cut by the crash does not count")
        }
    }

    @Test("The server's max-append-size splits the appends; only the last completes the upload")
    func maxAppendSize() async throws {
        try await withResumable(.python, serverOptions: ["--max-append-size", String(Self.mib)]) { harness, server, _ in
            try await harness.start()
            let bytes = pseudoRandomBytes(9 * Self.mib / 2, seed: 312)
            try harness.drop("scan.tiff", bytes)
            _ = try await waitForState(harness, .done)
            let stats = try server.stats()
            #expect(stats.completed.map(\.sha256) == [sha256Hex(bytes)])
            let appends = stats.requests.filter { $0.method == "PATCH" }
            #expect(appends.map(\.bodyBytes) == [Self.mib, Self.mib, Self.mib, Self.mib, Self.mib / 2])
            #expect(appends.map(\.uploadComplete) == ["?0", "?0", "?0", "?0", "?1"])
            #expect(appends.map(\.uploadOffset) == ["0", "1048576", "2097152", "3145728", "4194304"])
            #expect(stats.requests.allSatisfy { $0.status != 413 })
            // The done job's upload is whole on the server, though the offset last recorded was the fourth append's.
            let id = try #require(try await jobs(harness).first).id.rawValue
            let shown = try await harness.ctl("show", id)
            #expect(shown.stdout.contains("4.5 MiB of 4.5 MiB (100%) held by the server\n"), "\(shown)")
            #expect(!shown.stdout.contains("a retry resumes"), "\(shown)")
            #expect((try await harness.ctl("show", id, "--json").json()["job"] as? [String: Any])?["confirmed_bytes"] as? Int == bytes.count)
        }
    }

    @Test("Appends larger than the server takes and did not announce: each 413 halves them until they fit")
    func tooLargeAppends() async throws {
        try await withResumable(.python, serverOptions: ["--max-append-size", String(Self.mib), "--hide-limits"], options: ["chunk_size = \"4MiB\""]) { harness, server, _ in
            try await harness.start()
            let bytes = pseudoRandomBytes(6 * Self.mib, seed: 313)
            try harness.drop("big.raw", bytes)
            _ = try await waitForState(harness, .done)
            let stats = try server.stats()
            #expect(stats.completed.map(\.sha256) == [sha256Hex(bytes)])
            let appends = stats.requests.filter { $0.method == "PATCH" }
            #expect(appends.compactMap(\.status).filter { $0 == 413 }.count == 2, "4 MiB, then 2 MiB refused; 1 MiB taken")
            #expect(appends.filter { $0.status != 413 }.map(\.bodyBytes) == Array(repeating: Self.mib, count: 6))
        }
    }

    @Test("A 409 offset mismatch (the server lost the tail it had): ferryd asks the offset and sends from there")
    func conflict() async throws {
        try await withResumable(.python, serverOptions: ["--conflict-once"], options: ["chunk_size = \"1MiB\""]) { harness, server, _ in
            try await harness.start()
            let bytes = pseudoRandomBytes(5 * Self.mib, seed: 314)
            try harness.drop("frame.bin", bytes)
            let done = try await waitForState(harness, .done)
            let stats = try server.stats()
            #expect(stats.completed.map(\.sha256) == [sha256Hex(bytes)])
            #expect(stats.requests.map(\.method) == ["OPTIONS", "POST", "PATCH", "PATCH", "HEAD"] + Array(repeating: "PATCH", count: 5))
            #expect(stats.requests.compactMap(\.status) == [204, 201, 204, 409, 204, 204, 204, 204, 204, 200])
            #expect(stats.requests.filter { $0.method == "PATCH" }.map(\.uploadOffset)
                == ["0", "1048576", "1047576", "2096152", "3144728", "4193304", "5241880"])
            #expect(done.first?.attempts == 1)
        }
    }

    @Test("An upload the server lost (404): ferryd creates it again and delivers")
    func lost() async throws {
        try await withResumable(.python, serverOptions: ["--lose-once"]) { harness, server, _ in
            try await harness.start()
            let bytes = pseudoRandomBytes(6 * Self.mib, seed: 315)
            try harness.drop("lost.bin", bytes)
            let done = try await waitForState(harness, .done)
            let stats = try server.stats()
            #expect(stats.completed.map(\.sha256) == [sha256Hex(bytes)])
            #expect(stats.requests.map(\.method) == ["OPTIONS", "POST", "PATCH", "POST", "PATCH"])
            // The creation again carries no key: a server that keeps keys would answer it with the
            // lost upload's stored answer.
            let id = try #require(done.first?.id.rawValue)
            #expect(stats.requests.filter { $0.method == "POST" }.map(\.idempotencyKey) == [id + "-empty", nil])
        }
    }

    @Test("A server that never offers resumption gets ordinary uploads of whole files, never an empty or partial body")
    func neverOffered() async throws {
        try await withResumable(.python, serverOptions: ["--no-resumption"]) { harness, server, _ in
            try await harness.start()
            let large = pseudoRandomBytes(9 * Self.mib, seed: 316)
            let small = pseudoRandomBytes(1000, seed: 317)
            try harness.drop("large.bin", large)
            try harness.drop("small.txt", small)
            _ = try await waitForState(harness, .done, count: 2)
            let stats = try server.stats()
            #expect(Set((stats.ordinary ?? []).map(\.sha256)) == [sha256Hex(large), sha256Hex(small)])
            #expect((stats.ordinary ?? []).count == 2, "every request the server took was a whole file")
            #expect(stats.counts["PATCH"] == nil && stats.counts["HEAD"] == nil)
        }
    }

    @Test("A server without OPTIONS (501, as Python's http.server answers) gets a large file whole, in the first attempt")
    func optionsNotImplemented() async throws {
        try await withResumable(.python, serverOptions: ["--no-resumption", "--options-status", "501"]) { harness, server, _ in
            try await harness.start()
            let large = pseudoRandomBytes(9 * Self.mib, seed: 330)
            try harness.drop("large.bin", large)
            let done = try await waitForState(harness, .done)
            #expect(done.first?.attempts == 1)
            let stats = try server.stats()
            #expect((stats.ordinary ?? []).map(\.sha256) == [sha256Hex(large)])
            #expect(stats.requests.map(\.method) == ["OPTIONS", "POST"])
        }
    }

    @Test("A proxy's body limit (413) in front of a resumable server: a file that went whole is sent again in appends, halved until they pass")
    func proxyBodyLimit() async throws {
        try await withResumable(.python, serverOptions: ["--max-body", "\(Self.mib)"]) { harness, server, _ in
            try await harness.start()
            let bytes = pseudoRandomBytes(5 * Self.mib / 2, seed: 331)
            try harness.drop("scan.pdf", bytes)
            let done = try await waitForState(harness, .done)
            #expect(done.first?.attempts == 1, "no retry: the 413 is handled within the attempt")
            let stats = try server.stats()
            #expect(stats.completed.map(\.sha256) == [sha256Hex(bytes)])
            #expect(Array(stats.requests.map(\.method).prefix(3)) == ["POST", "OPTIONS", "POST"])
            #expect(stats.requests.first?.status == 413)
            #expect(stats.requests.filter { $0.method == "PATCH" && $0.status == 413 }.count == 1, "1.25 MiB refused, then 640 KiB appends")
        }
    }

    @Test("cancel of a job whose upload is on the server deletes it there")
    func cancelDeletes() async throws {
        try await withResumable(.python, options: ["chunk_size = \"1MiB\""], rate: 4 * Self.mib) { harness, server, _ in
            try await harness.start()
            try harness.drop("big.bin", pseudoRandomBytes(64 * Self.mib, seed: 318))
            try await waitUntil("an append confirmed and recorded", timeout: .seconds(60)) {
                (try await jobs(harness).first?.upload?.offset ?? 0) >= Int64(Self.mib)
            }
            let job = try #require(try await jobs(harness).first)
            let shown = try await harness.ctl("show", job.id.rawValue)
            #expect(shown.stdout.contains("confirmed"), "\(shown)")
            let result = try await harness.ctl("cancel", job.id.rawValue)
            #expect(result.status == 0, "\(result)")
            _ = try await waitForState(harness, .cancelled)
            try await waitUntil("the DELETE to reach the server") { try server.stats().counts["DELETE"] == 1 }
            #expect(try server.stats().uploads?.isEmpty == true, "the server forgot the upload")
            #expect(fileExists(harness.spoolPath() + "/.failed/big.bin"), "a cancelled file is moved aside, never deleted")
        }
    }

    @Test("A spool of another draft version than the server's: the file is set aside with the version to configure")
    func interopMismatch() async throws {
        try await withResumable(.nio, interop: 9) { harness, server, _ in
            try await harness.start()
            try harness.drop("photo.jpg", pseudoRandomBytes(1000, seed: 319))
            let path = harness.spoolPath() + "/.failed/photo.jpg.error.json"
            try await waitUntil("the file set aside with its reason") { fileExists(path) }
            let sidecar = try String(contentsOfFile: path, encoding: .utf8)
            #expect(sidecar.contains("set interop_version = 6"), "\(sidecar)")
            #expect(try server.stats().completed.isEmpty)
        }
    }

    @Test("A tus server given to a resumable spool: the file is set aside (412), and the log and the reason say to use tus")
    func tusServer() async throws {
        let directory = try TemporaryDirectory("ferry-resumable-tus")
        let server = try await TusServer.start(filesDirectory: directory.url("files"))
        do {
            try await withDaemonHarness(spools: [TestSpool(options: ["protocol = \"resumable\""])], url: server.url + "/") { harness in
                try await harness.start()
                try harness.drop("scan.pdf", pseudoRandomBytes(5 * Self.mib, seed: 320))
                let path = harness.spoolPath() + "/.failed/scan.pdf.error.json"
                try await waitUntil("the file set aside with its reason") { fileExists(path) }
                let sidecar = try String(contentsOfFile: path, encoding: .utf8)
                #expect(sidecar.contains("412") && sidecar.contains(#"the server speaks tus"#), "\(sidecar)")
                #expect(harness.daemon?.log.contains("the server speaks tus (its OPTIONS answer has") == true)
                #expect(try await server.stats().completed.isEmpty)
            }
        } catch {
            try? await server.stop()
            throw error
        }
        try await server.stop()
    }
}

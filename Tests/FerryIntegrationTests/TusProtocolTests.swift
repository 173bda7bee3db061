import FerryQueue
import FerryReceiver
import FerryTestSupport
import Foundation
import Testing

/// `protocol = "tus"` against a real tus 1.0 server: tuspyserver 4.4.3 (FastAPI, under uvicorn),
/// behind a proxy in `Tests/Servers/tus_server.py` that can cut or stall one PATCH.
@Suite("tus uploads through the real ferryd against tuspyserver", .serialized)
struct TusProtocolTests {
    /// Runs `body` with a tus server (stopped afterwards) and a ferryd whose one spool sends to it.
    func withTus(
        cutAt: Int? = nil, stallAt: Int? = nil, pauseAt: Int? = nil, endpointSuffix: String = "/", options: [String] = [],
        fields: [String] = [], retry: [String]? = nil, _ body: (DaemonHarness, TusServer) async throws -> Void
    ) async throws {
        let directory = try TemporaryDirectory("ferry-tus")
        let server = try await TusServer.start(filesDirectory: directory.url("files"), cutAt: cutAt, stallAt: stallAt, pauseAt: pauseAt)
        do {
            let spool = TestSpool(options: ["protocol = \"tus\""] + options, fields: fields, retry: retry)
            try await withDaemonHarness(spools: [spool], url: server.url + endpointSuffix) { harness in
                do {
                    try await body(harness, server)
                } catch {
                    throw TestFailure("\(error)\n--- tus server ---\n\(server.log)\n--- ferryd ---\n\(harness.daemon?.log ?? "")")
                }
            }
        } catch {
            try? await server.stop()
            throw error
        }
        try await server.stop()
    }

    func waitForCompleted(_ count: Int, on server: TusServer, timeout: Duration = .seconds(60)) async throws -> TusStats {
        var last: TusStats?
        try await waitUntil("\(count) complete uploads on the tus server (have \(last?.completed.count ?? 0))", timeout: timeout) {
            last = try await server.stats()
            return last!.completed.count >= count
        }
        return last!
    }

    @Test("Files of every size arrive whole, with filename, filetype and the configured fields as metadata")
    func delivers() async throws {
        try await withTus(fields: ["camera = \"north {filename}\""]) { harness, server in
            try await harness.start()
            let files: [(String, Int)] = [("clip.mp4", 5 << 20), ("note.txt", 100_000), ("empty.json", 0)]
            var contents: [String: [UInt8]] = [:]
            for (index, (name, size)) in files.enumerated() {
                contents[name] = pseudoRandomBytes(size, seed: UInt64(index + 70))
                try harness.drop(name, contents[name]!)
            }
            let stats = try await waitForCompleted(files.count, on: server)
            try await harness.waitForQuiet()
            for done in stats.completed {
                let name = try #require(done.name)
                #expect(done.sha256 == sha256Hex(contents[name]!), "\(name) arrived changed")
                #expect(done.size == contents[name]!.count)
            }
            #expect(Set(stats.completed.compactMap(\.name)) == Set(contents.keys))
            #expect(stats.counts["OPTIONS"] == 1, "capabilities are discovered once per endpoint")
            #expect(stats.counts["POST"] == 3)
            // creation-with-upload: the 100 kB file travels in its creation request; the 5 MiB one
            // is created empty (its URL on record before any byte goes), then sent with one PATCH.
            #expect(stats.counts["PATCH"] == 1)
            #expect(stats.postBytes == 100_000)
            #expect(stats.patchBytes == 5 << 20)
            let metadata = try String(contentsOfFile: server.filesDirectory + "/" + #require(stats.completed.first { $0.name == "clip.mp4" }).id + ".info", encoding: .utf8)
            #expect(metadata.contains("video/mp4"))
            #expect(metadata.contains("north clip.mp4"))
            for job in try await jobs(harness) {
                #expect(job.state == .done)
                #expect(job.upload?.offset == job.identity.size)
                #expect(job.attempts == 1)
            }
            for name in contents.keys { #expect(!fileExists(harness.spoolPath() + "/" + name)) }
            let show = try await harness.ctl("show", try #require(try await jobs(harness).first { $0.displayPath == "clip.mp4" }).id.rawValue, "--json")
            #expect((try show.json()["job"] as? [String: Any])?["confirmed_bytes"] as? Int == 5 << 20, "\(show)")
        }
    }

    @Test("The answer kept is the last request's (the creation that carried the file, with its Location); a digest the server does not check is warned of")
    func answerAndUncheckedDigest() async throws {
        try await withTus(options: ["digest = \"sha-256\""]) { harness, server in
            try await harness.start()
            try harness.drop("small.txt", pseudoRandomBytes(50_000, seed: 81))
            try harness.drop("large.bin", pseudoRandomBytes((4 << 20) + 1, seed: 82))
            _ = try await waitForCompleted(2, on: server)
            try await harness.waitForQuiet()
            let done = try await jobs(harness)
            let small = try #require(done.first { $0.displayPath == "small.txt" })
            #expect(small.state == .done && small.responseStatus == 201, "the creation carried the whole file: \(small)")
            let location = small.responseHeaders.first { $0.name == "location" }?.value
            #expect(location?.hasPrefix(server.url) == true, "the upload's URL is kept: \(small.responseHeaders)")
            let large = try #require(done.first { $0.displayPath == "large.bin" })
            #expect(large.state == .done && large.responseStatus == 204, "the last PATCH's answer: \(large)")
            let log = harness.daemon?.log ?? ""
            #expect(log.contains("the tus server does not offer sha256 checksums"), "\(log.suffix(3000))")
        }
    }

    @Test("A connection cut at 60% of 64 MiB resumes: the server receives the file once, not 160%")
    func resumesAfterCut() async throws {
        let size = 64 << 20
        let cut = size * 6 / 10
        try await withTus(cutAt: cut) { harness, server in
            try await harness.start()
            let bytes = pseudoRandomBytes(size, seed: 64)
            try harness.drop("video.bin", bytes)
            let stats = try await waitForCompleted(1, on: server)
            try await harness.waitForQuiet()
            #expect(stats.cuts == 1)
            #expect(stats.completed.first?.sha256 == sha256Hex(bytes))
            let received = stats.postBytes + stats.patchBytes
            print("tus, cut at 60% of 64 MiB: the server read \(received) bytes for \(size) (\(received - size) re-sent)")
            #expect(received >= size)
            #expect(received <= size + size / 100, "the server read \(received) bytes for a \(size)-byte file")
            #expect(stats.counts["POST"] == 1, "the upload was resumed, not created again")
            #expect(stats.counts["HEAD"] == 1, "the resume asked the server for its offset")
            let job = try #require(try await jobs(harness).first)
            #expect(job.state == .done)
            #expect(job.attempts == 2)
            let tries = try await attempts(harness, job)
            print("tus, cut at 60%: ferryd handed \(tries.map(\.bytesSent)) bytes to the connection per attempt")
            #expect(tries.first?.outcome == .retry)
            #expect(tries.last?.outcome == .success)
            #expect(tries.last.map { $0.bytesSent <= Int64(size - cut) } == true, "the second attempt sent only the remainder")
        }
    }

    @Test("kill -9 of ferryd at 60% of 64 MiB, then a restart, resumes from the server's offset")
    func resumesAfterKill() async throws {
        let size = 64 << 20
        let stall = size * 6 / 10
        // Without the trailing slash tuspyserver answers OPTIONS with 405: Ferry falls back to the
        // creation extension alone, so the whole file goes in one PATCH.
        try await withTus(stallAt: stall, endpointSuffix: "") { harness, server in
            try await harness.start()
            let bytes = pseudoRandomBytes(size, seed: 65)
            try harness.drop("archive.tar", bytes)
            try await waitUntil("the server to stall the upload at 60%") { try await server.stats().stalls == 1 }
            try await harness.kill9()
            // The server keeps what it read once it gives up on the dead client.
            try server.release()
            try await waitUntil("the server to record the partial upload") {
                try await server.stats().uploads.first?.offset == stall
            }
            let before = try #require(try await jobs(harness).first)
            #expect(before.upload?.url.isEmpty == false, "the upload URL was in the queue before the kill")
            try await harness.start()
            let stats = try await waitForCompleted(1, on: server)
            try await harness.waitForQuiet()
            #expect(stats.completed.first?.sha256 == sha256Hex(bytes))
            let received = stats.postBytes + stats.patchBytes
            print("tus, kill -9 at 60% of 64 MiB: the server read \(received) bytes for \(size) (\(received - size) re-sent)")
            #expect(received == size, "the server read \(received) bytes for a \(size)-byte file")
            #expect(stats.counts["POST"] == 1)
            let job = try #require(try await jobs(harness).first)
            #expect(job.state == .done)
            #expect(job.attempts == 1, "the attempt cut by the crash does not count")
            #expect(job.upload?.offset == Int64(size))
        }
    }

    @Test("A link that drops every connection after 256 KiB still delivers files of 1 and 5 MiB")
    func linkThatKeepsDropping() async throws {
        let directory = try TemporaryDirectory("ferry-tus-thin")
        let server = try await TusServer.start(filesDirectory: directory.url("files"))
        let proxy = try await CutProxy(target: server.port, cutEvery: 256 << 10, logPath: directory.url("proxy.log"))
        do {
            try await withDaemonHarness(spools: [TestSpool(options: ["protocol = \"tus\""])], url: proxy.url + "/files/") { harness in
                try await harness.start()
                let files = [("page.pdf", pseudoRandomBytes(1 << 20, seed: 75)), ("film.mov", pseudoRandomBytes(5 << 20, seed: 76))]
                for (name, bytes) in files { try harness.drop(name, bytes) }
                let stats = try await waitForCompleted(files.count, on: server, timeout: .seconds(120))
                try await harness.waitForQuiet()
                #expect(Set(stats.completed.map(\.sha256)) == Set(files.map { sha256Hex($0.1) }))
                #expect(try proxy.stats().cuts >= 20, "the link dropped again and again")
                for job in try await jobs(harness) { #expect(job.state == .done) }
            }
        } catch {
            await proxy.stop()
            try? await server.stop()
            throw error
        }
        await proxy.stop()
        try await server.stop()
    }

    @Test("chunk_size splits the upload into PATCH requests of at most that size")
    func chunks() async throws {
        try await withTus(options: ["chunk_size = \"1MiB\""]) { harness, server in
            try await harness.start()
            let bytes = pseudoRandomBytes((3 << 20) + 5, seed: 66)
            try harness.drop("scan.pdf", bytes)
            let stats = try await waitForCompleted(1, on: server)
            try await harness.waitForQuiet()
            #expect(stats.completed.first?.sha256 == sha256Hex(bytes))
            // An empty creation (the file is longer than one request), then four PATCHes (1 MiB,
            // 1 MiB, 1 MiB, 5 bytes).
            #expect(stats.postBytes == 0)
            #expect(stats.counts["PATCH"] == 4)
            #expect(stats.requests.allSatisfy { $0.bodyBytes <= 1 << 20 })
        }
    }

    @Test("cancel of a job whose upload is on the server deletes it there (termination)")
    func cancelTerminates() async throws {
        let size = 16 << 20
        // The stall holds the upload at half; a hold stops it there (the server keeps the half).
        try await withTus(stallAt: size / 2) { harness, server in
            try await harness.start()
            try harness.drop("big.bin", pseudoRandomBytes(size, seed: 67))
            try await waitUntil("the server to stall the upload") { try await server.stats().stalls == 1 }
            let held = try await harness.ctl("hold", try #require(try await jobs(harness).first).id.rawValue)
            #expect(held.status == 0, "\(held)")
            try await waitUntil("the job to be held") { try await jobs(harness).first?.state == .held }
            try server.release()
            try await waitUntil("the server to record the partial upload") { try await server.stats().uploads.first?.offset == size / 2 }
            try await waitUntil("the job to be held with its upload on record") {
                let job = try await jobs(harness).first
                return job?.state == .held && job?.upload != nil
            }
            let job = try #require(try await jobs(harness).first)
            let shown = try await harness.ctl("show", job.id.rawValue)
            #expect(shown.stdout.contains("confirmed"), "\(shown)")
            let result = try await harness.ctl("cancel", job.id.rawValue)
            #expect(result.status == 0, "\(result)")
            try await waitUntil("the DELETE to reach the server") { try await server.stats().counts["DELETE"] == 1 }
            try await waitUntil("the server to forget the upload") { try await server.stats().uploads.isEmpty }
            let cancelled = try #require(try await jobs(harness).first)
            #expect(cancelled.state == .cancelled)
            #expect(fileExists(harness.spoolPath() + "/.failed/big.bin"), "a cancelled file is moved aside, never deleted")
        }
    }

    @Test("A file rewritten in place while the server holds its PATCH is not recorded delivered, though the server completes that upload; the new version is")
    func rewrittenDuringPatch() async throws {
        let size = 16 << 20
        try await withTus(pauseAt: size / 2) { harness, server in
            try await harness.start()
            let path = try harness.drop("scan.bin", pseudoRandomBytes(size, seed: 68))
            try await waitUntil("the server to hold the PATCH") { try await server.stats().pauses == 1 }
            let newer = pseudoRandomBytes(size, seed: 69)
            try rewriteInPlace(path, with: newer)
            try server.release()
            try await waitUntil("the new version to be delivered", timeout: .seconds(60)) {
                try await jobs(harness).contains { $0.state == .done }
            }
            let all = try await jobs(harness)
            #expect(Set(all.map(\.state)) == [.superseded, .done], "\(all.map(\.state))")
            // The new version arrived whole, as an upload of its own; the held one is ended on the
            // server (terminated), whatever bytes it got.
            try await waitUntil("the held upload to be terminated") { try await server.stats().counts["DELETE"] == 1 }
            let stats = try await server.stats()
            #expect(stats.completed.map(\.sha256) == [sha256Hex(newer)], "\(stats.completed)")
            #expect(stats.requests.contains { $0.method == "PATCH" && $0.status == 204 && $0.bodyBytes == size }, "the held PATCH was answered 204")
            #expect(harness.daemon?.log.contains("the server may hold a mix of its two versions") == true)
        }
    }

    @Test("For comparison: multipart cut at 60% of 64 MiB sends the whole file again (160%)")
    func multipartStartsOver() async throws {
        let size = 64 << 20
        let cut = Int64(size * 6 / 10)
        let first = Counter()
        try await withDaemonHarness(plan: { _ in first.next() == 0 ? .reset(afterBytes: cut) : .store() }) { harness in
            try await harness.start()
            let bytes = pseudoRandomBytes(size, seed: 64)
            try harness.drop("video.bin", bytes)
            try await harness.waitForAccepted(1)
            try await harness.waitForQuiet()
            let received = harness.receiver.requests.reduce(Int64(0)) { $0 + $1.bodyBytes }
            print("multipart, cut at 60% of 64 MiB: the server read \(received) body bytes for \(size) (\(received - Int64(size)) more)")
            #expect(harness.receiver.acceptedRequests.first?.files.first?.sha256 == sha256Hex(bytes))
            #expect(received >= Int64(size) + cut, "a multipart POST cannot resume: the cut 60% is sent again")
        }
    }

    @Test("With a scripted tus server: sha1 checksums, 460 and 409 handled, a relative Location resolved")
    func scriptedServer() async throws {
        let size = 300_000
        let patches = Counter(), heads = Counter()
        let bytes = pseudoRandomBytes(size, seed: 68)
        let tus = HeaderField(name: "Tus-Resumable", value: "1.0.0")
        try await withDaemonHarness(spools: [TestSpool(options: ["protocol = \"tus\""])], plan: { info in
            switch info.method {
            case "OPTIONS":
                return .respond(status: 204, headers: [
                    tus, HeaderField(name: "Tus-Version", value: "1.0.0"),
                    HeaderField(name: "Tus-Extension", value: "creation,checksum,termination,expiration"),
                    HeaderField(name: "Tus-Checksum-Algorithm", value: "md5,sha1"),
                ])
            case "POST":
                return .respond(status: 201, headers: [tus, HeaderField(name: "Location", value: "/files/abc")])
            case "HEAD":
                // After the 409, the server turns out to hold the first 100,000 bytes.
                return .respond(status: 200, headers: [
                    tus, HeaderField(name: "Upload-Offset", value: heads.next() == 0 ? "0" : "100000"),
                    HeaderField(name: "Upload-Length", value: String(size)),
                ])
            default:
                switch patches.next() {
                case 0: return .respond(status: 460, headers: [tus])
                case 1: return .respond(status: 409, headers: [tus])
                default: return .respond(status: 204, headers: [tus, HeaderField(name: "Upload-Offset", value: String(size))])
                }
            }
        }) { harness in
            try await harness.start()
            try harness.drop("scan.tiff", bytes)
            try await waitUntil("the job to be done") { try await jobs(harness).first?.state == .done }
            let requests = harness.receiver.requests
            #expect(requests.map(\.method) == ["OPTIONS", "POST", "PATCH", "HEAD", "PATCH", "HEAD", "PATCH"])
            let post = try #require(requests.first { $0.method == "POST" })
            #expect(post.header("Upload-Length") == String(size))
            #expect(post.header("Tus-Resumable") == "1.0.0")
            #expect(post.header("Upload-Metadata") == "filename \(Data("scan.tiff".utf8).base64EncodedString()),filetype \(Data("image/tiff".utf8).base64EncodedString())")
            let patches = requests.filter { $0.method == "PATCH" }
            for (index, patch) in patches.enumerated() {
                let offset = index < 2 ? 0 : 100_000
                #expect(patch.uri == "/files/abc", "the relative Location is resolved against the endpoint")
                #expect(patch.header("Upload-Offset") == String(offset))
                #expect(patch.header("Content-Type") == "application/offset+octet-stream")
                #expect(patch.header("Upload-Checksum") == "sha1 " + sha1Base64(Array(bytes[offset...])))
                #expect(patch.bodyBytes == Int64(size - offset))
            }
            let job = try #require(try await jobs(harness).first)
            #expect(job.attempts == 1, "460 and 409 (at another offset) are handled within the attempt")
            #expect(job.upload?.offset == Int64(size))
        }
    }

    @Test("An upload past its Upload-Expires (asked about all the same), or that the server lost, starts over with a new one")
    func expiredAndLost() async throws {
        let size = 200_000
        let posts = Counter()
        let tus = HeaderField(name: "Tus-Resumable", value: "1.0.0")
        let bytes = pseudoRandomBytes(size, seed: 69)
        try await withDaemonHarness(spools: [TestSpool(options: ["protocol = \"tus\""])], plan: { info in
            switch info.method {
            case "OPTIONS":
                return .respond(status: 204, headers: [tus, HeaderField(name: "Tus-Extension", value: "creation,expiration")])
            case "POST":
                let n = posts.next()
                // The first upload expires at once; the second is lost (404 on HEAD); the third works.
                return .respond(status: 201, headers: [
                    tus, HeaderField(name: "Location", value: "/unused/\(n)"),
                ] + (n == 0 ? [HeaderField(name: "Upload-Expires", value: "Wed, 25 Jun 2014 16:00:00 GMT")] : []))
            case "HEAD":
                return .respond(status: 404, headers: [tus])
            default:
                if info.uri.hasSuffix("/0") { return .reset(afterBytes: 1000) }
                if info.uri.hasSuffix("/1") { return .reset(afterBytes: 1000) }
                return .respond(status: 204, headers: [tus, HeaderField(name: "Upload-Offset", value: String(size))])
            }
        }) { harness in
            try await harness.start()
            try harness.drop("a.bin", bytes)
            try await waitUntil("the job to be done", timeout: .seconds(30)) { try await jobs(harness).first?.state == .done }
            let requests = harness.receiver.requests.map { "\($0.method) \($0.uri)" }
            #expect(requests == [
                "OPTIONS /upload/test", "POST /upload/test", "PATCH /unused/0",      // cut; the upload then expired
                "HEAD /unused/0", "POST /upload/test", "PATCH /unused/1",            // asked all the same: gone; cut
                                                                                     // HEAD says this one is gone too
                "HEAD /unused/1", "POST /upload/test", "PATCH /unused/2",
            ], "\(requests)")
        }
    }

    @Test("A server that answers 409 at the offset it confirms, or 423, is busy with the upload: retried later, not failed")
    func busyServer() async throws {
        let patches = Counter()
        let tus = HeaderField(name: "Tus-Resumable", value: "1.0.0")
        let size = 50_000
        try await withDaemonHarness(spools: [TestSpool(options: ["protocol = \"tus\""])], plan: { info in
            switch info.method {
            case "OPTIONS": return .respond(status: 204, headers: [tus, HeaderField(name: "Tus-Extension", value: "creation")])
            case "POST": return .respond(status: 201, headers: [tus, HeaderField(name: "Location", value: "/files/busy")])
            case "HEAD":
                return .respond(status: 200, headers: [tus, HeaderField(name: "Upload-Offset", value: "0"), HeaderField(name: "Upload-Length", value: String(size))])
            default:
                switch patches.next() {
                case 0: return .respond(status: 409, headers: [tus])
                case 1: return .respond(status: 423, headers: [tus])
                default: return .respond(status: 204, headers: [tus, HeaderField(name: "Upload-Offset", value: String(size))])
                }
            }
        }) { harness in
            try await harness.start()
            try harness.drop("x.bin", pseudoRandomBytes(size, seed: 71))
            try await waitUntil("the job to be done") { try await jobs(harness).first?.state == .done }
            let job = try #require(try await jobs(harness).first)
            #expect(job.attempts == 3, "two busy answers, each retried after a backoff")
            let outcomes = try await attempts(harness, job).map(\.outcome)
            #expect(outcomes == [.retry, .retry, .success])
            #expect(harness.receiver.requests.filter { $0.method == "POST" }.count == 1, "the upload was kept, not created again")
        }
    }
}

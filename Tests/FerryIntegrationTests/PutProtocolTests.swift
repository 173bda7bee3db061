import FerryQueue
import FerryReceiver
import FerryTestSupport
import Foundation
import Testing

/// `protocol = "put"`: the file's own bytes as the request body, to a URL that may name the file.
@Suite("Raw PUT uploads through the real ferryd", .serialized)
struct PutProtocolTests {
    /// The README's Nextcloud example: `{relative_path}` and `recursive = true` to a WebDAV server,
    /// which answers a PUT into a folder it does not have 409 Conflict.
    @Test("put into subfolders of a WebDAV server (WsgiDAV): the folders are made with MKCOL, from the top, and every file lands byte-identical")
    func davSubfolders() async throws {
        let directory = try TemporaryDirectory("ferry-dav")
        let server = try await DAVServer(root: directory.url("dav"), logPath: directory.url("dav.log"))
        try FileManager.default.createDirectory(atPath: server.root + "/reports", withIntermediateDirectories: true)
        let spool = TestSpool(options: ["protocol = \"put\"", "recursive = true"])
        do {
            try await withDaemonHarness(spools: [spool], url: server.url + "/reports/{relative_path}") { harness in
                let files: [String: [UInt8]] = [
                    "top.txt": pseudoRandomBytes(100, seed: 60),
                    "2026/11/day one.csv": pseudoRandomBytes(70_000, seed: 61),
                    "2026/11/day two.csv": pseudoRandomBytes(1000, seed: 62),
                    "2026/12/ü+x/deep.bin": pseudoRandomBytes(3 << 20, seed: 63),
                ]
                for name in files.keys where name.contains("/") {
                    try FileManager.default.createDirectory(
                        atPath: harness.spoolPath() + "/" + (name as NSString).deletingLastPathComponent, withIntermediateDirectories: true)
                }
                try await harness.start()
                for (name, bytes) in files { _ = try harness.drop(name, bytes) }
                let done = try await waitForState(harness, .done, count: files.count)
                #expect(done.allSatisfy { $0.attempts == 1 }, "the folders are made within the attempt")
                for (name, bytes) in files {
                    let stored = FileManager.default.contents(atPath: server.root + "/reports/" + name).map { [UInt8]($0) }
                    #expect(stored.map(sha256Hex) == sha256Hex(bytes), "\(name) on the server")
                }
                #expect(server.log.contains("\"MKCOL /reports/2026/\""), "the top folder first")
                #expect(harness.daemon?.log.contains("made the file's folders on the server (MKCOL)") == true)
            }
        } catch {
            await server.stop()
            throw error
        }
        await server.stop()
    }

    /// Nextcloud in maintenance mode answers 503: that, not the PUT's 409, decides the attempt.
    @Test("put into a WebDAV subfolder while MKCOL is answered 503 with Retry-After: retried, not failed; the file lands")
    func davBusyMKCOL() async throws {
        let directory = try TemporaryDirectory("ferry-dav")
        let server = try await DAVServer(root: directory.url("dav"), logPath: directory.url("dav.log"), mkcolBusy: 2)
        let spool = TestSpool(options: ["protocol = \"put\"", "recursive = true"])
        do {
            try await withDaemonHarness(spools: [spool], url: server.url + "/{relative_path}") { harness in
                try FileManager.default.createDirectory(atPath: harness.spoolPath() + "/inbox", withIntermediateDirectories: true)
                try await harness.start()
                let bytes = pseudoRandomBytes(5000, seed: 64)
                _ = try harness.drop("inbox/scan.pdf", bytes)
                let done = try await waitForState(harness, .done)
                #expect(done.first?.attempts == 3, "two attempts met the busy server; the third made the folder")
                let stored = FileManager.default.contents(atPath: server.root + "/inbox/scan.pdf").map { [UInt8]($0) }
                #expect(stored.map(sha256Hex) == sha256Hex(bytes))
                #expect(server.log.components(separatedBy: "answered 503 (busy)").count == 3)
            }
        } catch {
            await server.stop()
            throw error
        }
        await server.stop()
    }

    @Test("put sends each file byte-identical as the whole body, to a URL naming it, with its type")
    func putByteIdentical() async throws {
        let spool = TestSpool(options: ["protocol = \"put\""], headers: ["X-Token = \"t0ken\""], urlPath: "/dav/{relative_path}")
        try await withDaemonHarness(spools: [spool]) { harness in
            try await harness.start()
            let files: [(String, Int)] = [("report.json", 70_000), ("photo 1.jpg", 3 << 20), ("empty.txt", 0), ("été#2.bin", 1234)]
            var contents: [String: [UInt8]] = [:]
            for (index, (name, size)) in files.enumerated() {
                contents[name] = pseudoRandomBytes(size, seed: UInt64(index + 40))
                try harness.drop(name, contents[name]!)
            }
            try await harness.waitForAccepted(files.count)
            try await harness.waitForQuiet()

            var seen: Set<String> = []
            for request in harness.receiver.acceptedRequests {
                #expect(request.method == "PUT")
                let file = try #require(request.files.first, "a raw body is stored as one file")
                let name = try #require(request.uri.split(separator: "/").last.map(String.init)?.removingPercentEncoding)
                let bytes = try #require(contents[name], "unexpected URI \(request.uri)")
                #expect(file.sha256 == sha256Hex(bytes), "\(name) arrived changed")
                #expect(file.size == Int64(bytes.count))
                #expect(request.header("Content-Length") == String(bytes.count))
                #expect(request.header("X-Token") == "t0ken")
                #expect(request.header("Idempotency-Key") != nil)
                let expectedType = switch name {
                case "report.json": "application/json"
                case "photo 1.jpg": "image/jpeg"
                case "empty.txt": "text/plain"
                default: "application/octet-stream"
                }
                #expect(request.header("Content-Type")?.hasPrefix(expectedType) == true, "\(name): \(request.header("Content-Type") ?? "-")")
                seen.insert(name)
            }
            #expect(seen == Set(contents.keys))
            // The name is percent-encoded in the path: a space, '#' and UTF-8 never reach the server raw.
            #expect(harness.receiver.acceptedRequests.contains { $0.uri == "/dav/photo%201.jpg" })
            #expect(harness.receiver.acceptedRequests.contains { $0.uri == "/dav/%C3%A9t%C3%A9%232.bin" })
            // show gives the URL the file went to, as sent.
            let photo = try #require(try await jobs(harness).first { $0.displayPath == "photo 1.jpg" })
            let shown = try await harness.ctl("show", photo.id.rawValue, "--json").json()
            #expect((shown["url"] as? String)?.hasSuffix("/dav/photo%201.jpg") == true, "\(shown["url"] ?? "-")")
            // No snapshot of the file was made: the body directory stayed empty.
            let bodies = (try? FileManager.default.contentsOfDirectory(atPath: harness.directory.url("state/bodies"))) ?? []
            #expect(bodies.isEmpty)
            for name in contents.keys { #expect(!fileExists(harness.spoolPath() + "/" + name)) }
        }
    }

    @Test("put with method POST, retried after a 503, arrives once and whole")
    func putPostRetried() async throws {
        let spool = TestSpool(options: ["protocol = \"put\"", "method = \"POST\"", "file_content_type = \"application/x-ndjson\""])
        let failures = Counter()
        try await withDaemonHarness(spools: [spool], plan: { info in
            failures.next() < 2 ? .respond(status: 503) : .store()
        }) { harness in
            try await harness.start()
            let bytes = pseudoRandomBytes(500_000, seed: 7)
            try harness.drop("events.ndjson", bytes)
            try await harness.waitForAccepted(1)
            try await harness.waitForQuiet()
            let accepted = harness.receiver.acceptedRequests
            #expect(accepted.count == 1)
            #expect(accepted.first?.method == "POST")
            #expect(accepted.first?.header("Content-Type") == "application/x-ndjson")
            #expect(accepted.first?.files.first?.sha256 == sha256Hex(bytes))
            let job = try #require(try await jobs(harness).first)
            #expect(job.state == .done)
            #expect(job.attempts == 3)
        }
    }
}

/// Counts calls from any thread.
final class Counter: Sendable {
    private let value = Mutex(0)
    /// Returns the count before this call.
    func next() -> Int { value.withLock { count in
        count += 1
        return count - 1
    } }
}

import Synchronization

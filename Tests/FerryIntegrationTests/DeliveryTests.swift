import FerryQueue
import FerryReceiver
import FerryTestSupport
import Foundation
import Testing

#if canImport(Glibc)
import Glibc
#endif

/// The jobs in the queue, newest first.
func jobs(_ harness: DaemonHarness) async throws -> [Job] {
    let store = try harness.queue()
    defer { try? store.close() }
    return try await store.jobs(limit: 10_000)
}

/// Waits until `count` jobs are in `state`; returns all jobs as they were then.
func waitForState(_ harness: DaemonHarness, _ state: JobState, count: Int = 1, timeout: Duration = .seconds(120)) async throws -> [Job] {
    var last: [Job] = []
    try await waitUntil("\(count) job(s) \(state.rawValue) (states now: \(last.map(\.state.rawValue)))", timeout: timeout) {
        last = try await jobs(harness)
        return last.filter { $0.state == state }.count >= count
    }
    return last
}

func attempts(_ harness: DaemonHarness, _ job: Job) async throws -> [Attempt] {
    let store = try harness.queue()
    defer { try? store.close() }
    return try await store.attempts(of: job)
}

@Suite("Delivery through the real ferryd", .serialized)
struct DeliveryTests {
    @Test("Dropped files arrive byte-identical with their fields and headers, then leave the spool")
    func delivery() async throws {
        let secrets = try TemporaryDirectory("ferry-secrets")
        try "file-secret\n".write(toFile: secrets.url("key"), atomically: true, encoding: .utf8)
        try "credential-secret\n".write(toFile: secrets.url("token"), atomically: true, encoding: .utf8)
        let spool = TestSpool(
            fields: [
                "description = \"Uploaded {filename}\"", "size = \"{size}\"", "job = \"{id}\"",
                "digest = \"{sha256}\"", "path = \"{relative_path}\"",
            ],
            headers: [
                "Authorization = \"Bearer ${credential:token}\"", "X-Env = \"${env:FERRY_TEST_SECRET}\"",
                "X-File = \"${file:\(secrets.url("key"))}\"",
            ])
        try await withDaemonHarness(spools: [spool]) { harness in
            try await harness.start(environment: ["CREDENTIALS_DIRECTORY": secrets.path, "FERRY_TEST_SECRET": "env-secret"])
            let files = [("photo.jpg", 3 << 20), ("notes.txt", 1000), ("data.bin", 200_000)]
            var contents: [String: [UInt8]] = [:]
            for (index, (name, size)) in files.enumerated() {
                contents[name] = pseudoRandomBytes(size, seed: UInt64(index + 1))
                try harness.drop(name, contents[name]!)
            }
            try await harness.waitForAccepted(3)
            try await harness.waitForQuiet()

            let queued = try await jobs(harness)
            #expect(queued.count == 3)
            for request in harness.receiver.acceptedRequests {
                let file = try #require(request.files.first)
                let bytes = try #require(contents[file.filename])
                #expect(file.sha256 == sha256Hex(bytes))
                #expect(file.size == Int64(bytes.count))
                #expect(file.fieldName == "file")
                #expect(request.field("description") == "Uploaded \(file.filename)")
                #expect(request.field("size") == String(bytes.count))
                #expect(request.field("digest") == sha256Hex(bytes))
                #expect(request.field("path") == file.filename)
                #expect(request.header("Authorization") == "Bearer credential-secret")
                #expect(request.header("X-Env") == "env-secret")
                #expect(request.header("X-File") == "file-secret")
                #expect(request.header("User-Agent")?.hasPrefix("ferry/") == true)
                let job = try #require(queued.first { $0.displayPath == file.filename })
                #expect(request.idempotencyKey == job.id.rawValue)
                #expect(request.field("job") == job.id.rawValue)
                #expect(request.header("Content-Type") == "multipart/form-data; boundary=\(job.boundary)")
                #expect(job.state == .done)
                #expect(job.responseStatus == 201)
                #expect(String(decoding: job.responseBody ?? [], as: UTF8.self).contains(sha256Hex(bytes)))
                #expect(job.disposedAt != nil)
                #expect(!fileExists(harness.spoolPath() + "/" + file.filename))
            }
            let log = harness.daemon?.log ?? ""
            for secret in ["credential-secret", "env-secret", "file-secret"] {
                #expect(!log.contains(secret), "the log must never contain a secret")
            }
        }
    }

    @Test("503 with Retry-After is retried after the delay, with the same Idempotency-Key")
    func retryAfter() async throws {
        let plan: @Sendable (RequestInfo) -> ReceiverAction = { info in
            info.index == 0 ? .respond(status: 503, headers: [HeaderField(name: "Retry-After", value: "1")], body: "busy") : .store()
        }
        try await withDaemonHarness(plan: plan) { harness in
            try await harness.start()
            let bytes = pseudoRandomBytes(100_000, seed: 7)
            try harness.drop("retry.bin", bytes)
            try await harness.waitForAccepted(1)
            try await harness.waitForQuiet()
            let requests = harness.receiver.requests
            #expect(requests.count == 2)
            #expect(requests[0].status == 503)
            #expect(requests[0].idempotencyKey == requests[1].idempotencyKey)
            let gap = requests[1].receivedAt.timeIntervalSince(requests[0].finishedAt ?? requests[0].receivedAt)
            #expect(gap >= 0.9, "Retry-After: 1 must be honoured (gap \(gap)s)")
            #expect(requests[1].files.first?.sha256 == sha256Hex(bytes))
            let job = try #require(try await jobs(harness).first)
            #expect(job.state == .done)
            #expect(job.attempts == 2)
            let history = try await attempts(harness, job)
            #expect(history.map(\.outcome) == [.retry, .success])
            #expect(history.map(\.httpStatus) == [503, 201])
            #expect(history[0].bytesSent > 0)
        }
    }

    @Test("400 moves the file to failed_directory with an .error.json sidecar; nothing is deleted")
    func rejected() async throws {
        let plan: @Sendable (RequestInfo) -> ReceiverAction = { _ in
            .respond(status: 400, headers: [HeaderField(name: "Content-Type", value: "application/json")], body: "{\"error\":\"unsupported media\"}")
        }
        try await withDaemonHarness(plan: plan) { harness in
            try await harness.start()
            let bytes = pseudoRandomBytes(5000, seed: 3)
            try harness.drop("bad file.png", bytes)
            try await harness.waitForQuiet()
            let failed = harness.spoolPath() + "/.failed/bad file.png"
            #expect(FileManager.default.contents(atPath: failed).map { [UInt8]($0) } == bytes)
            #expect(!fileExists(harness.spoolPath() + "/bad file.png"))
            let sidecar = try #require(FileManager.default.contents(atPath: failed + ".error.json"))
            let report = try #require(try JSONSerialization.jsonObject(with: sidecar) as? [String: Any])
            #expect(report["status"] as? Int == 400)
            #expect((report["reason"] as? String)?.contains("400") == true)
            #expect(report["response_excerpt"] as? String == "{\"error\":\"unsupported media\"}")
            #expect(report["response_content_type"] as? String == "application/json")
            #expect((report["attempts"] as? [Any])?.count == 1)
            #expect(report["file"] as? String == "bad file.png")
            #expect((report["url"] as? String)?.hasPrefix("http://127.0.0.1:") == true)
            let job = try #require(try await jobs(harness).first)
            #expect(job.state == .failed)
            #expect(harness.receiver.requests.count == 1)
        }
    }

    @Test("Out of attempts: the file is moved aside with the reason")
    func maxAttempts() async throws {
        let plan: @Sendable (RequestInfo) -> ReceiverAction = { _ in .respond(status: 500, body: "boom") }
        let spool = TestSpool(retry: ["initial_delay = \"10ms\"", "max_delay = \"50ms\"", "max_attempts = 3"])
        try await withDaemonHarness(spools: [spool], plan: plan) { harness in
            try await harness.start()
            try harness.drop("doomed.txt", Array("x".utf8))
            try await harness.waitForQuiet()
            #expect(harness.receiver.requests.count == 3)
            let sidecar = try #require(FileManager.default.contents(atPath: harness.spoolPath() + "/.failed/doomed.txt.error.json"))
            let report = try #require(try JSONSerialization.jsonObject(with: sidecar) as? [String: Any])
            #expect((report["reason"] as? String)?.hasPrefix("gave up after 3 attempts: server answered 500") == true)
            #expect((report["attempts"] as? [Any])?.count == 3)
        }
    }

    @Test("kill -9 during an upload loses nothing: after restart the file is delivered")
    func killDuringUpload() async throws {
        let plan: @Sendable (RequestInfo) -> ReceiverAction = { info in info.index == 0 ? .stall(afterBytes: 1 << 20) : .store() }
        try await withDaemonHarness(plan: plan) { harness in
            try await harness.start()
            let bytes = pseudoRandomBytes(16 << 20, seed: 11)
            let source = try harness.drop("video.mp4", bytes)
            try await waitUntil("the first upload to be under way") {
                (harness.receiver.requests.first?.bodyBytes ?? 0) >= 1 << 20
            }
            try await harness.kill9()
            #expect(FileManager.default.contents(atPath: source).map { [UInt8]($0) } == bytes, "the source must survive the crash")
            let stuck = try #require(try await jobs(harness).first)
            #expect(stuck.state == .uploading)

            try await harness.start()
            try await harness.waitForAccepted(1)
            try await harness.waitForQuiet()
            let delivered = try #require(harness.receiver.acceptedRequests.first)
            #expect(delivered.files.first?.sha256 == sha256Hex(bytes))
            #expect(delivered.idempotencyKey == harness.receiver.requests[0].idempotencyKey)
            #expect(!fileExists(source))
            let job = try #require(try await jobs(harness).first)
            #expect(job.state == .done)
            #expect(job.attempts == 1, "the attempt cut short by the crash is not counted")
            #expect(try await jobs(harness).count == 1)
            #expect(harness.daemon?.log.contains("requeued_uploads=1") == true)
        }
    }

    @Test("Names with quotes, semicolons, spaces, backslashes and non-ASCII are sent as browsers send them, readable by quoted-pair readers too")
    func hostileNames() async throws {
        try await withDaemonHarness { harness in
            try await harness.start()
            let names = [
                "quote\"d.txt", "semi;colon; name=x.txt", "with  spaces.txt", "ünïcödé 日本 😀.txt", "back\\slash.txt", "50%22off.txt",
                "ends in backslash\\", "back\\;slash",
            ]
            // Browsers' escaping, and a backslash doubled where quoted-pair readers (Go, Werkzeug)
            // would take it for an escape.
            let doubled = ["ends in backslash\\": "ends in backslash\\\\", "back\\;slash": "back\\\\;slash"]
            for (index, name) in names.enumerated() {
                try harness.drop(name, Array("content \(index)".utf8))
            }
            try await harness.waitForAccepted(names.count)
            let received = harness.receiver.acceptedRequests.compactMap(\.files.first)
            for (index, name) in names.enumerated() {
                let escaped = doubled[name] ?? name.replacingOccurrences(of: "\"", with: "%22")
                let file = try #require(received.first { $0.filenameParameter == escaped }, "no upload with filename=\"\(escaped)\"")
                #expect(file.sha256 == sha256Hex(Array("content \(index)".utf8)))
                if !name.contains("%22") { #expect(file.filename == name) }
            }
        }
    }

    @Test("A zero-byte file is uploaded as an empty part")
    func zeroBytes() async throws {
        try await withDaemonHarness { harness in
            try await harness.start()
            try harness.drop("empty.dat", [])
            try await harness.waitForAccepted(1)
            let file = try #require(harness.receiver.acceptedRequests.first?.files.first)
            #expect(file.size == 0)
            #expect(file.sha256 == sha256Hex([]))
            try await harness.waitForQuiet()
            #expect(!fileExists(harness.spoolPath() + "/empty.dat"))
        }
    }
}

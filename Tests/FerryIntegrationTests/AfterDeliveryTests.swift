import FerryQueue
import FerryTestSupport
import Foundation
import Testing

#if canImport(Glibc)
import Glibc
#endif

/// The server's answer kept with the job and handed to the producer: `show`, `list`, `watch`,
/// `result_directory`; `[spool.retry] statuses`. Against a real ingest API that answers JSON.
@Suite("After delivery: the server's answer, result files, retry statuses", .serialized)
struct AfterDeliveryTests {
    @Test("the answer's status, Location, ETag, result_headers and JSON body are kept, shown and written beside the file")
    func answerKeptAndHandedOver() async throws {
        let serverDirectory = try TemporaryDirectory()
        let server = try await AnswerServer(directory: serverDirectory.url("server"))
        defer { Task { await server.stop() } }
        let results = try serverDirectory.makeDirectory("results")
        let spool = TestSpool(options: [
            "result_directory = \"\(results)\"", "result_headers = [\"X-Request-Id\"]", "after_upload = \"move\"",
        ])
        try await withDaemonHarness(spools: [spool], url: server.url + "/api/v2/media") { harness in
            try await harness.start()
            try harness.drop("scan-0001.pdf", pseudoRandomBytes(30_000, seed: 1))
            try await harness.waitForQuiet()
            let job = try #require(try await jobs(harness).first)
            #expect(job.state == .done)
            #expect(job.responseStatus == 201)
            #expect(job.responseHeaders.value("location")?.hasSuffix("/media/1") == true)
            #expect(job.responseHeaders.value("x-request-id") == "req-1")
            #expect(job.responseHeaders.value("set-cookie") == nil, "only the headers a producer needs are kept")

            // show --json: status, headers, the body as text.
            let shown = try await harness.ctl("show", job.id.rawValue, "--json").json()
            let response = try #require(shown["response"] as? [String: Any])
            #expect(response["status"] as? Int == 201)
            let headers = try #require(response["headers"] as? [String: String])
            #expect(headers["location"]?.hasSuffix("/media/1") == true && headers["etag"] != nil && headers["x-request-id"] == "req-1")
            #expect(headers["set-cookie"] == nil)
            let body = try parseJSONObject(try #require(response["body"] as? String))
            #expect(body["id"] as? Int == 1)
            // show (text) prints the headers; list --json carries status and headers.
            let text = try await harness.ctl("show", job.id.rawValue)
            #expect(text.stdout.contains("x-request-id:  req-1") && text.stdout.contains("location:"), "\(text)")
            let listed = try #require((try await harness.ctl("list", "--json").json()["jobs"] as? [[String: Any]])?.first)
            #expect(((listed["response"] as? [String: Any])?["headers"] as? [String: String])?["x-request-id"] == "req-1")

            // watch --json: the delivered (done) event carries the status and Location.
            let watch = try ChildProcess(executable: try BuiltProducts.path("ferryctl"),
                                         arguments: ["--socket", harness.controlSocket, "watch", "--json", "--since", "0"],
                                         logPath: harness.directory.url("watch.log"))
            let done = try parseJSONObject(try await watch.readStdoutLine { $0.contains("\"event\":\"done\"") })
            watch.send(SIGINT)
            _ = try await watch.waitForExit()
            #expect(done["status"] as? Int == 201)
            #expect((done["location"] as? String)?.hasSuffix("/media/1") == true)

            // The result file: next to nothing else, atomically written, the schema's fields.
            let resultPath = results + "/scan-0001.pdf.result.json"
            let result = try parseJSONObject(try String(contentsOfFile: resultPath, encoding: .utf8))
            #expect(result["version"] as? Int == 1)
            #expect(result["job"] as? String == job.id.rawValue)
            #expect(result["status"] as? Int == 201)
            #expect(result["file"] as? String == "scan-0001.pdf")
            #expect(result["disposition"] as? String == "moved")
            #expect((result["path"] as? String)?.hasSuffix("/.sent/scan-0001.pdf") == true)
            #expect((result["headers"] as? [String: String])?["x-request-id"] == "req-1")
            #expect(try parseJSONObject(try #require(result["body"] as? String))["id"] as? Int == 1)
            #expect(result["url"] as? String == server.url + "/api/v2/media")
            var status = stat()
            #expect(stat(resultPath, &status) == 0 && status.st_mode & 0o777 == 0o640, "a result file is for the producer's group, not others")

            // The same name delivered again never replaces the first result: the job id goes in the name.
            try harness.drop("scan-0001.pdf", pseudoRandomBytes(100, seed: 2))
            try await waitUntil("the second delivery") { try await jobs(harness).filter { $0.state == .done }.count == 2 }
            let second = try #require(try await jobs(harness).first { $0.id != job.id })
            let secondPath = results + "/scan-0001.pdf.\(second.id.rawValue).result.json"
            try await waitUntil("the second result file") { fileExists(secondPath) }
            #expect(try parseJSONObject(try String(contentsOfFile: resultPath, encoding: .utf8))["job"] as? String == job.id.rawValue)
            #expect(try parseJSONObject(try String(contentsOfFile: secondPath, encoding: .utf8))["status"] as? Int == 201)
            let leftovers = try FileManager.default.contentsOfDirectory(atPath: results).filter { $0.hasPrefix(".ferry-partial") }
            #expect(leftovers.isEmpty)
        }
    }

    @Test("[spool.retry] statuses: a listed status is retried, one not listed fails the job with its answer")
    func retryStatuses() async throws {
        let serverDirectory = try TemporaryDirectory()
        // 409 (listed) → retried; 503 (not listed any more) → failed.
        let server = try await AnswerServer(directory: serverDirectory.url("server"), statuses: [409, 503])
        defer { Task { await server.stop() } }
        let spool = TestSpool(retry: ["initial_delay = \"100ms\"", "max_delay = \"200ms\"", "statuses = [409]"])
        try await withDaemonHarness(spools: [spool], url: server.url + "/ingest") { harness in
            try await harness.start()
            try harness.drop("report.csv", Array("a,b\n1,2\n".utf8))
            try await harness.waitForQuiet()
            let job = try #require(try await jobs(harness).first)
            #expect(job.state == .failed)
            #expect(job.attempts == 2)
            #expect(job.responseStatus == 503)
            #expect(job.lastError?.contains("503") == true, "\(job.lastError ?? "")")
            #expect(server.requests.map(\.status) == [409, 503])
            let sidecar = try parseJSONObject(try String(contentsOfFile: harness.spoolPath() + "/.failed/report.csv.error.json", encoding: .utf8))
            #expect(sidecar["status"] as? Int == 503)
            #expect(sidecar["outcome"] as? String == "failed")
        }
    }
}

import FerryReceiver
import FerryTestSupport
import FerryTransport
import Foundation
import Logging
import Testing

/// The receiver's planned faults, seen by the real `Uploader`, and its manifest.
@Suite("Receiver faults")
struct ReceiverFaultTests {
    let logger = Logger(label: "test")

    /// Starts a receiver with `plan` and a manifest, sends one body of `size` bytes, stops it.
    func exchange(
        size: Int = 2 << 20, noProgress: Duration = .seconds(5), keepFiles: Bool = true,
        plan: @escaping @Sendable (RequestInfo) -> ReceiverAction
    ) async throws -> (result: UploadResult, receiver: Receiver, manifest: [[String: Any]], elapsed: Duration, bytes: [UInt8], stored: [String]) {
        let directory = try TemporaryDirectory()
        let manifestPath = directory.url("manifest.jsonl")
        let receiver = try await Receiver.start(directory: directory.url("r"), plan: plan, keepFiles: keepFiles, manifest: manifestPath)
        let uploader = try Uploader(settings: TransportSettings(noProgressTimeout: noProgress))
        let (request, bytes) = try bodyRequest(directory, url: receiver.url(), size: size)
        let started = ContinuousClock.now
        let result = await uploader.send(request, logger: logger)
        let elapsed = ContinuousClock.now - started
        try await uploader.shutdown()
        try await receiver.stop()
        let text = (try? String(contentsOfFile: manifestPath, encoding: .utf8)) ?? ""
        // Every manifest line must be a JSON object: one that is not is a defect of the receiver, not noise.
        let lines = try text.split(separator: "\n").map { line -> [String: Any] in
            guard let object = try JSONSerialization.jsonObject(with: Data(line.utf8)) as? [String: Any] else {
                throw TestFailure("a manifest line that is not a JSON object: \(line)")
            }
            return object
        }
        let stored = try FileManager.default.contentsOfDirectory(atPath: receiver.directory)
        return (result, receiver, lines, elapsed, bytes, stored)
    }

    @Test("A stored file gets one manifest line with its hash, key and status, written before the answer")
    func manifest() async throws {
        let (result, receiver, manifest, _, bytes, stored) = try await exchange(keepFiles: false) { _ in .store() }
        guard case .response(201, _, _, _) = result else {
            Issue.record("expected 201, got \(result)")
            return
        }
        #expect(manifest.count == 1)
        let line = try #require(manifest.first)
        #expect(line["sha256"] as? String == sha256Hex(bytes))
        #expect(line["size"] as? Int == bytes.count)
        #expect(line["filename"] as? String == "f.bin")
        #expect(line["idempotency_key"] as? String == "01JTESTKEY0000000000000000")
        #expect(line["status"] as? Int == 201)
        #expect(line["time"] as? Double != nil)
        // keepFiles: false hashes without writing.
        #expect(receiver.acceptedRequests.first?.files.first?.storedPath == nil)
        #expect(stored.isEmpty)
    }

    @Test("An answer with more than 80 KiB of headers is reported as not valid HTTP, saying why")
    func oversizedHeaders() async throws {
        let filler = (0..<100).map { HeaderField(name: "X-Filler-\($0)", value: String(repeating: "a", count: 1000)) }
        let (result, _, _, _, _, _) = try await exchange(size: 1024) { _ in .respond(status: 200, headers: filler) }
        guard case .failed(let failure, _) = result else {
            Issue.record("expected a failure, got \(result)")
            return
        }
        #expect(failure.message.hasSuffix("is not valid HTTP: its headers are larger than the 80 KiB an HTTP client reads"), "\(failure)")
    }

    @Test("reset: the client sees a transport failure, nothing is stored")
    func reset() async throws {
        let (result, receiver, manifest, _, _, stored) = try await exchange { _ in .reset(afterBytes: 256 * 1024) }
        guard case .failed(let failure, _) = result else {
            Issue.record("expected a failure, got \(result)")
            return
        }
        #expect(failure.kind != .timeout, "a reset is seen at once, not by the watchdog: \(failure)")
        #expect(manifest.isEmpty)
        #expect(receiver.requests.first?.error == "reset by plan")
        #expect(stored.isEmpty, "the partial file is removed")
    }

    @Test("slowRead: the upload takes about size/rate, then the file is stored whole")
    func slowRead() async throws {
        let (result, _, manifest, elapsed, bytes, _) = try await exchange(size: 1 << 20) { _ in
            .slowRead(bytesPerSecond: 512 * 1024)
        }
        guard case .response(201, _, _, _) = result else {
            Issue.record("expected 201, got \(result)")
            return
        }
        #expect(elapsed >= .milliseconds(1200), "1 MiB at 512 KiB/s took only \(elapsed)")
        #expect(manifest.first?["sha256"] as? String == sha256Hex(bytes))
    }

    // The client's timeout is generous: on a loaded machine a 1 s one can fire before the body is out.
    @Test("stallAfterBody with store: the file is in the manifest (status null) but the client times out")
    func stallAfterBody() async throws {
        let (result, _, manifest, _, bytes, _) = try await exchange(size: 100_000, noProgress: .seconds(3)) { _ in
            .stallAfterBody(store: true)
        }
        guard case .failed(let failure, _) = result else {
            Issue.record("expected a timeout, got \(result)")
            return
        }
        #expect(failure.kind == .timeout)
        #expect(manifest.count == 1)
        #expect(manifest.first?["sha256"] as? String == sha256Hex(bytes))
        #expect(manifest.first?["status"] is NSNull)
    }

    @Test("closeAfterBody without store: no answer and nothing stored")
    func closeAfterBody() async throws {
        let (result, receiver, manifest, _, _, _) = try await exchange(size: 100_000) { _ in .closeAfterBody(store: false) }
        guard case .failed = result else {
            Issue.record("expected a failure, got \(result)")
            return
        }
        #expect(manifest.isEmpty)
        #expect(receiver.requests.first?.status == nil)
    }

    @Test("acceptPartial: a 2xx after part of the body; the truncated file is not stored")
    func acceptPartial() async throws {
        let (_, receiver, manifest, _, _, stored) = try await exchange(size: 4 << 20) { _ in .acceptPartial(afterBytes: 64 * 1024, status: 200) }
        #expect(manifest.isEmpty)
        let request = try #require(receiver.requests.first)
        #expect(request.status == 200)
        #expect(request.files.isEmpty)
        #expect(request.bodyBytes < 4 << 20)
        #expect(receiver.acceptedRequests.isEmpty, "a truncated body is not an accepted request")
        #expect(stored.isEmpty, "no file, not even a temporary one, is left")
    }

    @Test("Fault rules: syntax, schedules before probabilities, and the same seed gives the same faults")
    func faultPlan() throws {
        let rule = try FaultRule(parsing: "503:retry-after=1@0.05")
        #expect(rule.kind == .status(503, retryAfter: .seconds(1), early: false))
        #expect(rule.when == .probability(0.05))
        #expect(rule.label == "503+retry-after")
        #expect(try FaultRule(parsing: "503:retry-after=1=0.05") == rule, "the issue's KIND:OPT=V=P form")
        #expect(try FaultRule(parsing: "reset:at=64k@#0,3").kind == .reset(at: .bytes(65536)))
        #expect(try FaultRule(parsing: "reset:at=64k@#0,3").when == .requests([0, 3]))
        #expect(try FaultRule(parsing: "partial:at=50%,status=202@every=20").kind == .partial(at: .fraction(0.5), status: 202))
        #expect(try FaultRule(parsing: "slow:rate=1m@2%").kind == .slow(bytesPerSecond: 1 << 20))
        #expect(try FaultRule(parsing: "close:store@0.1").label == "close+store")
        for bad in ["bogus@0.1", "500", "500@2", "reset:at=x@0.1", "partial:status=500@0.1", "500:colour=red@0.1", "slow:rate=0@0.1"] {
            #expect(throws: FaultSpecificationError.self, "\(bad)") { try FaultRule(parsing: bad) }
        }
        #expect(throws: FaultSpecificationError.self) { try FaultPlan(specifications: ["500@0.6", "reset@0.6"], seed: 1) }

        func kinds(seed: UInt64) throws -> [String?] {
            let plan = try FaultPlan(specifications: ["500@0.2", "reset@0.2", "503@#0"], seed: seed)
            return (0..<200).map { plan.decide(RequestInfo(index: $0, method: "POST", uri: "/", headers: [HeaderField(name: "Content-Length", value: "1000")])).kind }
        }
        let first = try kinds(seed: 42)
        #expect(first == (try kinds(seed: 42)))
        #expect(first != (try kinds(seed: 43)))
        #expect(first[0] == "503")
        let resets = first.filter { $0 == "reset" }.count, errors = first.filter { $0 == "500" }.count
        #expect((20...60).contains(resets) && (20...60).contains(errors), "about 20 % each: \(resets) resets, \(errors) 500s")
    }
}

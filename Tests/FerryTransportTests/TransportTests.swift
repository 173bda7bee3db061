import FerryReceiver
import FerryTestSupport
import FerryTransport
import Foundation
import Logging
import NIOCore
import Testing

/// Writes a body file for a request and returns the request.
func bodyRequest(_ directory: TemporaryDirectory, url: String, size: Int, seed: UInt64 = 1) throws -> (UploadRequest, [UInt8]) {
    let bytes = pseudoRandomBytes(size, seed: seed)
    let boundary = "ferry-test-boundary"
    let body = Array("--\(boundary)\r\nContent-Disposition: form-data; name=\"file\"; filename=\"f.bin\"\r\nContent-Type: application/octet-stream\r\n\r\n".utf8)
        + bytes + Array("\r\n--\(boundary)--\r\n".utf8)
    let path = directory.url("body-\(seed)")
    _ = FileManager.default.createFile(atPath: path, contents: Data(body))
    return (UploadRequest(
        url: url, method: "POST", headers: [(name: "Authorization", value: "Bearer t0k3n")], bodyPath: path,
        contentLength: Int64(body.count), contentType: "multipart/form-data; boundary=\(boundary)",
        idempotencyKey: "01JTESTKEY0000000000000000"), bytes)
}

@Suite("Uploader against a real loopback server")
struct UploaderTests {
    let logger = Logger(label: "test")

    @Test("Streams the body with Content-Length, Idempotency-Key and User-Agent; keeps the response")
    func upload() async throws {
        let directory = try TemporaryDirectory()
        let receiver = try await Receiver.start(directory: directory.url("received"))
        let uploader = try Uploader(settings: TransportSettings())
        let (request, bytes) = try bodyRequest(directory, url: receiver.url(), size: 5 << 20)
        let result = await uploader.send(request, logger: logger)
        try await uploader.shutdown()
        try await receiver.stop()
        guard case .response(let status, _, let body, let sent) = result else {
            Issue.record("expected a response, got \(result)")
            return
        }
        #expect(status == 201)
        #expect(sent == request.contentLength)
        #expect(String(decoding: body, as: UTF8.self).contains("\"sha256\":\"\(sha256Hex(bytes))\""))
        let received = try #require(receiver.requests.first)
        #expect(received.header("Content-Length") == String(request.contentLength))
        #expect(received.header("Transfer-Encoding") == nil)
        #expect(received.idempotencyKey == "01JTESTKEY0000000000000000")
        #expect(received.header("User-Agent")?.hasPrefix("ferry/") == true)
        #expect(received.header("Authorization") == "Bearer t0k3n")
        #expect(received.files.first?.sha256 == sha256Hex(bytes))
    }

    @Test("Bodies sent from files one after another reuse keep-alive connections: at most one per event loop")
    func keepAliveFromFiles() async throws {
        let directory = try TemporaryDirectory()
        let receiver = try await Receiver.start(directory: directory.url("received"))
        let uploader = try Uploader(settings: TransportSettings())
        let requests = 8
        for seed in 1...requests {
            let (request, _) = try bodyRequest(directory, url: receiver.url(), size: 256 << 10, seed: UInt64(seed))
            let result = await uploader.send(request, logger: logger)
            guard case .response(201, _, _, _) = result else {
                Issue.record("request \(seed): expected a 201, got \(result)")
                break
            }
        }
        try await uploader.shutdown()
        let connections = receiver.connectionsAccepted
        try await receiver.stop()
        #expect(receiver.acceptedRequests.count == requests)
        // Each loop's first request opens a connection; every later one finds it idle. (Pinned to a
        // loop of a shared client, each request opened a connection of its own and closed it.)
        #expect(connections <= min(requests, System.coreCount), "\(connections) connections for \(requests) sequential requests")
    }

    @Test("A URL whose port is out of range fails the request, with a reason, instead of stopping the process",
          arguments: ["http://127.0.0.1:99999/files/abc", "http://127.0.0.1:65536/x"])
    func portOutOfRange(url: String) async throws {
        let directory = try TemporaryDirectory()
        let uploader = try Uploader(settings: TransportSettings(connectTimeout: .seconds(2)))
        let (request, _) = try bodyRequest(directory, url: url, size: 10)
        let result = await uploader.send(request, logger: logger)
        try await uploader.shutdown()
        guard case .failed(let failure, let sent) = result else {
            Issue.record("expected a failure, got \(result)")
            return
        }
        #expect(sent == 0)
        #expect(failure.message.contains("a port is a number from 1 to 65535"), "\(failure.message)")
    }

    @Test("An invalid header value is reported without being quoted (it may be a secret)")
    func invalidHeaderNotQuoted() async throws {
        let directory = try TemporaryDirectory()
        let receiver = try await Receiver.start(directory: directory.url("r"))
        let uploader = try Uploader(settings: TransportSettings(connectTimeout: .seconds(2)))
        var (request, _) = try bodyRequest(directory, url: receiver.url(), size: 10)
        request.headers = [(name: "Authorization", value: "Bearer Super\u{7F}SecretTok")]
        let result = await uploader.send(request, logger: logger)
        try await uploader.shutdown()
        try await receiver.stop()
        guard case .failed(let failure, _) = result else {
            Issue.record("expected a failure, got \(result)")
            return
        }
        #expect(!failure.message.contains("Secret") && !failure.message.contains("Bearer"), "\(failure.message)")
        #expect(failure.message.contains("holds a character HTTP does not allow in a header"), "\(failure.message)")
    }

    @Test("A refused connection is a transport failure, not a response")
    func refused() async throws {
        let directory = try TemporaryDirectory()
        // Bind and close a receiver to get a port nobody listens on.
        let receiver = try await Receiver.start(directory: directory.url("r"))
        let url = receiver.url()
        try await receiver.stop()
        let uploader = try Uploader(settings: TransportSettings(connectTimeout: .seconds(2)))
        let (request, _) = try bodyRequest(directory, url: url, size: 10)
        let result = await uploader.send(request, logger: logger)
        try await uploader.shutdown()
        guard case .failed(let failure, _) = result else {
            Issue.record("expected a failure, got \(result)")
            return
        }
        #expect(failure.message.contains("127.0.0.1"))
    }

    @Test("A server that stops reading is abandoned after the no-progress timeout")
    func stall() async throws {
        let directory = try TemporaryDirectory()
        let receiver = try await Receiver.start(directory: directory.url("r"), plan: { _ in .stall(afterBytes: 256 * 1024) })
        let uploader = try Uploader(settings: TransportSettings(noProgressTimeout: .seconds(1)))
        let (request, _) = try bodyRequest(directory, url: receiver.url(), size: 64 << 20)
        let started = ContinuousClock.now
        let result = await uploader.send(request, logger: logger)
        let elapsed = ContinuousClock.now - started
        try await uploader.shutdown()
        try await receiver.stop()
        guard case .failed(let failure, let sent) = result else {
            Issue.record("expected a failure, got \(result)")
            return
        }
        #expect(failure.kind == .timeout)
        #expect(sent < request.contentLength)
        #expect(elapsed < .seconds(20))
    }

    @Test("A connection cut mid-body is a transport failure")
    func reset() async throws {
        let directory = try TemporaryDirectory()
        let receiver = try await Receiver.start(directory: directory.url("r"), plan: { _ in .disconnect(afterBytes: 100_000) })
        let uploader = try Uploader(settings: TransportSettings(noProgressTimeout: .seconds(5)))
        let (request, _) = try bodyRequest(directory, url: receiver.url(), size: 8 << 20)
        let result = await uploader.send(request, logger: logger)
        try await uploader.shutdown()
        try await receiver.stop()
        guard case .failed = result else {
            Issue.record("expected a failure, got \(result)")
            return
        }
    }

    @Test("A server that answers before reading the body is heard (413)")
    func earlyAnswer() async throws {
        let directory = try TemporaryDirectory()
        let receiver = try await Receiver.start(directory: directory.url("r"), plan: { _ in
            .respondEarly(status: 413, body: "{\"error\":\"too large\"}")
        })
        let uploader = try Uploader(settings: TransportSettings(noProgressTimeout: .seconds(5)))
        let (request, _) = try bodyRequest(directory, url: receiver.url(), size: 16 << 20)
        let result = await uploader.send(request, logger: logger)
        try await uploader.shutdown()
        try await receiver.stop()
        guard case .response(let status, _, let body, let sent) = result else {
            Issue.record("expected the server's early 413, got \(result)")
            return
        }
        #expect(status == 413)
        #expect(String(decoding: body, as: UTF8.self) == "{\"error\":\"too large\"}")
        #expect(sent < request.contentLength)
    }

    @Test("Redirects are not followed: a POST must not silently become a GET")
    func redirect() async throws {
        let directory = try TemporaryDirectory()
        let receiver = try await Receiver.start(directory: directory.url("r"), plan: { info in
            info.index == 0 ? .respond(status: 302, headers: [HeaderField(name: "Location", value: "/elsewhere")]) : .store()
        })
        let uploader = try Uploader(settings: TransportSettings())
        let (request, _) = try bodyRequest(directory, url: receiver.url(), size: 1000)
        let result = await uploader.send(request, logger: logger)
        try await uploader.shutdown()
        try await receiver.stop()
        guard case .response(let status, let headers, _, _) = result else {
            Issue.record("expected a response, got \(result)")
            return
        }
        #expect(status == 302)
        #expect(headers.contains { $0.name.lowercased() == "location" })
        #expect(receiver.requests.count == 1)
    }

    @Test("Only the first 64 KiB of a response is kept")
    func responseExcerpt() async throws {
        let directory = try TemporaryDirectory()
        let big = String(repeating: "x", count: 200_000)
        let receiver = try await Receiver.start(directory: directory.url("r"), plan: { _ in .respond(status: 200, body: big) })
        let uploader = try Uploader(settings: TransportSettings())
        let (request, _) = try bodyRequest(directory, url: receiver.url(), size: 10)
        let result = await uploader.send(request, logger: logger)
        try await uploader.shutdown()
        try await receiver.stop()
        guard case .response(200, _, let body, _) = result else {
            Issue.record("expected 200, got \(result)")
            return
        }
        #expect(body.count == Uploader.responseLimit)
    }
}

@Suite("TLS")
struct TLSTests {
    let logger = Logger(label: "test")

    @Test("Certificates are verified: an unknown CA is refused, and trusted once given as ca_file")
    func verification() async throws {
        let directory = try TemporaryDirectory()
        let certificates = try TestCertificates(in: directory.url("pki"))
        let receiver = try await Receiver.start(directory: directory.url("r"), tls: try certificates.serverConfiguration())
        defer { Task { try? await receiver.stop() } }
        let (request, bytes) = try bodyRequest(directory, url: receiver.url(), size: 100_000)
        #expect(request.url.hasPrefix("https://127.0.0.1:"))

        let strict = try Uploader(settings: TransportSettings(connectTimeout: .seconds(5)))
        let refused = await strict.send(request, logger: logger)
        try await strict.shutdown()
        guard case .failed(let failure, _) = refused else {
            Issue.record("a certificate from an unknown CA was accepted: \(refused)")
            return
        }
        #expect(failure.kind == .tls)
        #expect(failure.message.contains("is not trusted"), "\(failure)")
        #expect(receiver.acceptedRequests.isEmpty)

        let trusting = try Uploader(settings: TransportSettings(caFile: certificates.caFile))
        let accepted = await trusting.send(request, logger: logger)
        try await trusting.shutdown()
        guard case .response(201, _, _, _) = accepted else {
            Issue.record("expected 201 over TLS with ca_file, got \(accepted)")
            return
        }
        #expect(receiver.acceptedRequests.first?.files.first?.sha256 == sha256Hex(bytes))
    }
}

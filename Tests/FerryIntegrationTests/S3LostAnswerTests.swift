import FerryQueue
import FerryTestSupport
import Foundation
import Testing

/// Requests the server carried out whose answers never reached ferryd (the link dropped at the
/// worst moment, or a proxy or load balancer answered instead), through the real ferryd against
/// real S3 servers: a proxy passes the request on whole and closes the connection when the
/// server's answer starts, or sends an answer of its own. The next attempt finds out from the
/// server what happened: nothing is sent twice that the server holds, and no upload is left open.
@Suite("S3 requests whose answers were lost", .serialized)
struct S3LostAnswerTests {
    static let mib = 1 << 20
    static let retry = ["initial_delay = \"100ms\"", "max_delay = \"1s\""]

    @Test("CreateMultipartUpload's answer lost: the next attempt aborts the unrecorded upload and makes a new one",
          arguments: S3TestServer.Kind.allCases)
    func creation(_ kind: S3TestServer.Kind) async throws {
        let size = 20 * Self.mib + 3
        try await S3ProtocolTests().withS3(kind, retry: Self.retry, dropAnswer: #"(?m)^POST [^ \r\n]*\?uploads HTTP/1\.1"#) {
            harness, server, proxy in
            try await harness.start(environment: S3ProtocolTests.environment())
            let bytes = pseudoRandomBytes(size, seed: 180)
            try harness.drop("survey.las", bytes)
            let done = try await waitForState(harness, .done)
            try await harness.waitForQuiet()
            let stats = try proxy.stats()
            #expect(stats.droppedAnswers == 1)
            let object = try #require(try server.object("survey.las"))
            #expect(object.sha256 == sha256Hex(bytes))
            #expect(try server.openUploads().isEmpty, "the upload whose creation was not recorded is aborted")
            #expect(done.first?.attempts == 2, "one attempt lost the answer, the next delivered")
            #expect(harness.daemon?.log.contains("aborted the multipart upload a crash left before its creation was recorded") == true)
            #expect(stats.upstreamBytes - size < Self.mib, "no part was sent before the creation's answer: nothing sent twice")
        }
    }

    @Test("UploadPart's answer lost: the next attempt lists the parts and does not send that part again",
          arguments: S3TestServer.Kind.allCases)
    func part(_ kind: S3TestServer.Kind) async throws {
        let size = 40 * Self.mib + 11
        try await S3ProtocolTests().withS3(kind, retry: Self.retry, dropAnswer: #"(?m)^PUT [^ \r\n]*&partNumber=3 HTTP/1\.1"#) {
            harness, server, proxy in
            try await harness.start(environment: S3ProtocolTests.environment())
            let bytes = pseudoRandomBytes(size, seed: 181)
            try harness.drop("core-dump.tar", bytes)
            let done = try await waitForState(harness, .done)
            try await harness.waitForQuiet()
            let stats = try proxy.stats()
            #expect(stats.droppedAnswers == 1)
            let object = try #require(try server.object("core-dump.tar"))
            #expect(object.sha256 == sha256Hex(bytes))
            #expect(try server.openUploads().isEmpty)
            #expect(done.first?.attempts == 2)
            let resent = stats.upstreamBytes - size
            print("s3 \(kind): part 3's answer lost: \(stats.upstreamBytes) bytes on the wire for \(size) (\(resent) more)")
            #expect(resent < Self.mib, "part 3 is on the server (ListParts says so): it is not sent again")
            #expect(harness.daemon?.log.contains("reading a part back to compare with the one the server holds") == true)
            #expect(harness.daemon?.log.contains("the server holds parts whose answers were lost") == true)
        }
    }

    @Test("CompleteMultipartUpload's answer lost: the next attempt finds the object complete (HEAD: the parts' ETag, or the file's MD5)",
          arguments: S3TestServer.Kind.allCases)
    func completion(_ kind: S3TestServer.Kind) async throws {
        let size = 24 * Self.mib + 5
        try await S3ProtocolTests().withS3(kind, retry: Self.retry, dropAnswer: #"(?m)^POST [^ \r\n]*\?uploadId=[^ \r\n]* HTTP/1\.1"#) {
            harness, server, proxy in
            try await harness.start(environment: S3ProtocolTests.environment())
            let bytes = pseudoRandomBytes(size, seed: 182)
            try harness.drop("night-7.fits", bytes)
            let done = try await waitForState(harness, .done)
            try await harness.waitForQuiet()
            let stats = try proxy.stats()
            #expect(stats.droppedAnswers == 1)
            let object = try #require(try server.object("night-7.fits"))
            #expect(object.sha256 == sha256Hex(bytes))
            #expect(try server.openUploads().isEmpty)
            #expect(done.first?.attempts == 2)
            let resent = stats.upstreamBytes - size
            print("s3 \(kind): the completion's answer lost: \(stats.upstreamBytes) bytes on the wire for \(size) (\(resent) more)")
            #expect(resent < Self.mib, "the object is complete on the server: no part is sent again")
            let log = harness.daemon?.log ?? ""
            #expect(log.contains("completed by an earlier request whose answer was lost"))
            // rclone serve s3 gives an assembled object the MD5 of its content: read back; the others the parts' ETag.
            #expect(log.contains("reading the file back to compare with the object") == (kind == .rclone))
        }
    }

    @Test("CompleteMultipartUpload answered 200 OK and only keep-alive whitespace before the connection closed: the next attempt asks the server",
          arguments: S3TestServer.Kind.allCases)
    func completionCutShort(_ kind: S3TestServer.Kind) async throws {
        let size = 16 * Self.mib + 1
        try await S3ProtocolTests().withS3(
            kind, retry: Self.retry, dropAnswer: #"(?m)^POST [^ \r\n]*\?uploadId=[^ \r\n]* HTTP/1\.1"#,
            replacement: "HTTP/1.1 200 OK\r\nContent-Type: application/xml\r\nConnection: close\r\n\r\n  \n  "
        ) { harness, server, proxy in
            try await harness.start(environment: S3ProtocolTests.environment())
            let bytes = pseudoRandomBytes(size, seed: 185)
            try harness.drop("swath.nc", bytes)
            let done = try await waitForState(harness, .done)
            try await harness.waitForQuiet()
            let stats = try proxy.stats()
            #expect(stats.droppedAnswers == 1)
            #expect(done.first?.attempts == 2, "a 200 without S3's document is neither a success nor a failure to put aside")
            let object = try #require(try server.object("swath.nc"))
            #expect(object.sha256 == sha256Hex(bytes))
            #expect(try server.openUploads().isEmpty)
            #expect(stats.upstreamBytes - size < Self.mib)
        }
    }

    /// An HTTP response with an S3 `<Error>` body.
    static func answer(_ status: String, code: String, message: String, headers: [String] = []) -> String {
        let body = "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<Error><Code>\(code)</Code><Message>\(message)</Message><RequestId>4442587FB7D0A2F9</RequestId></Error>"
        return (["HTTP/1.1 \(status)", "Content-Type: application/xml", "Content-Length: \(body.utf8.count)", "Connection: close"] + headers)
            .joined(separator: "\r\n") + "\r\n\r\n" + body
    }

    @Test("CompleteMultipartUpload answered 200 OK with an <Error> inside: not a success; the next attempt finds what the server did",
          arguments: S3TestServer.Kind.allCases)
    func errorInside200(_ kind: S3TestServer.Kind) async throws {
        let size = 17 * Self.mib + 9
        let inside = Self.answer("200 OK", code: "InternalError", message: "We encountered an internal error. Please try again.")
        try await S3ProtocolTests().withS3(
            kind, retry: Self.retry, dropAnswer: #"(?m)^POST [^ \r\n]*\?uploadId=[^ \r\n]* HTTP/1\.1"#, replacement: inside
        ) { harness, server, proxy in
            try await harness.start(environment: S3ProtocolTests.environment())
            let bytes = pseudoRandomBytes(size, seed: 183)
            try harness.drop("tiles.zip", bytes)
            let done = try await waitForState(harness, .done)
            try await harness.waitForQuiet()
            let stats = try proxy.stats()
            #expect(stats.droppedAnswers == 1)
            #expect(done.first?.attempts == 2, "the 200 with an <Error> is not a success")
            let log = harness.daemon?.log ?? ""
            #expect(log.contains("upload attempt failed; will retry") && log.contains("InternalError"))
            let object = try #require(try server.object("tiles.zip"))
            #expect(object.sha256 == sha256Hex(bytes))
            #expect(try server.openUploads().isEmpty)
            #expect(stats.upstreamBytes - size < Self.mib, "nothing sent twice")
        }
    }

    @Test("a part answered 503 SlowDown with Retry-After: the next attempt waits for it, and keeps the part the server stored",
          arguments: S3TestServer.Kind.allCases)
    func slowDown(_ kind: S3TestServer.Kind) async throws {
        let size = 30 * Self.mib
        let slowDown = Self.answer("503 Slow Down", code: "SlowDown", message: "Please reduce your request rate.", headers: ["Retry-After: 2"])
        try await S3ProtocolTests().withS3(
            kind, retry: Self.retry, dropAnswer: #"(?m)^PUT [^ \r\n]*&partNumber=2 HTTP/1\.1"#, replacement: slowDown
        ) { harness, server, proxy in
            try await harness.start(environment: S3ProtocolTests.environment())
            let bytes = pseudoRandomBytes(size, seed: 184)
            try harness.drop("radar.h5", bytes)
            let done = try await waitForState(harness, .done)
            try await harness.waitForQuiet()
            let stats = try proxy.stats()
            #expect(stats.droppedAnswers == 1)
            #expect(done.first?.attempts == 2)
            let log = harness.daemon?.log ?? ""
            let failure = try #require(log.split(separator: "\n").first { $0.contains("upload attempt failed; will retry") })
            #expect(failure.contains("SlowDown"), "\(failure)")
            let wait = try #require(failure.firstMatch(of: /retry_in_ms=(\d+)/).flatMap { Int($0.1) })
            #expect(wait >= 2000, "Retry-After: 2 is honoured (backoff alone is at most 1 s here): \(wait) ms")
            let object = try #require(try server.object("radar.h5"))
            #expect(object.sha256 == sha256Hex(bytes))
            #expect(try server.openUploads().isEmpty)
            #expect(stats.upstreamBytes - size < Self.mib, "part 2 is on the server: read back, not sent again")
        }
    }
}

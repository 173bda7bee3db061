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

    /// Delivers one file of `size` bytes through a proxy that loses the answer to the first request
    /// `dropAnswer` matches (the client gets `replacement` instead, if given), and checks what every
    /// such delivery must hold: the answer lost once, two attempts, the object whole, no upload left
    /// open, and less than 1 MiB more than the file on the wire (request heads). Returns ferryd's
    /// log and the bytes sent beyond the file.
    static func deliverLosingAnswer(
        _ kind: S3TestServer.Kind, file: String, size: Int, seed: UInt64, dropAnswer: String, replacement: String? = nil
    ) async throws -> (log: String, extra: Int) {
        var outcome = (log: "", extra: 0)
        try await S3ProtocolTests().withS3(kind, retry: Self.retry, dropAnswer: dropAnswer, replacement: replacement) {
            harness, server, proxy in
            try await harness.start(environment: S3ProtocolTests.environment())
            let bytes = pseudoRandomBytes(size, seed: seed)
            try harness.drop(file, bytes)
            let done = try await waitForState(harness, .done)
            try await harness.waitForQuiet()
            let stats = try proxy.stats()
            #expect(stats.droppedAnswers == 1)
            #expect(done.first?.attempts == 2, "one attempt lost the answer, the next delivered")
            let object = try #require(try server.object(file))
            #expect(object.sha256 == sha256Hex(bytes))
            #expect(try server.openUploads().isEmpty, "no upload is left open")
            outcome = (harness.daemon?.log ?? "", stats.upstreamBytes - size)
            print("s3 \(kind): \(file): \(stats.upstreamBytes) bytes on the wire for \(size) (\(outcome.extra) more)")
            #expect(outcome.extra < Self.mib, "nothing the server holds is sent twice")
        }
        return outcome
    }

    static let creationRequest = #"(?m)^POST [^ \r\n]*\?uploads HTTP/1\.1"#
    static let completionRequest = #"(?m)^POST [^ \r\n]*\?uploadId=[^ \r\n]* HTTP/1\.1"#
    static func partRequest(_ number: Int) -> String { #"(?m)^PUT [^ \r\n]*&partNumber="# + String(number) + #" HTTP/1\.1"# }

    @Test("CreateMultipartUpload's answer lost: the next attempt aborts the unrecorded upload and makes a new one",
          arguments: S3TestServer.Kind.allCases)
    func creation(_ kind: S3TestServer.Kind) async throws {
        let (log, _) = try await Self.deliverLosingAnswer(kind, file: "survey.las", size: 20 * Self.mib + 3, seed: 180, dropAnswer: Self.creationRequest)
        #expect(log.contains("aborted the multipart upload a crash left before its creation was recorded"))
    }

    @Test("UploadPart's answer lost: the next attempt lists the parts, reads part 3 back, and does not send it again",
          arguments: S3TestServer.Kind.allCases)
    func part(_ kind: S3TestServer.Kind) async throws {
        let (log, _) = try await Self.deliverLosingAnswer(kind, file: "core-dump.tar", size: 40 * Self.mib + 11, seed: 181, dropAnswer: Self.partRequest(3))
        #expect(log.contains("reading a part back to compare with the one the server holds"))
        #expect(log.contains("the server holds parts whose answers were lost"))
    }

    @Test("CompleteMultipartUpload's answer lost: the next attempt finds the object complete (HEAD: the parts' ETag, or the file's MD5)",
          arguments: S3TestServer.Kind.allCases)
    func completion(_ kind: S3TestServer.Kind) async throws {
        let (log, _) = try await Self.deliverLosingAnswer(kind, file: "night-7.fits", size: 24 * Self.mib + 5, seed: 182, dropAnswer: Self.completionRequest)
        #expect(log.contains("completed by an earlier request whose answer was lost"))
        // rclone serve s3 gives an assembled object the MD5 of its content: read back; the others the parts' ETag.
        #expect(log.contains("reading the file back to compare with the object") == (kind == .rclone))
    }

    @Test("CompleteMultipartUpload answered 200 OK and only keep-alive whitespace before the connection closed: the next attempt asks the server",
          arguments: S3TestServer.Kind.allCases)
    func completionCutShort(_ kind: S3TestServer.Kind) async throws {
        let cut = "HTTP/1.1 200 OK\r\nContent-Type: application/xml\r\nConnection: close\r\n\r\n  \n  "
        let (log, _) = try await Self.deliverLosingAnswer(
            kind, file: "swath.nc", size: 16 * Self.mib + 1, seed: 185, dropAnswer: Self.completionRequest, replacement: cut)
        #expect(log.contains("was not the document S3 sends"), "neither a success nor a failure to put aside")
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
        let inside = Self.answer("200 OK", code: "InternalError", message: "We encountered an internal error. Please try again.")
        let (log, _) = try await Self.deliverLosingAnswer(
            kind, file: "tiles.zip", size: 17 * Self.mib + 9, seed: 183, dropAnswer: Self.completionRequest, replacement: inside)
        #expect(log.contains("upload attempt failed; will retry") && log.contains("InternalError"))
    }

    @Test("a part answered 503 SlowDown with Retry-After: the next attempt waits for it, and keeps the part the server stored",
          arguments: S3TestServer.Kind.allCases)
    func slowDown(_ kind: S3TestServer.Kind) async throws {
        let slowDown = Self.answer("503 Slow Down", code: "SlowDown", message: "Please reduce your request rate.", headers: ["Retry-After: 2"])
        let (log, _) = try await Self.deliverLosingAnswer(
            kind, file: "radar.h5", size: 30 * Self.mib, seed: 184, dropAnswer: Self.partRequest(2), replacement: slowDown)
        let failure = try #require(log.split(separator: "\n").first { $0.contains("upload attempt failed; will retry") })
        #expect(failure.contains("SlowDown"), "\(failure)")
        let wait = try #require(failure.firstMatch(of: /retry_in_ms=(\d+)/).flatMap { Int($0.1) })
        #expect(wait >= 2000, "Retry-After: 2 is honoured (backoff alone is at most 1 s here): \(wait) ms")
        #expect(log.contains("reading a part back to compare with the one the server holds"), "part 2 is on the server: read back")
    }
}

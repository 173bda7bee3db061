import AsyncHTTPClient
@testable import FerryTransport
import Glibc
import NIOCore
import Testing

/// Which transport errors mean "no connection could be made" (the spool then waits, as for a
/// server that is down) and which happened on a connection that was made.
@Suite("Transport failures")
struct TransportFailureTests {
    static let request = UploadRequest.bodiless(url: "http://127.0.0.1:9/upload", method: "POST", headers: [])

    @Test("refused, no route, the connect timeout: unreachable; a reset or a close mid-request: not", arguments: [
        (IOError(errnoCode: ECONNREFUSED, reason: "connect") as any Error, true),
        (IOError(errnoCode: EHOSTUNREACH, reason: "connect"), true),
        (IOError(errnoCode: ENETUNREACH, reason: "connect"), true),
        (HTTPClientError.connectTimeout, true),
        (ChannelError.connectTimeout(.seconds(10)), true),
        (IOError(errnoCode: ECONNRESET, reason: "read"), false),
        (IOError(errnoCode: EPIPE, reason: "write"), false),
        (HTTPClientError.remoteConnectionClosed, false),
        (HTTPClientError.readTimeout, false),
    ] as [(any Error, Bool)])
    func unreachable(error: any Error, unreachable: Bool) {
        let failure = Uploader.describe(error, request: Self.request)
        #expect(failure.isUnreachable == unreachable, "\(failure.kind): \(failure.message)")
        #expect(failure.message.contains("127.0.0.1:9"), "the message names the server: \(failure.message)")
    }
}

import FerryQueue
import FerryTestSupport
import Foundation
import Testing

#if canImport(Glibc)
import Glibc
#endif

/// Multipart uploads that end without completing, through the real ferryd against real S3 servers:
/// given up, superseded by a new version of the file, aborted by someone else while parts are
/// going, refused for want of permission. No open upload is left behind, and nothing is deleted.
@Suite("S3 uploads that end without completing", .serialized)
struct S3UploadEndTests {
    static let mib = 1 << 20

    @Test("giving up (max_age) mid-upload aborts the multipart upload; the file goes aside with the reason",
          arguments: S3TestServer.Kind.allCases)
    func giveUpAborts(_ kind: S3TestServer.Kind) async throws {
        let size = 64 * Self.mib
        // Cut at 60% of the file, held to 4 MiB/s (the cut comes about 9 s in, long after the first
        // part): the file is older than max_age when the cut ends the attempt.
        try await S3ProtocolTests().withS3(
            kind, cutAt: size * 6 / 10, rate: 4 * Self.mib, retry: ["initial_delay = \"100ms\"", "max_delay = \"1s\"", "max_age = \"1s\""]
        ) { harness, server, proxy in
            try await harness.start(environment: S3ProtocolTests.environment())
            let bytes = pseudoRandomBytes(size, seed: 170)
            try harness.drop("footage.mov", bytes)
            try await waitUntil("a part confirmed", timeout: .seconds(60)) {
                (try await jobs(harness).first?.upload?.offset ?? 0) >= Int64(8 * Self.mib)
            }
            #expect(try server.openUploads().count == 1)
            let failed = try await waitForState(harness, .failed)
            #expect(failed.first?.lastError?.contains("max_age") == true, "\(failed.first?.lastError ?? "")")
            #expect(try proxy.stats().cuts == 1)
            try await waitUntil("the upload aborted on the server", timeout: .seconds(30)) { try server.openUploads().isEmpty }
            #expect(try server.object("footage.mov") == nil)
            let kept = try await S3ProtocolTests().checkSidecar(harness, "footage.mov", mentions: "max_age")
            #expect(kept == bytes, "the file is moved aside whole")
        }
    }

    @Test("a file rewritten mid-upload is superseded: its upload is aborted, and the new version arrives",
          arguments: S3TestServer.Kind.allCases)
    func supersededAborts(_ kind: S3TestServer.Kind) async throws {
        let size = 48 * Self.mib
        // Held to 4 MiB/s: the rewrite comes between the first part (2 s) and the end (12 s).
        try await S3ProtocolTests().withS3(kind, rate: 4 * Self.mib) { harness, server, _ in
            try await harness.start(environment: S3ProtocolTests.environment())
            let path = try harness.drop("scan.tiff", pseudoRandomBytes(size, seed: 171))
            try await waitUntil("a part confirmed", timeout: .seconds(60)) {
                (try await jobs(harness).first?.upload?.offset ?? 0) >= Int64(8 * Self.mib)
            }
            #expect(try server.openUploads().count == 1)
            // The scanner writes the page again, in place and shorter.
            let newer = pseudoRandomBytes(20 * Self.mib + 5, seed: 172)
            let fd = open(path, O_WRONLY | O_TRUNC)
            #expect(fd >= 0)
            let written = newer.withUnsafeBytes { write(fd, $0.baseAddress, $0.count) }
            #expect(written == newer.count)
            close(fd)
            // The part in flight reaches past the new end: its sendfile(2) region can never complete. The
            // attempt ends within seconds (it used to spin the event loop until no_progress_timeout, 60 s).
            let rewritten = ContinuousClock.now
            try await waitUntil("the old version superseded", timeout: .seconds(30)) {
                try await jobs(harness).contains { $0.state == .superseded }
            }
            print("s3 \(kind): superseded \(ContinuousClock.now - rewritten) after the rewrite")
            try await waitUntil("the new version delivered", timeout: .seconds(120)) {
                try await jobs(harness).contains { $0.state == .done }
            }
            try await harness.waitForQuiet()
            let all = try await jobs(harness)
            #expect(Set(all.map(\.state)) == [.superseded, .done], "\(all.map(\.state))")
            let object = try #require(try server.object("scan.tiff"))
            #expect(object.sha256 == sha256Hex(newer), "the object is the new version")
            try await waitUntil("the old version's upload aborted", timeout: .seconds(30)) { try server.openUploads().isEmpty }
        }
    }

    @Test("an upload aborted by someone else while parts are going (NoSuchUpload) starts over, and the object is whole",
          arguments: S3TestServer.Kind.allCases)
    func noSuchUploadStartsOver(_ kind: S3TestServer.Kind) async throws {
        let size = 40 * Self.mib + 77
        // Held to 4 MiB/s: the abort (a boto3 call) comes between the second part (4 s) and the end (10 s).
        try await S3ProtocolTests().withS3(kind, rate: 4 * Self.mib) { harness, server, proxy in
            try await harness.start(environment: S3ProtocolTests.environment())
            let bytes = pseudoRandomBytes(size, seed: 173)
            try harness.drop("logs.tar", bytes)
            try await waitUntil("two parts confirmed", timeout: .seconds(60)) {
                (try await jobs(harness).first?.upload?.offset ?? 0) >= Int64(16 * Self.mib)
            }
            // A lifecycle rule, or another client, aborts it.
            #expect(try server.abortUploads() == 1)
            let done = try await waitForState(harness, .done, timeout: .seconds(180))
            try await harness.waitForQuiet()
            let object = try #require(try server.object("logs.tar"))
            #expect(object.sha256 == sha256Hex(bytes))
            #expect(try server.openUploads().isEmpty)
            let sent = try proxy.stats().upstreamBytes
            print("s3 \(kind): upload aborted at 16+ MiB of 40 MiB: \(sent) bytes on the wire for \(size)")
            #expect(sent >= size + 16 * Self.mib, "the confirmed parts were sent again: the server had dropped them")
            #expect(done.first?.upload == nil)
        }
    }

    @Test("a key that may only read: AccessDenied is permanent, with the S3 code and message in the sidecar; the file is kept",
          arguments: [S3TestServer.Kind.moto, .seaweedfs])
    func accessDenied(_ kind: S3TestServer.Kind) async throws {
        try await S3ProtocolTests().withS3(kind, accessKey: S3TestServer.readerAccessKey) { harness, server, _ in
            try await harness.start(environment: S3ProtocolTests.environment(secret: S3TestServer.readerSecretKey))
            let small = pseudoRandomBytes(3000, seed: 174)
            let large = pseudoRandomBytes(12 * Self.mib, seed: 175)
            try harness.drop("small.jpg", small)
            try harness.drop("large.jpg", large)
            let failed = try await waitForState(harness, .failed, count: 2)
            for job in failed {
                #expect(job.lastError?.contains("AccessDenied") == true, "\(job.lastError ?? "")")
                #expect(job.attempts == 1, "a permanent error is not retried")
            }
            for (name, bytes) in [("small.jpg", small), ("large.jpg", large)] {
                let kept = try await S3ProtocolTests().checkSidecar(harness, name, mentions: "AccessDenied")
                #expect(kept == bytes)
            }
            #expect(try server.keys().isEmpty)
            #expect(try server.openUploads().isEmpty)
        }
    }
}

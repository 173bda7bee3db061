import FerryQueue
import FerryTestSupport
import Foundation
import Testing

#if canImport(Glibc)
import Glibc
#endif

/// What a delivered S3 object carries and what ferryd keeps of it, through the real ferryd against
/// real S3 servers: the kept answer (bucket, key, ETag, version id) as `ferryctl show` gives it,
/// `storage_class`, the key template's placeholders.
@Suite("S3 objects: the kept answer, key placeholders, storage class", .serialized)
struct S3ObjectAnswerTests {
    static let mib = 1 << 20

    /// moto and SeaweedFS version buckets and keep storage classes; rclone serve s3 does neither.
    @Test("in a versioned bucket the kept answer names the object's version; storage_class is sent; PutObject and multipart; ferryctl show",
          arguments: [S3TestServer.Kind.moto, .seaweedfs])
    func versionKept(_ kind: S3TestServer.Kind) async throws {
        try await S3ProtocolTests().withS3(kind, options: ["key = \"v/{filename}\"", "storage_class = \"STANDARD_IA\""]) { harness, server, _ in
            try server.enableVersioning()
            try await harness.start(environment: S3ProtocolTests.environment())
            try harness.drop("small.pdf", pseudoRandomBytes(5000, seed: 180))
            try harness.drop("large.pdf", pseudoRandomBytes(17 * Self.mib, seed: 181))
            let done = try await waitForState(harness, .done, count: 2)
            try await harness.waitForQuiet()
            for name in ["small.pdf", "large.pdf"] {
                let job = try #require(done.first(where: { String(decoding: $0.relativePath, as: UTF8.self) == name }))
                let object = try #require(try server.object("v/" + name))
                let versionID = try #require(object.versionID, "the server versions the bucket")
                #expect(object.storageClass == "STANDARD_IA", "\(name)")
                let show = try await harness.ctl("show", "--json", job.id.rawValue)
                let response = try #require(try show.json()["response"] as? [String: Any], "\(show.stdout)")
                #expect(response["content_type"] as? String == "application/json")
                let answer = try parseJSONObject(try #require(response["body"] as? String))
                #expect(answer["bucket"] as? String == S3TestServer.bucket, "\(answer)")
                #expect(answer["key"] as? String == "v/" + name)
                #expect(answer["version_id"] as? String == versionID, "\(answer)")
                #expect(answer["etag"] as? String == object.etag, "\(answer)")
                #expect((answer["url"] as? String)?.hasSuffix("/\(S3TestServer.bucket)/v/\(name)") == true, "\(answer)")
                let human = try await harness.ctl("show", job.id.rawValue)
                #expect(human.stdout.contains("response body:") && human.stdout.contains(versionID), "\(human.stdout)")
                #expect(!human.stdout.contains(S3TestServer.secretKey))
            }
        }
    }

    /// Not moto: its signature check refuses keys with `:` even from botocore (see S3KeyNameTests).
    @Test("{id}, {mtime}, {sha256} and {filename} in the key, for PutObject and multipart",
          arguments: S3TestServer.Kind.verifyingSignatures)
    func keyPlaceholders(_ kind: S3TestServer.Kind) async throws {
        try await S3ProtocolTests().withS3(kind, options: ["key = \"in/{id}/{mtime}/{sha256}-{filename}\""]) { harness, server, _ in
            try await harness.start(environment: S3ProtocolTests.environment())
            // Written beside the spool with a known modification time, then renamed in.
            let staging = harness.spoolPath() + "-staging"
            try FileManager.default.createDirectory(atPath: staging, withIntermediateDirectories: true)
            let files = [("small.bin", pseudoRandomBytes(4096, seed: 182)), ("large.bin", pseudoRandomBytes(9 * Self.mib + 1, seed: 183))]
            for (name, bytes) in files {
                #expect(FileManager.default.createFile(atPath: staging + "/" + name, contents: Data(bytes)))
                var times = [timespec(tv_sec: 1_767_323_045, tv_nsec: 250_000_000), timespec(tv_sec: 1_767_323_045, tv_nsec: 250_000_000)]
                #expect(utimensat(AT_FDCWD, staging + "/" + name, &times, 0) == 0)
                #expect(rename(staging + "/" + name, harness.spoolPath() + "/" + name) == 0)
            }
            let done = try await waitForState(harness, .done, count: 2)
            try await harness.waitForQuiet()
            for (name, bytes) in files {
                let job = try #require(done.first(where: { String(decoding: $0.relativePath, as: UTF8.self) == name }))
                let key = "in/\(job.id.rawValue)/2026-01-02T03:04:05Z/\(sha256Hex(bytes))-\(name)"
                let keys = try server.keys()
                let object = try #require(try server.object(key), "\(key) in \(keys)")
                #expect(object.sha256 == sha256Hex(bytes))
            }
        }
    }
}

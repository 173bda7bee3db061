import FerryTestSupport
import Foundation
import Testing

/// Object keys made of file names with the characters SigV4's canonical form and S3's URLs treat
/// specially (space, `+`, `%`, `?`, `#`, `;`, `~`, non-ASCII, directories), through the real ferryd
/// to real S3 servers that check signatures.
@Suite("S3 object keys from odd file names", .serialized)
struct S3KeyNameTests {
    static let names = [
        "space name.jpg", "plus+sign=equals&amp.bin", "percent%41%2F%zz.bin", "question?hash#.bin",
        "semi;colon,comma$dollar@at:colon.bin", "tilde~bang!(paren)'quote*star.dat", "ünïcødé 名前 ☃.txt",
        "brackets[]{}^`|\\backslash.bin", "\"double quotes\" <angle>.bin", "dots..and -dash_underscore.bin",
    ]

    /// rclone and SeaweedFS check signatures as AWS does. moto's check (enabled by the test server)
    /// rebuilds the canonical request from the decoded path and refuses these keys even from
    /// botocore itself (`+`, `%`, `!`, non-ASCII, …), so it cannot judge them; botocore's own
    /// signatures for such keys are compared in `BotocoreComparisonTests`.
    @Test("every name arrives under its own key, in one PutObject and in a multipart upload",
          arguments: S3TestServer.Kind.verifyingSignatures)
    func oddNames(_ kind: S3TestServer.Kind) async throws {
        try await S3ProtocolTests().withS3(kind, options: ["key = \"in/{relative_path}\"", "recursive = true"]) { harness, server, _ in
            let spool = harness.spoolPath()
            for directory in ["dir with space/sub+dir", "ñ/%2e"] {
                try FileManager.default.createDirectory(atPath: spool + "/" + directory, withIntermediateDirectories: true)
            }
            try await harness.start(environment: S3ProtocolTests.environment())
            var expected: [String: [UInt8]] = [:]
            // SeaweedFS stores a key's `\\` as `/` (its filer's path separator), whatever the request says.
            for (index, name) in Self.names.enumerated() where !(kind == .seaweedfs && name.contains("\\")) {
                expected[name] = pseudoRandomBytes(2000 + index, seed: UInt64(4000 + index))
            }
            expected["dir with space/sub+dir/inner file+.bin"] = pseudoRandomBytes(3000, seed: 4100)
            expected["ñ/%2e/x..%2fnot-up.bin"] = pseudoRandomBytes(3001, seed: 4101)
            // Two 8 MiB parts and a bit: CreateMultipartUpload, UploadPart, ListParts and Complete
            // all carry the key in their URL.
            expected["multi part + ü?.bin"] = pseudoRandomBytes(17 * S3ProtocolTests.mib, seed: 4102)
            for (name, bytes) in expected { _ = try harness.drop(name, bytes) }
            _ = try await waitForState(harness, .done, count: expected.count, timeout: .seconds(120))
            try await harness.waitForQuiet()
            let keys = Set(try server.keys())
            for (name, bytes) in expected {
                #expect(keys.contains("in/" + name), "\(name) is in the bucket under its name: \(keys.sorted())")
                #expect(try server.object("in/" + name)?.sha256 == sha256Hex(bytes), "\(name)")
            }
            #expect(keys.count == expected.count, "\(keys.sorted())")
            #expect(try server.openUploads().isEmpty)
        }
    }

    @Test("a name that is not UTF-8 is refused and moved aside, not sent under a changed key")
    func notUTF8() async throws {
        try await S3ProtocolTests().withS3(.rclone, options: ["key = \"in/{filename}\""]) { harness, server, _ in
            try await harness.start(environment: S3ProtocolTests.environment())
            let spool = harness.spoolPath()
            let name: [UInt8] = Array("photo-".utf8) + [0xFF, 0xFE] + Array(".jpg".utf8)
            try dropRawName(name, pseudoRandomBytes(5000, seed: 4200), in: spool)
            _ = try harness.drop("fine.jpg", pseudoRandomBytes(10, seed: 4201))
            _ = try await waitForState(harness, .done, count: 1)
            _ = try await waitForState(harness, .failed, count: 1)
            let sidecarName = name + Array(".error.json".utf8)
            try await waitUntil("the file in the failed directory") {
                let failed = rawNames(spool + "/.failed")
                return failed.contains(name) && failed.contains(sidecarName)
            }
            let sidecar = try #require(rawContents(spool + "/.failed", sidecarName))
            #expect(String(decoding: sidecar, as: UTF8.self).contains("not valid UTF-8"))
            #expect(try server.keys() == ["in/fine.jpg"], "nothing went up under a changed name")
        }
    }
}

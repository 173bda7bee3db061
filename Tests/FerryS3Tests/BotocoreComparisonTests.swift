import FerryS3
import Foundation
import Testing

/// The signer against botocore's (the AWS CLI's): the same requests, signed at the same instant by
/// both (`Tests/Servers/botocore_sign.py`), must carry the same Authorization header. The requests
/// are the ones Ferry makes, with keys and upload ids that test the encoding.
@Suite("SigV4 signer: the same signatures as botocore")
struct BotocoreComparisonTests {
    static let script = URL(fileURLWithPath: #filePath).deletingLastPathComponent()
        .appendingPathComponent("../Servers/botocore_sign.py").standardized.path

    struct Case {
        var method: String
        var endpoint: String
        var bucket: String
        var key: String
        var virtual: Bool
        var query: String
        var headers: [(name: String, value: String)]
        var payloadHash: String
        var token: String?
    }

    static let cases: [Case] = [
        Case(method: "PUT", endpoint: "http://127.0.0.1:9000", bucket: "ferry", key: "scans/page 001.pdf", virtual: false, query: "",
             headers: [("Content-Type", "application/pdf"), ("x-amz-checksum-crc32c", "yZRlqg=="), ("x-amz-meta-camera", "north   gate")],
             payloadHash: "UNSIGNED-PAYLOAD", token: nil),
        Case(method: "POST", endpoint: "https://s3.eu-west-1.amazonaws.com", bucket: "ferry-eu", key: "a+b=c~d/ünïcødé ☃.txt", virtual: true,
             query: "uploads", headers: [("x-amz-checksum-algorithm", "CRC32C"), ("x-amz-storage-class", "STANDARD_IA")],
             payloadHash: SigV4Signer.emptyPayloadHash, token: "FwoGZXIvYXdzEBYaDH+/token=="),
        Case(method: "PUT", endpoint: "http://localhost:8333/", bucket: "Bucket_1", key: "dir//double/./dot/../x", virtual: false,
             query: "partNumber=7&uploadId=" + SigV4Signer.encode("2~a/b=c+d e"), headers: [],
             payloadHash: "5891b5b522d5df086d0ff0b110fbd9d21bb4fc7163af34d08286a2e846f6be03", token: nil),
        Case(method: "GET", endpoint: "http://[::1]:9000", bucket: "ferry", key: "k", virtual: false,
             query: "uploadId=abc&max-parts=100&part-number-marker=200", headers: [], payloadHash: SigV4Signer.emptyPayloadHash, token: nil),
        Case(method: "DELETE", endpoint: "https://minio.example:443", bucket: "ferry", key: "x%y#z?q", virtual: false,
             query: "uploadId=XYZ", headers: [], payloadHash: SigV4Signer.emptyPayloadHash, token: nil),
    ]

    @Test("botocore signs Ferry's requests the same way")
    func sameAsBotocore() async throws {
        let date = Date(timeIntervalSince1970: 1_767_323_045)  // 2026-01-02T03:04:05Z
        var input: [[String: Any]] = []
        var ours: [String] = []
        for item in Self.cases {
            let address = try #require(S3ObjectAddress(endpoint: item.endpoint, bucket: item.bucket, key: item.key, virtualHosted: item.virtual))
            let signer = SigV4Signer(
                credentials: SigV4Credentials(accessKeyID: "AKIAFERRYTEST", secretAccessKey: "ferry/secret+key=", sessionToken: item.token),
                region: "eu-west-1")
            let headers = signer.signedHeaders(
                method: item.method, path: address.path, query: item.query, headers: [("Host", address.host)] + item.headers,
                payloadHash: item.payloadHash, at: date)
            ours.append(headers.first { $0.name == "Authorization" }!.value)
            input.append([
                "method": item.method, "url": address.url(query: item.query),
                "headers": ([("Host", address.host)] + item.headers).map { [$0.name, $0.value] },
                "payload_hash": item.payloadHash, "region": "eu-west-1", "service": "s3", "access_key": "AKIAFERRYTEST",
                "secret_key": "ferry/secret+key=", "session_token": item.token as Any, "time": SigV4Signer.amzDate(date),
            ])
        }
        let output = try runBotocore(JSONSerialization.data(withJSONObject: input))
        let theirs = try #require(try JSONSerialization.jsonObject(with: output) as? [[String: Any]])
        #expect(theirs.count == ours.count)
        for (index, result) in theirs.enumerated() {
            #expect(result["authorization"] as? String == ours[index], "case \(index): \(Self.cases[index].method) \(Self.cases[index].key)")
        }
    }

    private func runBotocore(_ input: Data) throws -> Data {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: "/usr/bin/env")
        process.arguments = [ProcessInfo.processInfo.environment["FERRY_TEST_PYTHON"] ?? "python3", Self.script]
        let stdin = Pipe(), stdout = Pipe(), stderr = Pipe()
        process.standardInput = stdin
        process.standardOutput = stdout
        process.standardError = stderr
        try process.run()
        stdin.fileHandleForWriting.write(input)
        try stdin.fileHandleForWriting.close()
        let data = stdout.fileHandleForReading.readDataToEndOfFile()
        let errors = String(decoding: stderr.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
        process.waitUntilExit()
        guard process.terminationStatus == 0 else {
            throw BotocoreFailure(message: "botocore_sign.py exited \(process.terminationStatus) (install botocore: scripts/install-deps.sh --test): \(errors)")
        }
        return data
    }

    struct BotocoreFailure: Error, CustomStringConvertible {
        var message: String
        var description: String { message }
    }
}

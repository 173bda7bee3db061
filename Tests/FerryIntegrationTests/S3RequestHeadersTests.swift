import FerryQueue
import FerryReceiver
import FerryTestSupport
import Foundation
import Testing

/// Which configured headers go on which S3 request, through the real ferryd against a scripted S3
/// server that records every request.
@Suite("S3: configured headers on each request of an upload", .serialized)
struct S3RequestHeadersTests {
    static let mib = 1 << 20

    /// A multipart upload as S3 answers it: Create, parts, Complete.
    static let plan: @Sendable (RequestInfo) -> ReceiverAction = { info in
        if info.method == "POST", info.uri.hasSuffix("?uploads") {
            return .respond(status: 200, headers: [HeaderField(name: "Content-Type", value: "application/xml")], body: """
                <?xml version="1.0" encoding="UTF-8"?>
                <InitiateMultipartUploadResult><Bucket>media</Bucket><Key>scan.bin</Key><UploadId>U1</UploadId></InitiateMultipartUploadResult>
                """)
        }
        if info.method == "PUT", let number = info.uri.split(separator: "=").last {
            return .respond(status: 200, headers: [HeaderField(name: "ETag", value: "\"\(String(repeating: String(number.suffix(1)), count: 32))\"")])
        }
        if info.method == "POST" {
            return .respond(status: 200, headers: [HeaderField(name: "Content-Type", value: "application/xml")], body: """
                <?xml version="1.0" encoding="UTF-8"?>
                <CompleteMultipartUploadResult><Bucket>media</Bucket><Key>scan.bin</Key><ETag>"0123456789abcdef0123456789abcdef-2"</ETag></CompleteMultipartUploadResult>
                """)
        }
        return .respond(status: 400)
    }

    @Test("SSE-C's customer-key headers, request-payer and expected-bucket-owner go on every part and the completion; other headers only on the creation")
    func customerKeyOnEveryPart() async throws {
        let spool = TestSpool(
            options: [
                "protocol = \"s3\"", "bucket = \"media\"", "access_key_id = \"AKIAEXAMPLE\"", "secret_access_key = \"secret\"",
                "part_size = \"5MiB\"", "checksum = \"none\"",
            ],
            headers: [
                "x-amz-server-side-encryption-customer-algorithm = \"AES256\"",
                "x-amz-server-side-encryption-customer-key = \"${env:FERRY_TEST_SSE_KEY}\"",
                "x-amz-server-side-encryption-customer-key-MD5 = \"bWQ1\"",
                "x-amz-request-payer = \"requester\"",
                "x-amz-tagging = \"camera=north\"",
            ],
            urlPath: "/")
        try await withDaemonHarness(spools: [spool], plan: Self.plan) { harness in
            try await harness.start(environment: ["FERRY_TEST_SSE_KEY": "a2V5"])
            try harness.drop("scan.bin", pseudoRandomBytes(6 * Self.mib, seed: 330))
            _ = try await waitForState(harness, .done)
            let requests = harness.receiver.requests
            #expect(requests.map(\.method) == ["POST", "PUT", "PUT", "POST"], "\(requests.map { "\($0.method) \($0.uri)" })")
            for request in requests {
                #expect(request.header("x-amz-server-side-encryption-customer-algorithm") == "AES256", "\(request.method) \(request.uri)")
                #expect(request.header("x-amz-server-side-encryption-customer-key") == "a2V5", "\(request.method) \(request.uri)")
                #expect(request.header("x-amz-server-side-encryption-customer-key-md5") == "bWQ1", "\(request.method) \(request.uri)")
                #expect(request.header("x-amz-request-payer") == "requester", "\(request.method) \(request.uri)")
                let signed = request.header("Authorization") ?? ""
                #expect(signed.contains("x-amz-server-side-encryption-customer-key;"), "the headers are signed: \(signed)")
                #expect((request.header("x-amz-tagging") != nil) == request.uri.hasSuffix("?uploads"), "an object header only on the creation")
            }
            #expect(harness.daemon?.log.contains("a2V5") == false, "the key never reaches the log")
        }
    }
}

import FerryS3
import Testing

/// Which recorded uploads may be aborted with the current settings: only those in the configured
/// bucket at the configured endpoint.
@Suite("S3 object addresses: which bucket an upload is in")
struct S3ObjectAddressTests {
    struct Case: Sendable, CustomTestStringConvertible {
        var recorded: String
        var endpoint: String
        var bucket: String
        var virtual: Bool
        var inBucket: Bool
        var testDescription: String { "\(recorded) in \(bucket) at \(endpoint)\(virtual ? " (virtual)" : ""): \(inBucket)" }
    }

    static let cases: [Case] = [
        .init(recorded: "http://127.0.0.1:9000/ferry/a.bin?uploadId=X", endpoint: "http://127.0.0.1:9000", bucket: "ferry", virtual: false, inBucket: true),
        .init(recorded: "http://127.0.0.1:9000/ferry/dir/a%20b.bin?uploadId=X", endpoint: "http://127.0.0.1:9000/", bucket: "ferry", virtual: false, inBucket: true),
        // The part size or checksum changed: the same bucket, so it is aborted.
        .init(recorded: "https://ferry.s3.eu-west-1.amazonaws.com/k?uploadId=X", endpoint: "https://s3.eu-west-1.amazonaws.com",
              bucket: "ferry", virtual: true, inBucket: true),
        .init(recorded: "https://FERRY.s3.eu-west-1.amazonaws.com/k?uploadId=X", endpoint: "https://s3.eu-west-1.amazonaws.com",
              bucket: "ferry", virtual: true, inBucket: true),
        // Another bucket, another host, port, scheme or path prefix: not ours to abort any more.
        .init(recorded: "http://127.0.0.1:9000/other/a.bin?uploadId=X", endpoint: "http://127.0.0.1:9000", bucket: "ferry", virtual: false, inBucket: false),
        .init(recorded: "http://127.0.0.1:9000/ferry-old/a.bin?uploadId=X", endpoint: "http://127.0.0.1:9000", bucket: "ferry", virtual: false, inBucket: false),
        .init(recorded: "http://127.0.0.1:9001/ferry/a.bin?uploadId=X", endpoint: "http://127.0.0.1:9000", bucket: "ferry", virtual: false, inBucket: false),
        .init(recorded: "http://old.example/ferry/a.bin?uploadId=X", endpoint: "http://new.example", bucket: "ferry", virtual: false, inBucket: false),
        .init(recorded: "http://s3.example/ferry/a.bin?uploadId=X", endpoint: "https://s3.example", bucket: "ferry", virtual: false, inBucket: false),
        .init(recorded: "https://gw.example/s3/ferry/k?uploadId=X", endpoint: "https://gw.example/v2", bucket: "ferry", virtual: false, inBucket: false),
        .init(recorded: "https://other.s3.eu-west-1.amazonaws.com/k?uploadId=X", endpoint: "https://s3.eu-west-1.amazonaws.com",
              bucket: "ferry", virtual: true, inBucket: false),
        // Path style then, virtual-hosted now: another host.
        .init(recorded: "https://s3.eu-west-1.amazonaws.com/ferry/k?uploadId=X", endpoint: "https://s3.eu-west-1.amazonaws.com",
              bucket: "ferry", virtual: true, inBucket: false),
        .init(recorded: "not a url", endpoint: "http://127.0.0.1:9000", bucket: "ferry", virtual: false, inBucket: false),
    ]

    @Test("an upload is in the configured bucket only on its scheme, host and path", arguments: cases)
    func inBucket(_ item: Case) throws {
        let bucket = try #require(S3ObjectAddress(endpoint: item.endpoint, bucket: item.bucket, key: "", virtualHosted: item.virtual))
        let recorded = S3ObjectAddress.parse(item.recorded)?.address
        #expect((recorded?.isInBucket(bucket) ?? false) == item.inBucket)
    }
}

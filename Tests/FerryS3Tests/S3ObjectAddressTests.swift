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

    @Test("the creation marker, the listing of a key's uploads, and the key back from a recorded URL")
    func creationMarker() throws {
        let path = try #require(S3ObjectAddress(endpoint: "http://127.0.0.1:9000", bucket: "ferry", key: "dir/a b+c.jpg", virtualHosted: false))
        #expect(path.creationMarker == "http://127.0.0.1:9000/ferry/dir/a%20b%2Bc.jpg?uploads")
        #expect(S3ObjectAddress.isCreationMarker(path.creationMarker))
        #expect(!S3ObjectAddress.isCreationMarker(path.uploadURL(uploadID: "U")))
        #expect(path.uploadsListingURL == "http://127.0.0.1:9000/ferry/?uploads&prefix=dir%2Fa%20b%2Bc.jpg")
        let virtual = try #require(S3ObjectAddress(endpoint: "https://s3.eu-west-1.amazonaws.com", bucket: "ferry", key: "k/ü", virtualHosted: true))
        #expect(virtual.uploadsListingURL == "https://ferry.s3.eu-west-1.amazonaws.com/?uploads&prefix=k%2F%C3%BC")
        let parsed = try #require(S3ObjectAddress.parse(path.creationMarker)?.address)
        #expect(parsed.uploadsListingURL == nil, "a parsed address does not know where its bucket ends")
        let bucket = try #require(S3ObjectAddress(endpoint: "http://127.0.0.1:9000", bucket: "ferry", key: "", virtualHosted: false))
        #expect(parsed.key(inBucket: bucket) == "dir/a b+c.jpg")
        let other = try #require(S3ObjectAddress(endpoint: "http://127.0.0.1:9000", bucket: "other", key: "", virtualHosted: false))
        #expect(parsed.key(inBucket: other) == nil)
    }

    @Test("ListMultipartUploads: only the uploads of exactly the key")
    func listedUploads() throws {
        let xml = """
            <?xml version="1.0" encoding="UTF-8"?>
            <ListMultipartUploadsResult xmlns="http://s3.amazonaws.com/doc/2006-03-01/"><Bucket>b</Bucket><Prefix>a&amp;b.bin</Prefix>
            <Upload><Key>a&amp;b.bin</Key><UploadId>U1</UploadId><Initiated>2026-11-27T08:00:00.000Z</Initiated></Upload>
            <Upload><Key>a&amp;b.bin.2</Key><UploadId>U2</UploadId></Upload>
            <Upload><Key>a&amp;b.bin</Key><UploadId>U3</UploadId></Upload>
            <IsTruncated>false</IsTruncated></ListMultipartUploadsResult>
            """
        let document = try #require(S3Document(Array(xml.utf8)))
        #expect(document.listedUploads(ofKey: "a&b.bin") == ["U1", "U3"])
        let empty = try #require(S3Document(Array("<ListMultipartUploadsResult><Bucket>b</Bucket></ListMultipartUploadsResult>".utf8)))
        #expect(empty.listedUploads(ofKey: "k") == [])
        let other = try #require(S3Document(Array("<ListPartsResult></ListPartsResult>".utf8)))
        #expect(other.listedUploads(ofKey: "k") == nil)
    }
}

@testable import FerryDaemon
import FerryS3
import Foundation
import Testing

/// The kept answer of a delivered S3 object (result file, `show`, hooks) names the key the object
/// was stored under, whatever the addressing and however the address was made.
@Suite("S3 object description: the key, in path-style and virtual-hosted addressing")
struct S3ObjectDescriptionTests {
    struct Case: Sendable, CustomTestStringConvertible {
        var endpoint: String
        var virtualHosted: Bool
        var key: String
        var testDescription: String { "\(virtualHosted ? "virtual" : "path") \(endpoint) \(key)" }
    }

    /// Keys that begin with the bucket's name, or hold characters that are encoded in the path.
    static let cases: [Case] = [
        Case(endpoint: "https://s3.eu-west-1.amazonaws.com", virtualHosted: true, key: "photos/2024/a.jpg"),
        Case(endpoint: "https://s3.eu-west-1.amazonaws.com", virtualHosted: true, key: "2024/a b+c.jpg"),
        Case(endpoint: "http://127.0.0.1:9000", virtualHosted: false, key: "photos/2024/a.jpg"),
        Case(endpoint: "http://127.0.0.1:9000", virtualHosted: false, key: "photos"),
        Case(endpoint: "http://127.0.0.1:9000/minio", virtualHosted: false, key: "photos/ü %2F.jpg"),
        Case(endpoint: "http://127.0.0.1:9000/minio/", virtualHosted: true, key: "dir//twice/"),
    ]

    static func describedKey(_ data: [UInt8]) throws -> String? {
        let object = try JSONSerialization.jsonObject(with: Data(data)) as? [String: Any]
        return object?["key"] as? String
    }

    @Test("the address made from the key template, and the one read back from a recorded upload", arguments: cases)
    func key(_ example: Case) throws {
        let address = try #require(S3ObjectAddress(endpoint: example.endpoint, bucket: "photos", key: example.key, virtualHosted: example.virtualHosted))
        let root = S3ObjectAddress(endpoint: example.endpoint, bucket: "photos", key: "", virtualHosted: example.virtualHosted)
        let made = S3Sender.objectDescription(bucket: "photos", object: address, bucketRoot: root, etag: "\"e\"", versionID: nil)
        #expect(try Self.describedKey(made) == example.key)
        let recorded = try #require(S3ObjectAddress.parse(address.url(query: "uploadId=u1"))?.address)
        let readBack = S3Sender.objectDescription(bucket: "photos", object: recorded, bucketRoot: root, etag: "\"e\"", versionID: nil)
        #expect(try Self.describedKey(readBack) == example.key)
    }
}

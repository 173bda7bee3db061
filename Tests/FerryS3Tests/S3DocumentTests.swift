import FerryS3
import Foundation
import Testing

@Suite("S3's XML documents and object addresses")
struct S3DocumentTests {
    @Test("an <Error> document gives its code and message, with or without a namespace")
    func error() throws {
        let aws = S3Document(Array("""
            <?xml version="1.0" encoding="UTF-8"?>
            <Error><Code>SignatureDoesNotMatch</Code><Message>The request signature we calculated does not match</Message><RequestId>4442587FB7D0A2F9</RequestId></Error>
            """.utf8))
        #expect(aws?.error?.code == "SignatureDoesNotMatch")
        #expect(aws?.error?.message == "The request signature we calculated does not match")
        let namespaced = S3Document(Array("<Error xmlns=\"http://s3.amazonaws.com/doc/2006-03-01/\"><Code>SlowDown</Code></Error>".utf8))
        #expect(namespaced?.error?.code == "SlowDown")
        #expect(S3Document(Array("not xml".utf8)) == nil)
        #expect(S3Document([]) == nil)
    }

    @Test("CreateMultipartUpload's UploadId")
    func uploadID() {
        let document = S3Document(Array("""
            <InitiateMultipartUploadResult xmlns="http://s3.amazonaws.com/doc/2006-03-01/"><Bucket>b</Bucket><Key>k</Key>
            <UploadId>VXBsb2FkIElEIGZvciA2aWWpbmcncyBteS1tb3ZpZS5tMnRzIHVwbG9hZA</UploadId></InitiateMultipartUploadResult>
            """.utf8))
        #expect(document?.uploadID == "VXBsb2FkIElEIGZvciA2aWWpbmcncyBteS1tb3ZpZS5tMnRzIHVwbG9hZA")
        #expect(document?.error == nil)
    }

    @Test("ListParts: parts with checksums, and the next page's marker when truncated")
    func listParts() throws {
        let document = try #require(S3Document(Array("""
            <ListPartsResult xmlns="http://s3.amazonaws.com/doc/2006-03-01/"><Bucket>b</Bucket><Key>k</Key><UploadId>u</UploadId>
            <PartNumberMarker>0</PartNumberMarker><NextPartNumberMarker>2</NextPartNumberMarker><MaxParts>2</MaxParts><IsTruncated>true</IsTruncated>
            <Part><PartNumber>1</PartNumber><ETag>&quot;7778aef83f66abc1fa1e8477f296d394&quot;</ETag><Size>8388608</Size><ChecksumCRC32C>yZRlqg==</ChecksumCRC32C></Part>
            <Part><PartNumber>2</PartNumber><ETag>"aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"</ETag><Size>8388608</Size></Part>
            </ListPartsResult>
            """.utf8)))
        let (parts, next) = try #require(document.listedParts(checksum: .crc32c))
        #expect(parts.count == 2)
        #expect(parts[0] == S3Document.ListedPart(number: 1, size: 8_388_608, etag: "\"7778aef83f66abc1fa1e8477f296d394\"", checksum: "yZRlqg=="))
        #expect(parts[1].checksum == nil)
        #expect(next == 2)
        let last = try #require(S3Document(Array("<ListPartsResult><IsTruncated>false</IsTruncated></ListPartsResult>".utf8)))
        #expect(last.listedParts(checksum: nil)?.next == nil)
    }

    @Test("CompleteMultipartUpload: the result, and an error inside a 200")
    func complete() {
        let done = S3Document(Array("""
            <CompleteMultipartUploadResult><Location>http://x/b/k</Location><Bucket>b</Bucket><Key>k</Key><ETag>"3858f62230ac3c915f300c664312c11f-9"</ETag>
            <ChecksumCRC32C>AAAAAA==-9</ChecksumCRC32C></CompleteMultipartUploadResult>
            """.utf8))
        #expect(done?.completedObject(checksum: .crc32c)?.etag == "\"3858f62230ac3c915f300c664312c11f-9\"")
        #expect(done?.completedObject(checksum: .crc32c)?.checksum == "AAAAAA==-9")
        let failed = S3Document(Array("<?xml version=\"1.0\"?>\n<Error><Code>InternalError</Code><Message>We encountered an internal error. Please try again.</Message></Error>".utf8))
        #expect(failed?.completedObject(checksum: nil) == nil)
        #expect(failed?.error?.code == "InternalError")
    }

    @Test("a completion's answer after S3's keep-alive whitespace (before or after the XML declaration) is read")
    func keepAliveWhitespace() {
        let declaration = "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n"
        let result = "<CompleteMultipartUploadResult><Bucket>b</Bucket><Key>k</Key><ETag>\"3858f62230ac3c915f300c664312c11f-9\"</ETag></CompleteMultipartUploadResult>"
        let error = "<Error><Code>InternalError</Code><Message>We encountered an internal error. Please try again.</Message></Error>"
        for padding in ["", " ", "    \n", " \r\n \n\r\t "] {
            for body in [padding + declaration + result, declaration + padding + result, padding + result] {
                #expect(S3Document(Array(body.utf8))?.completedObject(checksum: nil)?.etag == "\"3858f62230ac3c915f300c664312c11f-9\"", "\(body.debugDescription)")
            }
            for body in [padding + declaration + error, declaration + padding + error] {
                #expect(S3Document(Array(body.utf8))?.error?.code == "InternalError", "\(body.debugDescription)")
            }
        }
        #expect(S3Document(Array("   \n  ".utf8)) == nil, "whitespace alone (the answer cut before its document) is no document")
    }

    @Test("the completion body lists every part in order, escaped")
    func completionBody() {
        let body = String(decoding: S3Document.completion([(1, "\"a&b\"", "c1=="), (2, "\"d\"", nil)], checksum: .crc32c), as: UTF8.self)
        #expect(body == "<CompleteMultipartUpload xmlns=\"http://s3.amazonaws.com/doc/2006-03-01/\"><Part><PartNumber>1</PartNumber><ETag>&quot;a&amp;b&quot;</ETag><ChecksumCRC32C>c1==</ChecksumCRC32C></Part><Part><PartNumber>2</PartNumber><ETag>&quot;d&quot;</ETag></Part></CompleteMultipartUpload>")
    }

    @Test("object addresses: path and virtual-hosted style, ports, encoded keys")
    func addresses() throws {
        let path = try #require(S3ObjectAddress(endpoint: "http://127.0.0.1:9000", bucket: "ferry", key: "dir/a b+c.jpg", virtualHosted: false))
        #expect(path.url == "http://127.0.0.1:9000/ferry/dir/a%20b%2Bc.jpg")
        #expect(path.host == "127.0.0.1:9000")
        let virtual = try #require(S3ObjectAddress(endpoint: "https://s3.eu-west-1.amazonaws.com:443/", bucket: "ferry", key: "ü", virtualHosted: true))
        #expect(virtual.url == "https://ferry.s3.eu-west-1.amazonaws.com/%C3%BC")
        #expect(virtual.uploadURL(uploadID: "a/b=") == "https://ferry.s3.eu-west-1.amazonaws.com/%C3%BC?uploadId=a%2Fb%3D")
        let prefixed = try #require(S3ObjectAddress(endpoint: "https://gw.example/s3/", bucket: "b1", key: "k", virtualHosted: false))
        #expect(prefixed.path == "/s3/b1/k")
        let (parsed, query) = try #require(S3ObjectAddress.parse(path.uploadURL(uploadID: "X")))
        #expect(parsed == path)
        #expect(query == "uploadId=X")
    }
}

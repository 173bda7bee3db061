import FerryConfig
import Testing

@Suite("protocol = \"s3\" configuration")
struct S3ConfigurationTests {
    static let s3Spool = """
        [[spool]]
        name = "archives"
        directory = "/srv/spool"
        url = "https://s3.eu-west-1.amazonaws.com"
        protocol = "s3"
        bucket = "acme-archives"
        access_key_id = "AKIAEXAMPLE"
        secret_access_key = "${env:AWS_SECRET_ACCESS_KEY}"
        """

    static let environment = ["AWS_SECRET_ACCESS_KEY": "wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY"]

    @Test("defaults: key {relative_path}, us-east-1, virtual addressing on AWS, 16 MiB parts, crc32c")
    func defaults() throws {
        let configuration = try loader(environment: Self.environment).parse(Self.s3Spool, path: "/etc/ferry/ferry.toml")
        let s3 = try #require(configuration.spools.first?.s3)
        #expect(s3.bucket == "acme-archives")
        #expect(s3.key.placeholders == [.relativePath])
        #expect(s3.region == "us-east-1")
        #expect(s3.addressing == .virtual)
        #expect(s3.partSize == 16 << 20 && s3.multipartThreshold == 16 << 20)
        #expect(s3.checksum == .crc32c)
        #expect(s3.partConcurrency == 1, "one part at a time: a cut costs at most one part")
        #expect(s3.secretAccessKey.containsSecret)
        #expect(s3.secretAccessKey.redacted == "***")
        let local = try loader(environment: Self.environment).parse(
            Self.s3Spool.replacingOccurrences(of: "https://s3.eu-west-1.amazonaws.com", with: "http://127.0.0.1:9000"), path: "/etc/ferry/ferry.toml")
        #expect(local.spools.first?.s3?.addressing == .path, "path-style off AWS")
        let dotted = try loader(environment: Self.environment).parse(
            Self.s3Spool.replacingOccurrences(of: "acme-archives", with: "acme.archives"), path: "/etc/ferry/ferry.toml")
        #expect(dotted.spools.first?.s3?.addressing == .path, "a bucket with dots is no TLS host name under AWS's certificates")
        let dottedPlain = try loader(environment: Self.environment).parse(
            Self.s3Spool.replacingOccurrences(of: "acme-archives", with: "acme.archives").replacingOccurrences(of: "https:", with: "http:"),
            path: "/etc/ferry/ferry.toml")
        #expect(dottedPlain.spools.first?.s3?.addressing == .virtual, "over plain HTTP no certificate is checked")
    }

    @Test("mistakes name the file, line and key, and say what to write", arguments: [
        ("part_size = \"1MiB\"", "spool[0].part_size: 1048576 bytes is too small"),
        ("checksum = \"md5\"", "checksum must be \"crc32c\", \"sha256\" or \"none\""),
        ("addressing = \"dns\"", "addressing must be \"path\" or \"virtual\""),
        ("key = \"/abs/{filename}\"", "must not start with '/'"),
        ("key = \"fixed.txt\"", "names no file"),
        ("method = \"POST\"", "method does not apply to protocol \"s3\""),
        ("region = \"EU West\"", "is not a region name"),
        ("storage_class = \"cheap one\"", "is not a storage class"),
        ("part_concurrency = 0", "spool[0].part_concurrency: 0 is out of range; use 1 to 8"),
        ("part_concurrency = 16", "spool[0].part_concurrency: 16 is out of range; use 1 to 8"),
        ("multipart_threshold = \"6GiB\"", "spool[0].multipart_threshold: 6442450944 bytes is more than S3 takes in one PutObject (5 GiB)"),
    ])
    func mistakes(_ line: String, _ message: String) {
        expectOneIssue(Self.s3Spool + "\n" + line, message, loader: loader(environment: Self.environment))
    }

    @Test("bucket and credentials are required; an empty secret is named")
    func required() {
        let noBucket = issues(Self.s3Spool.replacingOccurrences(of: "bucket = \"acme-archives\"\n", with: ""), loader: loader(environment: Self.environment))
        #expect(noBucket.map(\.description).contains { $0.contains("spool[0].bucket") })
        let emptySecret = issues(Self.s3Spool, loader: loader(environment: ["AWS_SECRET_ACCESS_KEY": ""])).map(\.description)
        #expect(emptySecret.contains { $0.contains("secret_access_key") }, "\(emptySecret)")
        #expect(!emptySecret.joined().contains("wJalr"))
    }

    @Test("a url from a secret is checked and sets the default addressing as a written one does")
    func urlFromSecret() throws {
        let spool = Self.s3Spool.replacingOccurrences(of: "url = \"https://s3.eu-west-1.amazonaws.com\"", with: "url = \"${env:S3_ENDPOINT}\"")
        let aws = try loader(environment: Self.environment.merging(["S3_ENDPOINT": "https://s3.eu-west-1.amazonaws.com"]) { $1 })
            .parse(spool, path: "/etc/ferry/ferry.toml")
        #expect(aws.spools.first?.s3?.addressing == .virtual)
        let withPath = issues(spool, loader: loader(environment: Self.environment.merging(["S3_ENDPOINT": "https://s3.eu-west-1.amazonaws.com/x?y=1"]) { $1 }))
        #expect(withPath.map(\.description).contains { $0.contains("url is the endpoint only") }, "\(withPath)")
        #expect(!withPath.map(\.description).contains { $0.contains("x?y=1") }, "a secret's value is not quoted")
    }

    @Test("the endpoint has no path; virtual addressing needs a DNS bucket name; metadata names are lowercase")
    func endpointAndNames() {
        let withPath = issues(Self.s3Spool.replacingOccurrences(of: "amazonaws.com\"", with: "amazonaws.com/acme-archives\""),
                              loader: loader(environment: Self.environment)).map(\.description)
        #expect(withPath.contains { $0.contains("url is the endpoint only") }, "\(withPath)")
        let underscore = issues(Self.s3Spool.replacingOccurrences(of: "acme-archives", with: "acme_archives"),
                                loader: loader(environment: Self.environment)).map(\.description)
        #expect(underscore.contains { $0.contains("cannot be a host name") }, "\(underscore)")
        let dottedVirtual = issues(Self.s3Spool.replacingOccurrences(of: "acme-archives", with: "acme.archives") + "\naddressing = \"virtual\"",
                                   loader: loader(environment: Self.environment)).map(\.description)
        #expect(dottedVirtual.contains { $0.contains("spool[0].addressing: bucket \"acme.archives\" has dots") && $0.contains("use addressing = \"path\"") },
                "\(dottedVirtual)")
        let field = issues(Self.s3Spool + "\n  [spool.fields]\n  Camera = \"north\"", loader: loader(environment: Self.environment)).map(\.description)
        #expect(field.contains { $0.contains("x-amz-meta-Camera") }, "\(field)")
        let header = issues(Self.s3Spool + "\n  [spool.headers]\n  x-amz-meta-camera = \"north\"", loader: loader(environment: Self.environment)).map(\.description)
        #expect(header.contains { $0.contains("set it in [spool.fields]") }, "\(header)")
    }

    @Test("s3 keys in a spool of another protocol are refused")
    func s3KeysElsewhere() {
        let found = issues(minimalSpool + "\nbucket = \"b\"\npart_size = \"8MiB\"").map(\.description)
        #expect(found.contains { $0.contains("spool[0].bucket: bucket applies only to protocol \"s3\"") }, "\(found)")
        #expect(found.contains { $0.contains("part_size applies only to protocol \"s3\"") })
    }
}

import FerryConfig
import Testing

@Suite("Configuration of what follows delivery: result headers and files, hooks, digests, retry statuses")
struct AfterDeliveryConfigurationTests {
    static let spool = """
        [[spool]]
        name = "scans"
        directory = "/srv/spool"
        url = "https://ingest.example/api/v2/media"
        """

    @Test("defaults: the four kept headers, no result files, no hooks, no digest, today's retry statuses")
    func defaults() throws {
        let configuration = try loader().parse(Self.spool, path: "/etc/ferry/ferry.toml")
        let spool = try #require(configuration.spools.first)
        #expect(spool.resultHeaders == ["location", "etag", "content-type", "content-location"])
        #expect(spool.resultDirectory == nil && spool.digest == nil)
        #expect(spool.hooks.onDelivered == nil && spool.hooks.onFailed == nil)
        #expect(spool.hooks.timeout == .seconds(30) && spool.hooks.maxAttempts == 5 && spool.hooks.workingDirectory == "/")
        #expect(spool.retry.retryStatuses == [408, 423, 425, 429, 500, 502, 503, 504, 507, 509, 520, 521, 522, 523, 524, 529, 530])
        #expect(configuration.maxConcurrentHooks == 2)
    }

    @Test("everything set")
    func everything() throws {
        let text = """
            max_concurrent_hooks = 4
            \(Self.spool)
            result_headers = ["X-Request-Id", "Location"]
            result_directory = "/srv/results"
            digest = "sha-512"
            hook_max_attempts = 9
            [spool.hooks]
            on_delivered = ["/usr/local/bin/notify", "--job", "{id}", "--file={filename}"]
            on_failed = ["/usr/local/bin/alert"]
            timeout = "5s"
            working_directory = "/var/lib/ferry"
            [spool.retry]
            statuses = [429, 503, 409]
            """
        let configuration = try loader().parse(text, path: "/etc/ferry/ferry.toml")
        let spool = try #require(configuration.spools.first)
        #expect(configuration.maxConcurrentHooks == 4)
        #expect(spool.resultHeaders == ["location", "etag", "content-type", "content-location", "x-request-id"])
        #expect(spool.resultDirectory == "/srv/results")
        #expect(spool.digest == .sha512)
        #expect(spool.hooks.maxAttempts == 9 && spool.hooks.timeout == .seconds(5) && spool.hooks.workingDirectory == "/var/lib/ferry")
        #expect(spool.hooks.onDelivered?.map(\.redacted) == ["/usr/local/bin/notify", "--job", "{id}", "--file={filename}"])
        #expect(spool.hooks.onFailed?.count == 1)
        #expect(spool.retry.retryStatuses == [429, 503, 409])
    }

    @Test("mistakes name the file, line and key, and say what to write", arguments: [
        ("digest = \"md5\"", "spool[0].digest: digest must be \"sha-256\" or \"sha-512\""),
        ("result_headers = \"Location\"", "spool[0].result_headers: expected an array of header names"),
        ("result_headers = [\"X Request\"]", "is not a header name"),
        ("hook_max_attempts = 0", "spool[0].hook_max_attempts: 0 is out of range"),
        ("[spool.hooks]\non_delivered = \"/bin/notify {id}\"", "spool[0].hooks.on_delivered: expected a non-empty array of strings"),
        ("[spool.hooks]\non_delivered = []", "expected a non-empty array"),
        ("[spool.hooks]\non_delivered = [\"notify\", \"{id}\"]", "spool[0].hooks.on_delivered[0]: the program must be an absolute path"),
        ("[spool.hooks]\non_failed = [\"/bin/alert\", 3]", "spool[0].hooks.on_failed[1]: expected a string"),
        ("[spool.hooks]\non_failed = [\"/bin/alert\", \"--token=${env:TOKEN}\"]", "a secret cannot be passed on a hook's command line"),
        ("[spool.hooks]\non_failed = [\"/bin/alert\", \"{sha256}\"]", "{sha256} cannot be used in a hook's arguments"),
        ("[spool.hooks]\ntimeout = \"forever\"", "spool[0].hooks.timeout: expected a duration"),
        ("[spool.hooks]\nrun = [\"/bin/x\"]", "unknown key \"run\""),
        ("[spool.retry]\nstatuses = [200]", "spool[0].retry.statuses[0]: 200 cannot be retried: a 2xx is a delivery"),
        ("[spool.retry]\nstatuses = [302]", "302 cannot be retried: only 4xx and 5xx answers can be retried"),
        ("[spool.retry]\nstatuses = [\"503\"]", "expected a status number such as 503"),
        ("[spool.retry]\nstatuses = 503", "expected an array of HTTP statuses"),
    ])
    func mistakes(_ lines: String, _ message: String) {
        expectOneIssue(Self.spool + "\n" + lines, message, loader: loader(environment: ["TOKEN": "t"]))
    }

    @Test("digest does not apply to s3 (its own checksums) nor, yet, to the resumable protocol")
    func digestProtocols() {
        let s3 = issues("""
            [[spool]]
            name = "a"
            directory = "/srv/a"
            url = "http://127.0.0.1:9000"
            protocol = "s3"
            bucket = "bucket"
            access_key_id = "k"
            secret_access_key = "s"
            digest = "sha-256"
            """).map(\.description)
        #expect(s3.count == 1 && s3[0].contains("S3 checks every part with its own checksum"), "\(s3)")
        let resumable = issues(Self.spool + "\nprotocol = \"resumable\"\ndigest = \"sha-256\"").map(\.description)
        #expect(resumable.count == 1 && resumable[0].contains("not supported with protocol \"resumable\""), "\(resumable)")
    }

    @Test("a result_directory a spool watches is refused: its files would be uploaded without end")
    func resultDirectoryWatched() {
        let own = issues(Self.spool + "\nresult_directory = \"/srv/spool\"").map(\.description)
        #expect(own.count == 1 && own[0].contains("spool[0].result_directory: result_directory /srv/spool is watched by spool \"scans\""), "\(own)")
        let recursive = issues(Self.spool + "\nrecursive = true\nresult_directory = \"/srv/spool/results\"").map(\.description)
        #expect(recursive.count == 1 && recursive[0].contains("is watched by spool"), "\(recursive)")
        #expect(throws: Never.self, "a dot-directory is never entered") {
            try loader().parse(Self.spool + "\nrecursive = true\nresult_directory = \"/srv/spool/.results\"", path: "/etc/ferry/ferry.toml")
        }
        #expect(throws: Never.self, "a subdirectory of a spool that is not recursive is not watched") {
            try loader().parse(Self.spool + "\nresult_directory = \"/srv/spool/results\"", path: "/etc/ferry/ferry.toml")
        }
    }

    @Test("max_concurrent_hooks is bounded")
    func concurrentHooks() {
        let found = issues("max_concurrent_hooks = 0\n" + Self.spool).map(\.description)
        #expect(found.count == 1 && found[0].contains("max_concurrent_hooks: 0 is out of range"), "\(found)")
    }
}

@testable import FerryConfig
import Foundation
import Testing

/// A loader with a fixed environment and in-memory secret files.
func loader(environment: [String: String] = [:], credentials: String? = nil, files: [String: String] = [:]) -> ConfigurationLoader {
    ConfigurationLoader(secrets: SecretSources(
        environment: environment, credentialsDirectory: credentials,
        readFile: { path throws(SecretSources.SecretReadError) in
            guard let text = files[path] else { throw SecretSources.SecretReadError(message: "cannot read \(path): No such file or directory") }
            return text
        }))
}

/// Parses `text` and returns the issues, or records a failure if it parsed.
func issues(_ text: String, loader: ConfigurationLoader = loader(), sourceLocation: SourceLocation = #_sourceLocation) -> [ConfigurationIssue] {
    do {
        _ = try loader.parse(text, path: "/etc/ferry/ferry.toml")
        Issue.record("expected the configuration to be rejected", sourceLocation: sourceLocation)
        return []
    } catch {
        return error.issues
    }
}

/// Expects `text` to be refused with exactly one issue, naming the file and line, that contains `message`.
func expectOneIssue(
    _ text: String, _ message: String, loader: ConfigurationLoader = loader(), sourceLocation: SourceLocation = #_sourceLocation
) {
    let found = issues(text, loader: loader, sourceLocation: sourceLocation).map(\.description)
    #expect(found.count == 1 && found[0].hasPrefix("/etc/ferry/ferry.toml:") && found[0].contains(message), "\(found)",
            sourceLocation: sourceLocation)
}

/// The issues of a one-spool file whose `url` is `url`; the URL is on line 4.
func urlIssues(_ url: String, sourceLocation: SourceLocation = #_sourceLocation) -> [ConfigurationIssue] {
    issues("""
        [[spool]]
        name = "media"
        directory = "/srv/spool"
        url = "\(url)"
        """, sourceLocation: sourceLocation)
}

let minimalSpool = """
    [[spool]]
    name = "media"
    directory = "/srv/spool"
    url = "https://example.org/upload"
    """

@Suite("Configuration")
struct ConfigurationTests {
    @Test("The shipped example configuration is valid")
    func exampleFile() throws {
        let path = URL(fileURLWithPath: #filePath).deletingLastPathComponent().appendingPathComponent("../../etc/ferry/ferry.toml").standardized.path
        let configuration = try loader(credentials: "/run/credentials/ferryd.service", files: ["/run/credentials/ferryd.service/media-token": "s3cret\n"])
            .load(path: path)
        #expect(configuration.stateDirectory == "/var/lib/ferry")
        #expect(configuration.controlSocket == "/run/ferry/control.sock")
        #expect(configuration.maxConcurrentUploads == 8)
        let spool = try #require(configuration.spools.first)
        #expect(spool.name == "media")
        #expect(spool.method == "POST")
        #expect(spool.settle == .seconds(2))
        #expect(spool.afterUpload == .delete)
        #expect(spool.failedDirectory == "/var/spool/ferry/media/.failed")
        #expect(spool.retry == RetryPolicy(initialDelay: .seconds(1), maxDelay: .seconds(300), maxAttempts: 0, maxAge: .seconds(5 * 86_400)))
        #expect(spool.headers.first?.value.text == "Bearer s3cret")
        #expect(spool.headers.first?.value.containsSecret == true)
        #expect(spool.fields.first?.value.render { _ in "a.jpg" } == "Uploaded a.jpg")
    }

    @Test("Defaults apply when keys are left out")
    func defaults() throws {
        let configuration = try loader().parse(minimalSpool, path: "/etc/ferry/ferry.toml")
        #expect(configuration.stateDirectory == "/var/lib/ferry")
        #expect(configuration.controlSocket == "/run/ferry/control.sock")
        #expect(configuration.maxConcurrentUploads == 8)
        #expect(configuration.logLevel == .info)
        #expect(configuration.jobRetention == .seconds(30 * 86_400))
        let spool = try #require(configuration.spools.first)
        #expect(spool.fileField == "file")
        #expect(spool.method == "POST")
        #expect(spool.afterUpload == .delete)
        #expect(spool.failedDirectory == "/srv/spool/.failed")
        #expect(spool.sentDirectory == "/srv/spool/.sent")
        #expect(spool.recursive == false)
        #expect(spool.connectTimeout == .seconds(10))
        #expect(spool.noProgressTimeout == .seconds(60))
    }

    @Test("job_retention: a duration of at least a minute")
    func jobRetention() throws {
        let configuration = try loader().parse("job_retention = \"7d12h\"\n" + minimalSpool, path: "/etc/ferry/ferry.toml")
        #expect(configuration.jobRetention == .seconds(7 * 86_400 + 12 * 3_600))
        let short = issues("job_retention = \"30s\"\n" + minimalSpool).map(\.description)
        #expect(short.count == 1 && short[0].contains("/etc/ferry/ferry.toml:1") && short[0].contains("job_retention")
            && short[0].contains("too short"), "\(short)")
        let wrong = issues("job_retention = \"forever\"\n" + minimalSpool).map(\.description)
        #expect(wrong.count == 1 && wrong[0].contains("job_retention"), "\(wrong)")
    }

    @Test("An unknown key is an error naming the file, line and key, with a suggestion")
    func unknownKey() {
        let found = issues("""
            state_directory = "/var/lib/ferry"
            max_concurent_uploads = 4
            \(minimalSpool)
            after_uplaod = "keep"
              [spool.retry]
              max_dealy = "5m"
            """)
        #expect(found.map(\.description) == [
            "/etc/ferry/ferry.toml:2: max_concurent_uploads: unknown key \"max_concurent_uploads\" (did you mean \"max_concurrent_uploads\"?)",
            "/etc/ferry/ferry.toml:7: spool[0].after_uplaod: unknown key \"after_uplaod\" (did you mean \"after_upload\"?)",
            "/etc/ferry/ferry.toml:9: spool[0].retry.max_dealy: unknown key \"max_dealy\" (did you mean \"max_delay\"?)",
        ])
    }

    @Test("A value of the wrong type names its key and both types")
    func wrongType() {
        let found = issues("""
            max_concurrent_uploads = "4"
            \(minimalSpool)
            recursive = "yes"
            """)
        #expect(found.map(\.description) == [
            "/etc/ferry/ferry.toml:1: max_concurrent_uploads: expected an integer, got a string",
            "/etc/ferry/ferry.toml:6: spool[0].recursive: expected a boolean, got a string",
        ])
    }

    @Test("A TOML syntax error gives its line")
    func syntaxError() {
        let found = issues("""
            log_level = "info"
            max_concurrent_uploads = = 4
            """)
        #expect(found.count == 1)
        #expect(found.first?.line == 2)
        #expect(found.first?.description.hasPrefix("/etc/ferry/ferry.toml:2: TOML syntax error") == true)
    }

    @Test("Durations: 500ms, 2s, 5m, 1h, 5d and sums; anything else is an error")
    func durations() {
        #expect(DurationParser.parse("500ms") == .milliseconds(500))
        #expect(DurationParser.parse("2s") == .seconds(2))
        #expect(DurationParser.parse("5m") == .seconds(300))
        #expect(DurationParser.parse("1h") == .seconds(3600))
        #expect(DurationParser.parse("5d") == .seconds(432_000))
        #expect(DurationParser.parse("1h30m") == .seconds(5400))
        #expect(DurationParser.parse("0s") == .zero)
        for bad in ["", "5", "five seconds", "5 minutes", "1.5s", "-1s", "5x", "s"] {
            #expect(DurationParser.parse(bad) == nil, "\(bad) should not parse")
        }
        #expect(DurationParser.format(.seconds(5400)) == "1h30m")
        let found = issues("""
            \(minimalSpool)
            settle = "2 seconds"
            """)
        #expect(found.map(\.description) == [
            "/etc/ferry/ferry.toml:5: spool[0].settle: expected a duration such as \"500ms\", \"2s\", \"5m\", \"1h\" or \"5d\", got \"2 seconds\"",
        ])
    }

    @Test("CR, LF or NUL in a header or field value is rejected at load", arguments: [
        ("[spool.headers]\nX-Token = \"abc\\r\\nX-Evil: 1\"", "spool[0].headers.X-Token"),
        ("[spool.headers]\nX-Token = \"abc\\n\"", "spool[0].headers.X-Token"),
        ("[spool.fields]\ndescription = \"two\\nlines\"", "spool[0].fields.description"),
        ("[spool.fields]\n\"bad\\rname\" = \"x\"", "spool[0].fields.\"bad\rname\""),
    ])
    func controlCharacters(section: String, key: String) {
        let found = issues("\(minimalSpool)\n\(section)")
        #expect(found.count == 1)
        #expect(found.first?.keyPath == key)
        #expect(found.first?.line == 6)
        #expect(found.first?.message.contains("may not contain CR, LF or NUL") == true)
    }

    @Test("An escaped NUL is refused (it would silently cut the value short)")
    func escapedNUL() {
        let found = issues("\(minimalSpool)\n[spool.headers]\nX-Token = \"a\\u0000b\"")
        #expect(found.map(\.description) == ["/etc/ferry/ferry.toml:6: a NUL character (\\u0000) is not allowed in any value"])
    }

    @Test("Headers that Ferry sets itself cannot be configured", arguments: ["Content-Type", "content-length", "Host", "Idempotency-Key", "Transfer-Encoding", "User-Agent"])
    func reservedHeaders(name: String) {
        let found = issues("\(minimalSpool)\n[spool.headers]\n\(name) = \"x\"")
        #expect(found.first?.message == "header \(name) is set by Ferry and cannot be configured")
    }

    @Test("A header given twice in different case is refused (both would be sent)")
    func headerTwiceInCase() {
        let found = issues("\(minimalSpool)\n[spool.headers]\nAuthorization = \"Bearer a\"\nauthorization = \"Bearer b\"")
        #expect(found.count == 1)
        #expect(found.first?.message.contains("header names ignore case, so give it once") == true, "\(found)")
    }

    @Test("send_headers_to takes origins only: a port out of range or a fragment is refused", arguments: [
        "https://cdn.example:0", "https://cdn.example:99999", "https://cdn.example#x", "https://cdn.example/path",
    ])
    func sendHeadersToOrigins(origin: String) {
        let found = issues("\(minimalSpool)\nsend_headers_to = [\"\(origin)\"]")
        #expect(found.first?.message.contains("is not an origin") == true, "\(found)")
    }

    @Test("Missing required keys are named")
    func requiredKeys() {
        let found = issues("""
            [[spool]]
            name = "media"
            """)
        #expect(found.map(\.description) == [
            "/etc/ferry/ferry.toml:1: spool[0].directory: required key \"directory\" is missing",
            "/etc/ferry/ferry.toml:1: spool[0].url: required key \"url\" is missing",
        ])
    }

    @Test("A configuration with no spool is refused")
    func noSpool() {
        let found = issues("log_level = \"info\"")
        #expect(found.first?.message.contains("no [[spool]] is configured") == true)
    }

    @Test("Every problem is reported at once, in file order")
    func manyProblems() {
        let found = issues("""
            log_level = "loud"
            [[spool]]
            name = "Media!"
            directory = "/a"
            url = "ftp://example.org/"
            method = "PATCH"
            after_upload = "shred"
            [[spool]]
            name = "two"
            directory = "/a"
            url = "not a url"
            """)
        #expect(found.map(\.line) == [1, 3, 5, 6, 7, 11])
        #expect(found[0].message.hasPrefix("unknown log level \"loud\""))
        #expect(found[1].message.contains("not a valid spool name"))
        #expect(found[2].message.contains("must start with http:// or https://"))
        #expect(found[3].message == "method must be \"POST\" or \"PUT\", not \"PATCH\"")
        #expect(found[4].message.contains("\"delete\", \"keep\" or \"move\""))
        #expect(found[5].keyPath == "spool[1].url")
    }

    @Test("Two spools watching the same directory are refused")
    func duplicateDirectories() {
        let found = issues("""
            \(minimalSpool)
            [[spool]]
            name = "other"
            directory = "/srv/./spool/"
            url = "https://example.org/upload"
            """)
        #expect(found.map(\.description) == ["/etc/ferry/ferry.toml:7: spool[1].directory: directory /srv/spool is already watched by spool \"media\""])
    }

    @Test("A state directory inside a spool is refused: Ferry would upload its own queue")
    func stateInsideSpool() {
        let found = issues("""
            state_directory = "/srv/spool/state"
            \(minimalSpool)
            """)
        #expect(found.map(\.description) == [
            "/etc/ferry/ferry.toml:1: state_directory: state_directory /srv/spool/state is inside spool \"media\" (/srv/spool); Ferry would upload its own queue — put it elsewhere, e.g. /var/lib/ferry",
        ])
        #expect(issues("state_directory = \"/srv/spool\"\n\(minimalSpool)").count == 1)
    }

    @Test("A spool inside a recursive spool, or a failed directory another spool watches, is refused")
    func nestedSpools() {
        let nested = issues("""
            [[spool]]
            name = "outer"
            directory = "/srv/spool"
            url = "https://example.org/a"
            recursive = true
            [[spool]]
            name = "inner"
            directory = "/srv/spool/inner"
            url = "https://example.org/b"
            """)
        #expect(nested.map(\.keyPath) == ["spool[1].directory"])
        #expect(nested.first?.message.contains("would be uploaded twice") == true)
        // Not recursive: fine (the outer spool never enters subdirectories).
        #expect(throws: Never.self) {
            _ = try loader().parse("""
                [[spool]]
                name = "outer"
                directory = "/srv/spool"
                url = "https://example.org/a"
                [[spool]]
                name = "inner"
                directory = "/srv/spool/inner"
                url = "https://example.org/b"
                """, path: "/x.toml")
        }
        let crossed = issues("""
            [[spool]]
            name = "a"
            directory = "/srv/a"
            url = "https://example.org/a"
            failed_directory = "/srv/b"
            [[spool]]
            name = "b"
            directory = "/srv/b"
            url = "https://example.org/b"
            """)
        #expect(crossed.map(\.keyPath) == ["spool[0].failed_directory"])
    }

    @Test("Durations longer than a year and URLs with spaces are refused")
    func limits() {
        let found = issues("""
            \(minimalSpool)
            no_progress_timeout = "200000d"
            """)
        #expect(found.first?.message == "\"200000d\" is too long; the most is 365d")
        let url = issues("""
            [[spool]]
            name = "media"
            directory = "/srv/spool"
            url = "https://example.org/a b"
            """)
        #expect(url.first?.message.contains("contains a space or control character") == true)
    }

    @Test("Two spools with the same name are refused")
    func duplicateNames() {
        let found = issues("""
            \(minimalSpool)
            [[spool]]
            name = "media"
            directory = "/srv/other"
            url = "https://example.org/upload"
            """)
        #expect(found.map(\.description) == ["/etc/ferry/ferry.toml:6: spool[1].name: spool name \"media\" is already used by spool[0]"])
    }

    @Test("max_delay shorter than initial_delay is refused")
    func retryBounds() {
        let found = issues("\(minimalSpool)\n[spool.retry]\ninitial_delay = \"10s\"\nmax_delay = \"1s\"")
        #expect(found.first?.keyPath == "spool[0].retry.max_delay")
    }

    @Test("Relative paths are resolved against the configuration file's directory")
    func relativePaths() throws {
        let configuration = try loader().parse("""
            state_directory = "state"
            [[spool]]
            name = "a"
            directory = "spool/a"
            url = "http://127.0.0.1:8080/"
            failed_directory = "../failed"
            """, path: "/opt/ferry/ferry.toml")
        #expect(configuration.stateDirectory == "/opt/ferry/state")
        #expect(configuration.spools[0].directory == "/opt/ferry/spool/a")
        #expect(configuration.spools[0].failedDirectory == "/opt/failed")
    }

    @Test("metrics_listen: off by default; IPv4, [IPv6] or localhost with a port")
    func metricsListen() throws {
        #expect(try loader().parse(minimalSpool, path: "/x.toml").metricsListen == nil)
        for (text, host, port, shown) in [
            ("127.0.0.1:9464", "127.0.0.1", 9464, "127.0.0.1:9464"),
            ("[::1]:9464", "::1", 9464, "[::1]:9464"),
            ("localhost:1", "127.0.0.1", 1, "127.0.0.1:1"),
            ("0.0.0.0:65535", "0.0.0.0", 65535, "0.0.0.0:65535"),
        ] {
            let configuration = try loader().parse("metrics_listen = \"\(text)\"\n" + minimalSpool, path: "/x.toml")
            #expect(configuration.metricsListen == ListenAddress(host: host, port: port), "\(text)")
            #expect(configuration.metricsListen?.description == shown)
        }
    }

    @Test("A bad metrics_listen is an error naming the file, line and key")
    func badMetricsListen() {
        for bad in ["9464", "127.0.0.1", "127.0.0.1:0", "127.0.0.1:65536", "127.0.0.1:http", "example.org:9464",
                    "::1:9464", "[::1]9464", "[127.0.0.1]:9464", ":9464", "127.0.0.1:-1", "127.0.0.1:9464 "] {
            let found = issues("""
                log_level = "info"
                metrics_listen = "\(bad)"
                \(minimalSpool)
                """)
            #expect(found.count == 1, "\(bad)")
            #expect(found.first?.description.hasPrefix("/etc/ferry/ferry.toml:2: metrics_listen: ") == true, "\(found)")
            #expect(found.first?.message.contains("HOST:PORT") == true, "\(found)")
        }
        #expect(issues("metrics_listen = 9464\n" + minimalSpool).map(\.description)
                == ["/etc/ferry/ferry.toml:1: metrics_listen: expected a string, got an integer"])
        #expect(issues("metrics_listen = \"::1:9464\"\n" + minimalSpool).first?.message.contains("[::1]:9464") == true)
    }
}

extension ConfigurationTests {
    @Test("controlSocket(inFile:) gives the control_socket load(path:) gives, for odd paths and a relative file name")
    func controlSocketAgreesWithLoad() throws {
        var template = Array("/tmp/ferry-config.XXXXXX".utf8CString)
        let directory = String(cString: mkdtemp(&template)!)
        defer { try? FileManager.default.removeItem(atPath: directory) }
        // The same file named relative to the working directory, through "..".
        let depth = FileManager.default.currentDirectoryPath.split(separator: "/").count
        let relative = String(repeating: "../", count: depth) + directory.dropFirst() + "/conf/ferry.toml"
        try FileManager.default.createDirectory(atPath: directory + "/conf", withIntermediateDirectories: true)
        let cases: [(String?, String)] = [
            (nil, "/run/ferry/control.sock"),
            ("ctl.sock", directory + "/conf/ctl.sock"),
            ("./run//ctl.sock", directory + "/conf/run/ctl.sock"),
            ("../ctl.sock", directory + "/ctl.sock"),
            ("sub/../../x/./ctl.sock", directory + "/x/ctl.sock"),
            ("/srv//ferry/./link/../ctl.sock", "/srv/ferry/ctl.sock"),
        ]
        for (value, expected) in cases {
            let text = (value.map { "control_socket = \"\($0)\"\n" } ?? "") + minimalSpool
            try text.write(toFile: directory + "/conf/ferry.toml", atomically: true, encoding: .utf8)
            for path in [directory + "/conf/ferry.toml", relative] {
                let socket = try ConfigurationLoader.controlSocket(inFile: path)
                #expect(socket == expected, "\(value ?? "(unset)") in \(path)")
                #expect(socket == (try loader().load(path: path)).controlSocket, "\(value ?? "(unset)") in \(path)")
            }
        }
    }

    @Test("controlSocket(inFile:) reads only control_socket, and says why it cannot")
    func controlSocketProblems() throws {
        var template = Array("/tmp/ferry-config.XXXXXX".utf8CString)
        let directory = String(cString: mkdtemp(&template)!)
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let path = directory + "/ferry.toml"
        func problem(_ text: String?, at path: String = path) -> String? {
            if let text { try? text.write(toFile: path, atomically: true, encoding: .utf8) }
            do {
                _ = try ConfigurationLoader.controlSocket(inFile: path)
                return nil
            } catch {
                return error.description
            }
        }
        // The rest of the file is not checked: a secret ferryctl cannot read, an unknown key.
        try "control_socket = \"/run/x.sock\"\nbogus = 1\n[[spool]]\nheaders = { A = \"${env:NOPE}\" }\n".write(toFile: path, atomically: true, encoding: .utf8)
        #expect(try ConfigurationLoader.controlSocket(inFile: path) == "/run/x.sock")
        #expect(problem(nil, at: directory + "/nope.toml") == directory + "/nope.toml: cannot read the configuration file: No such file or directory (pass --config PATH to use another file)")
        #expect(problem(nil, at: directory) == directory + ": cannot read the configuration file: Is a directory (pass --config PATH to use another file)")
        #expect(problem("a = 1\ncontrol_socket = \n")?.hasPrefix(path + ":2: TOML syntax error: ") == true)
        #expect(problem("\ncontrol_socket = 5\n") == path + ":2: control_socket: expected a string, got an integer")
        #expect(problem("control_socket = \"\"\n") == path + ":1: control_socket: the path must not be empty")
    }
}

@Suite("Templates and secrets")
struct TemplateTests {
    @Test("Field placeholders are parsed and rendered; {{ and }} are literal braces")
    func placeholders() throws {
        let configuration = try loader().parse("""
            \(minimalSpool)
            [spool.fields]
            meta = "{{\\"name\\": \\"{filename}\\", \\"size\\": {size}}}"
            id = "{id}"
            where = "{relative_path} @ {mtime} #{sha256}"
            """, path: "/x.toml")
        let fields = Dictionary(uniqueKeysWithValues: configuration.spools[0].fields.map { ($0.name, $0.value) })
        #expect(fields["meta"]?.render { $0 == .filename ? "a.jpg" : "42" } == "{\"name\": \"a.jpg\", \"size\": 42}")
        #expect(fields["id"]?.placeholders == [.id])
        #expect(fields["where"]?.placeholders == [.relativePath, .mtime, .sha256])
    }

    @Test("An unknown placeholder is an error listing the known ones")
    func unknownPlaceholder() {
        let found = issues("\(minimalSpool)\n[spool.fields]\nx = \"{name}\"")
        #expect(found.first?.message.hasPrefix("unknown placeholder \"{name}\"; the placeholders are {filename} {size} {mtime} {sha256} {relative_path} {id}") == true)
    }

    @Test("A file placeholder in the URL of a protocol that does not name the file there is an error, not literal text", arguments: ["multipart", "tus"])
    func urlPlaceholderRefused(uploadProtocol: String) {
        let text = """
            [[spool]]
            name = "media"
            directory = "/srv/spool"
            url = "https://tus.example/files/{filename}"
            protocol = "\(uploadProtocol)"
            """
        let found = issues(text)
        #expect(found.count == 1)
        #expect(found.first?.message.hasPrefix("{filename} in the URL is not replaced for this protocol") == true, "\(found)")
        #expect(found.first?.line == 4)
        // A literal brace pair that names no placeholder is the URL's own text, as before.
        #expect((try? loader().parse(minimalSpool.replacingOccurrences(of: "/upload", with: "/upload/{x}"), path: "/x.toml")) != nil)
    }

    @Test("a per-file placeholder in a put or resumable URL's host part is refused (the file's name would choose the server); after the host's / it is fine",
          arguments: ["put", "resumable"])
    func urlPlaceholderInHost(uploadProtocol: String) {
        let refused = [
            "https://dav.example.com{relative_path}", "https://dav.example.com{filename}/x", "https://{filename}.example.com/",
            "https://dav.example.com:{size}/in", "http://user:pw@dav.example.com{relative_path}?a=b",
        ]
        // Secrets are resolved before the host is looked at: a `${file:/…}` path's slash is not the host's end.
        let secrets = loader(environment: ["DAV_HOST": "https://dav.example.com", "DAV_URL": "https://dav.example.com/files/"],
                             files: ["/run/secrets/davhost": "dav.example.com"])
        for url in refused + ["${env:DAV_HOST}{relative_path}", "https://${file:/run/secrets/davhost}{relative_path}"] {
            let found = issues("[[spool]]\nname = \"dav\"\ndirectory = \"/srv/spool\"\nurl = \"\(url)\"\nprotocol = \"\(uploadProtocol)\"", loader: secrets)
            #expect(found.count == 1 && found.first?.line == 4, "\(url): \(found)")
            #expect(found.first?.message.contains("is in the URL's host part, so a file's name would choose the server") == true, "\(url): \(found)")
        }
        for url in ["https://dav.example.com/{relative_path}", "https://dav.example.com/in?name={filename}", "https://dav.example.com#{id}",
                    "${env:DAV_URL}{relative_path}", "https://${file:/run/secrets/davhost}/in/{relative_path}"] {
            let text = "[[spool]]\nname = \"dav\"\ndirectory = \"/srv/spool\"\nurl = \"\(url)\"\nprotocol = \"\(uploadProtocol)\""
            #expect((try? secrets.parse(text, path: "/x.toml")) != nil, "\(url)")
        }
    }

    @Test("ca_file must hold a PEM certificate: a directory, an empty file or a key alone is refused at load, naming the key")
    func caFileChecked() throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("ferry-ca-\(UUID().uuidString)").path
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: false)
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let files = [
            "empty.pem": "",
            "key.pem": "-----BEGIN PRIVATE KEY-----\nMC4CAQAwBQYDK2VwBCIEIA==\n-----END PRIVATE KEY-----\n",
            "ca.pem": "-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n",
        ]
        for (name, text) in files { try Data(text.utf8).write(to: URL(fileURLWithPath: directory + "/" + name)) }
        for (path, problem) in [(directory, "is not a regular file"), (directory + "/empty.pem", "holds no PEM certificate"),
                                (directory + "/key.pem", "holds no PEM certificate"), (directory + "/none.pem", "cannot read CA file")] {
            let found = issues(minimalSpool + "\nca_file = \"\(path)\"")
            #expect(found.first?.keyPath == "spool[0].ca_file", "\(found)")
            #expect(found.first?.message.contains(problem) == true, "\(path): \(found)")
        }
        #expect((try? loader().parse(minimalSpool + "\nca_file = \"\(directory)/ca.pem\"", path: "/x.toml")) != nil)
    }

    @Test("Secrets come from the environment, files and systemd credentials")
    func secretSources() throws {
        let configuration = try loader(
            environment: ["TOKEN": "from-env"], credentials: "/run/creds",
            files: ["/etc/ferry/key": "from-file\n", "/run/creds/api": "from-credential\r\n"]
        ).parse("""
            \(minimalSpool)
            [spool.headers]
            X-Env = "${env:TOKEN}"
            X-File = "k=${file:/etc/ferry/key}"
            X-Credential = "Bearer ${credential:api}"
            X-Plain = "{not a placeholder}"
            """, path: "/x.toml")
        let headers = Dictionary(uniqueKeysWithValues: configuration.spools[0].headers.map { ($0.name, $0.value) })
        #expect(headers["X-Env"]?.text == "from-env")
        #expect(headers["X-File"]?.text == "k=from-file")
        #expect(headers["X-Credential"]?.text == "Bearer from-credential")
        #expect(headers["X-Plain"]?.text == "{not a placeholder}")
        #expect(headers["X-Plain"]?.containsSecret == false)
        #expect(headers["X-Env"]?.containsSecret == true)
    }

    @Test("Missing secrets are configuration errors that say what to do", arguments: [
        ("${env:NOPE}", "environment variable NOPE (from ${env:NOPE}) is not set"),
        ("${file:/nope}", "${file:/nope}: cannot read /nope: No such file or directory"),
        ("${file:relative}", "${file:relative} needs an absolute path"),
        ("${credential:token}", "${credential:token} needs $CREDENTIALS_DIRECTORY"),
        ("${vault:x}", "unknown secret source \"vault\""),
        ("${env:X", "\"${\" starts a secret reference but there is no closing \"}\""),
    ])
    func missingSecrets(value: String, message: String) {
        let found = issues("\(minimalSpool)\n[spool.headers]\nAuthorization = \"\(value)\"")
        #expect(found.count == 1)
        #expect(found.first?.keyPath == "spool[0].headers.Authorization")
        #expect(found.first?.message.contains(message) == true, "\(found.first?.message ?? "")")
    }

    @Test("A secret with a line break inside is refused without printing the secret")
    func secretWithNewline() {
        let found = issues(
            "\(minimalSpool)\n[spool.headers]\nAuthorization = \"${env:TOKEN}\"",
            loader: loader(environment: ["TOKEN": "top-secret\ninjected"]))
        #expect(found.count == 1)
        #expect(found.first?.message.contains("after resolving secrets") == true)
        #expect(!found.description.contains("top-secret"))
    }

    @Test("URLs may hold secrets; the redacted form drops query and credentials")
    func urlSecrets() throws {
        let configuration = try loader(environment: ["SIG": "abc123"]).parse("""
            [[spool]]
            name = "s3"
            directory = "/srv/s3"
            url = "https://user:pw@bucket.example.org/up?signature=${env:SIG}"
            """, path: "/x.toml")
        #expect(configuration.spools[0].url.text == "https://user:pw@bucket.example.org/up?signature=abc123")
        #expect(configuration.spools[0].url.redactedURL == "https://bucket.example.org/up")
    }

    @Test("A URL that does not parse is quoted without its user name and password", arguments: [
        ("http://alice:Pw#SECRET9@127.0.0.1:8080/ok", "\"http://***@127.0.0.1:8080/ok\" is not a valid URL"),
        ("http://alice:Pw/SECRET9@127.0.0.1/ok", "\"http://***@127.0.0.1/ok\" is not a valid URL"),
        ("http://alice:Pw SECRET9@127.0.0.1/ok", "\"http://***@127.0.0.1/ok\" contains a space or control character"),
    ])
    func badURLCredentials(url: String, message: String) {
        let found = urlIssues(url)
        #expect(found.count == 1)
        #expect(found.first?.message.hasPrefix(message) == true, "\(found)")
        #expect(found.first?.message.contains("percent-encode it: %20, %23, %2F, %3F, %40, %25") == true)
        #expect(found.allSatisfy { !$0.description.contains("SECRET9") && !$0.description.contains("alice") })
    }

    @Test("A URL that does not parse is quoted without its query (a pre-signed URL's signature and token)", arguments: [
        ("https://b.s3.amazonaws.com/x?X-Amz-Signature=deadbeefSECRET9&X-Amz-Security-Token=TOKENSECRET9 extra",
         "\"https://b.s3.amazonaws.com/x?…\" contains a space or control character"),
        ("ftp://b.example/x?sig=SECRET9", "\"ftp://b.example/x?…\" must start with http:// or https://"),
    ])
    func badURLQuery(url: String, message: String) {
        let found = urlIssues(url)
        #expect(found.count == 1)
        #expect(found.first?.message.hasPrefix(message) == true, "\(found)")
        #expect(found.allSatisfy { !$0.description.contains("SECRET9") })
    }

    @Test("A raw PUT's URL is shown with its placeholders as written")
    func putURLShown() throws {
        let configuration = try loader().parse("""
            [[spool]]
            name = "dav"
            directory = "/srv/dav"
            protocol = "put"
            url = "https://u:p@dav.example.org/in/{relative_path}?x=1"
            """, path: "/x.toml")
        #expect(configuration.spools[0].url.redactedURL == "https://dav.example.org/in/{relative_path}")
    }

    @Test("A secret in the URL's path is masked wherever the URL is shown")
    func urlPathSecret() throws {
        let configuration = try loader(environment: ["BOT": "123:ABC"]).parse("""
            [[spool]]
            name = "telegram"
            directory = "/srv/tg"
            url = "https://api.example.org/bot${env:BOT}/sendDocument?chat=${env:BOT}"
            """, path: "/x.toml")
        let url = configuration.spools[0].url
        #expect(url.text == "https://api.example.org/bot123:ABC/sendDocument?chat=123:ABC")
        #expect(url.redacted == "https://api.example.org/bot***/sendDocument?chat=***")
        #expect(url.redactedURL == "https://api.example.org/bot***/sendDocument")
        #expect(!url.redactedURL.contains("ABC"))
    }

    @Test("NUL escapes are found in basic strings only, not in comments or literal strings")
    func nulLexer() {
        #expect(ConfigurationLoader.lineWithEscapedNUL("a = \"x\\u0000\"") == 1)
        #expect(ConfigurationLoader.lineWithEscapedNUL("a = 1\nb = \"\\U00000000\"") == 2)
        #expect(ConfigurationLoader.lineWithEscapedNUL("a = \"\"\"\nline\\u0000\n\"\"\"") == 2)
        #expect(ConfigurationLoader.lineWithEscapedNUL("# a comment about \\u0000\na = 1") == nil)
        #expect(ConfigurationLoader.lineWithEscapedNUL("a = '\\u0000'") == nil)
        #expect(ConfigurationLoader.lineWithEscapedNUL("a = \"\\\\u0000\"") == nil, "an escaped backslash followed by u0000")
    }

    @Test("protocol: multipart by default; put defaults to PUT and may name the file in its URL; tus takes chunk_size")
    func protocols() throws {
        let plain = try #require(try loader().parse(minimalSpool, path: "/etc/ferry/ferry.toml").spools.first)
        #expect(plain.uploadProtocol == .multipart)
        #expect(plain.method == "POST")
        #expect(plain.chunkSize == nil)

        let put = try #require(try loader().parse("""
            [[spool]]
            name = "dav"
            directory = "/srv/dav"
            url = "https://dav.example.org/files/{relative_path}"
            protocol = "put"
            """, path: "/etc/ferry/ferry.toml").spools.first)
        #expect(put.uploadProtocol == .put)
        #expect(put.method == "PUT")
        #expect(put.url.placeholders == [.relativePath])

        let tus = try #require(try loader().parse("""
            [[spool]]
            name = "video"
            directory = "/srv/video"
            url = "https://tus.example.org/files/"
            protocol = "tus"
            chunk_size = "8MiB"
              [spool.fields]
              camera = "north"
            """, path: "/etc/ferry/ferry.toml").spools.first)
        #expect(tus.uploadProtocol == .tus)
        #expect(tus.chunkSize == 8 << 20)
        let bytes = try #require(try loader().parse(minimalSpool + "\nprotocol = \"tus\"\nchunk_size = 1048576", path: "/x.toml").spools.first)
        #expect(bytes.chunkSize == 1 << 20)
        // Braces stay literal in a multipart URL.
        let literal = try #require(try loader().parse(minimalSpool.replacingOccurrences(of: "/upload", with: "/up{load}"), path: "/x.toml").spools.first)
        #expect(literal.url.text == "https://example.org/up{load}")
    }

    @Test("Protocol options that do not fit are errors that say why")
    func protocolMistakes() {
        #expect(issues(minimalSpool + "\nprotocol = \"ftp\"").map(\.description) == [
            "/etc/ferry/ferry.toml:5: spool[0].protocol: protocol must be \"multipart\", \"put\", \"tus\", \"s3\" or \"resumable\", not \"ftp\"",
        ])
        #expect(issues(minimalSpool + "\nchunk_size = \"8MiB\"").map(\.description) == [
            "/etc/ferry/ferry.toml:5: spool[0].chunk_size: chunk_size applies only to protocol \"tus\" or \"resumable\" (this spool uses \"multipart\")",
        ])
        #expect(issues(minimalSpool + "\nprotocol = \"tus\"\nchunk_size = \"8 parsecs\"").map(\.description) == [
            "/etc/ferry/ferry.toml:6: spool[0].chunk_size: expected a size such as \"512KiB\", \"8MiB\" or \"1GiB\" (or a number of bytes), got \"8 parsecs\"",
        ])
        #expect(issues(minimalSpool + "\nprotocol = \"tus\"\nchunk_size = 1000").first?.description.contains("too small") == true)
        #expect(issues(minimalSpool + "\nprotocol = \"tus\"\nmethod = \"PUT\"").first?.description.contains("method does not apply to protocol \"tus\"") == true)
        #expect(issues(minimalSpool + "\nprotocol = \"put\"\nfile_field = \"upload\"").first?.description.contains("file_field applies only to protocol \"multipart\"") == true)
        #expect(issues(minimalSpool + "\nprotocol = \"put\"\n[spool.fields]\na = \"b\"").first?.description.contains("fields are not sent by protocol \"put\"") == true)
        #expect(issues(minimalSpool + "\nprotocol = \"tus\"\n[spool.fields]\n\"two words\" = \"b\"").first?.description.contains("cannot be a tus Upload-Metadata key") == true)
        #expect(issues(minimalSpool + "\nprotocol = \"tus\"\n[spool.fields]\nfilename = \"b\"").first?.description.contains("sent by Ferry itself") == true)
        #expect(issues(minimalSpool.replacingOccurrences(of: "/upload", with: "/{sha256}") + "\nprotocol = \"put\"").first?.description.contains("{sha256} cannot be used in a URL") == true)
        #expect(issues(minimalSpool + "\nprotocol = \"tus\"\n[spool.headers]\nUpload-Metadata = \"x\"").first?.description.contains("part of the tus protocol") == true)
        #expect(issues(minimalSpool + "\nprotocol = \"tus\"\n[spool.headers]\nX-HTTP-Method-Override = \"PATCH\"").first?.description.contains("part of the tus protocol") == true)
    }

    @Test("Sizes: bytes, KiB/MiB/GiB, kB/MB/GB")
    func sizes() {
        #expect(TableReader.parseSize("8MiB") == 8 << 20)
        #expect(TableReader.parseSize("512 KiB") == 512 << 10)
        #expect(TableReader.parseSize("1GiB") == 1 << 30)
        #expect(TableReader.parseSize("5MB") == 5_000_000)
        #expect(TableReader.parseSize("65536") == 65536)
        #expect(TableReader.parseSize("MiB") == nil)
        #expect(TableReader.parseSize("8 XB") == nil)
        #expect(TableReader.parseSize("99999999999999GiB") == nil)
    }
}

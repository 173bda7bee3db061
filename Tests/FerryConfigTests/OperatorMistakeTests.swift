@testable import FerryConfig
import Foundation
import Testing

/// Mistakes an operator makes that once got past `check-config` or a reload: a port out of range
/// (the HTTP stack stops the process on it), a control character in a secret header (the HTTP stack
/// quoted the secret in its error), a reload that points a spool at the state directory in use.
@Suite("Operator mistakes in the configuration")
struct OperatorMistakeTests {
    @Test("A URL whose port is out of range is refused, naming the key", arguments: ["99999", "65536", "0"])
    func portOutOfRange(port: String) {
        let found = urlIssues("http://127.0.0.1:\(port)/upload")
        #expect(found.count == 1)
        #expect(found.first?.keyPath == "spool[0].url")
        #expect(found.first?.line == 4)
        #expect(found.first?.message.contains("has port \(port); a port is a number from 1 to 65535") == true, "\(found)")
    }

    @Test("Ports 1 and 65535, and no port, are accepted", arguments: [":1", ":65535", ""])
    func portInRange(port: String) throws {
        let configuration = try loader().parse("""
            [[spool]]
            name = "media"
            directory = "/srv/spool"
            url = "http://127.0.0.1\(port)/upload"
            """, path: "/x.toml")
        #expect(configuration.spools.count == 1)
    }

    @Test("A header whose secret holds a control character is refused without quoting the secret", arguments: [
        ("Bearer top\u{7F}secret", "0x7F"), ("Bearer top\u{1B}secret", "0x1B"), ("Bearer top\u{01}secret", "0x01"),
    ])
    func controlCharacterInSecretHeader(secret: String, code: String) {
        let found = issues(
            "\(minimalSpool)\n[spool.headers]\nAuthorization = \"${file:/run/token}\"",
            loader: loader(files: ["/run/token": secret]))
        #expect(found.count == 1)
        #expect(found.first?.keyPath == "spool[0].headers.Authorization")
        #expect(found.first?.message.contains("after resolving secrets") == true)
        #expect(found.first?.message.contains("control character (\(code))") == true, "\(found)")
        #expect(!found.description.contains("Bearer"))
    }

    @Test("A tab inside a header value is allowed; in a multipart field value, any control character but CR, LF and NUL")
    func tabAllowed() throws {
        let configuration = try loader(files: ["/run/token": "a\tb"]).parse("""
            \(minimalSpool)
            [spool.headers]
            Authorization = "${file:/run/token}"
            [spool.fields]
            note = "bell\\u0007"
            """, path: "/x.toml")
        #expect(configuration.spools[0].headers.first?.value.text == "a\tb")
        #expect(configuration.spools[0].fields.first { $0.name == "note" }?.value.text == "bell\u{7}")
    }

    @Test("A literal control character in a header value is refused too")
    func literalControlCharacter() {
        let found = issues("\(minimalSpool)\n[spool.headers]\nX-Note = \"a\\u007Fb\"")
        #expect(found.count == 1)
        #expect(found.first?.message.contains("control character (0x7F)") == true, "\(found)")
    }

    @Test("A reload keeps the settings read at start-up as they run, and reports what differs")
    func reloadKeepsStartupSettings() throws {
        let running = try loader().parse("""
            state_directory = "/var/lib/ferry"
            control_socket = "/run/ferry/control.sock"
            log_level = "info"
            \(minimalSpool)
            """, path: "/x.toml")
        let file = try loader().parse("""
            state_directory = "/var/lib/ferry2"
            control_socket = "/run/ferry/other.sock"
            log_level = "debug"
            max_concurrent_uploads = 3
            \(minimalSpool)
            """, path: "/x.toml")
        let effective = try file.reloadable(over: running)
        #expect(effective.stateDirectory == "/var/lib/ferry")
        #expect(effective.controlSocket == "/run/ferry/control.sock")
        #expect(effective.logLevel == .info)
        #expect(effective.maxConcurrentUploads == 3)
    }

    @Test("A reload whose spool is, holds or lies inside the state directory in use is refused, naming file, line and key",
          arguments: ["/var/lib/ferry", "/var/lib/ferry/in", "/var/lib"])
    func reloadOntoStateDirectory(directory: String) throws {
        let folder = FileManager.default.temporaryDirectory.path + "/ferry-reload-\(UUID().uuidString)"
        try FileManager.default.createDirectory(atPath: folder, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: folder) }
        let path = folder + "/ferry.toml"
        let text = """
            state_directory = "/srv/ferry-new"

            [[spool]]
            name = "old"
            directory = "\(directory)"
            url = "https://example.org/upload"
            """
        try text.write(toFile: path, atomically: true, encoding: .utf8)
        let running = try loader().parse("state_directory = \"/var/lib/ferry\"\n\(minimalSpool)", path: path)
        let file = try loader().parse(text, path: path)
        #expect {
            _ = try file.reloadable(over: running)
        } throws: { error in
            let issue = (error as? ConfigurationError)?.issues.first
            return issue?.file == path && issue?.line == 5 && issue?.keyPath == "spool[0].directory"
                && issue?.message.contains("state directory in use, /var/lib/ferry;") == true
        }
    }
}

import FerryQueue
import FerryReceiver
import FerryTestSupport
import Foundation
import Testing

/// Paths compared as the directories they name, not as text: a symlink must not let a spool take in
/// the state directory, another spool, or the directory delivered files are moved to.
@Suite("Symlinked paths in the configuration", .serialized)
struct SymlinkedPathTests {
    /// Writes a configuration in `directory` and runs `ferryd check-config` on it.
    func checkConfig(_ lines: [String], in directory: TemporaryDirectory) async throws -> (status: Int32, stderr: String) {
        let path = directory.url("ferry-\(UUID().uuidString).toml")
        try lines.joined(separator: "\n").write(toFile: path, atomically: true, encoding: .utf8)
        let result = try await runFerryd(["check-config", "--config", path], in: directory)
        return (result.status, result.stderr)
    }

    @Test("A state_directory inside a spool reached through a symlink is refused")
    func stateDirectoryThroughSymlink() async throws {
        let directory = try TemporaryDirectory("ferry-symlink")
        let real = try directory.makeDirectory("data/in")
        #expect(symlink(real, directory.url("in-link")) == 0)
        let result = try await checkConfig([
            "state_directory = \"\(real)/ferry-state\"",
            "[[spool]]", "name = \"in\"", "directory = \"\(directory.url("in-link"))\"", "recursive = true",
            "url = \"http://127.0.0.1:9/upload\"",
        ], in: directory)
        #expect(result.status == 78, "\(result.stderr)")
        #expect(result.stderr.contains("state_directory") && result.stderr.contains("is inside spool \"in\""), "\(result.stderr)")
    }

    @Test("Two spools on one directory, one named through a symlink, are refused")
    func twoSpoolsOneDirectory() async throws {
        let directory = try TemporaryDirectory("ferry-symlink")
        let real = try directory.makeDirectory("data/in")
        #expect(symlink(real, directory.url("in-link")) == 0)
        let result = try await checkConfig([
            "state_directory = \"\(directory.url("state"))\"",
            "[[spool]]", "name = \"a\"", "directory = \"\(real)\"", "url = \"http://127.0.0.1:9/a\"",
            "[[spool]]", "name = \"b\"", "directory = \"\(directory.url("in-link"))\"", "url = \"http://127.0.0.1:9/b\"",
        ], in: directory)
        #expect(result.status == 78, "\(result.stderr)")
        #expect(result.stderr.contains("is already watched by spool \"a\""), "\(result.stderr)")
    }

    @Test("A sent_directory named through a symlink into a recursive spool is never entered: a moved file is uploaded once")
    func sentDirectoryThroughSymlink() async throws {
        try await withDaemonHarness(topLevel: ["rescan_interval = \"1s\""]) { harness in
            #expect(symlink(harness.spoolPath(), harness.directory.url("spool-link")) == 0)
            var config = try String(contentsOfFile: harness.configPath, encoding: .utf8)
            config = config.replacingOccurrences(of: "settle = \"300ms\"", with: """
                settle = "300ms"
                recursive = true
                after_upload = "move"
                sent_directory = "\(harness.directory.url("spool-link"))/sent"
                """)
            try config.write(toFile: harness.configPath, atomically: true, encoding: .utf8)
            try await harness.start()
            try harness.drop("once.txt", Array("once".utf8))
            try await waitUntil("the file to be moved to sent/") { fileExists(harness.spoolPath() + "/sent/once.txt") }
            // Two full scans after the move: each would have found sent/once.txt had it entered sent/.
            let log = harness.daemon!
            let scansBefore = log.log.components(separatedBy: "msg=\"spool scanned\"").count
            try await waitUntil("two more full scans") { log.log.components(separatedBy: "msg=\"spool scanned\"").count >= scansBefore + 2 }
            #expect(harness.receiver.requests.count == 1, "uploaded \(harness.receiver.requests.count) times")
            #expect(try await jobs(harness).count == 1)
        }
    }
}

import FerryTestSupport
import Foundation
import Testing

#if canImport(Glibc)
import Glibc
#endif

/// Shell completions as shells run them: the script `ferryctl --generate-completion-script` prints,
/// loaded into a real bash (its completion function called as `complete -F` would) and into an
/// interactive zsh and fish in a pseudo-terminal (a typed line and a TAB), each of which calls the
/// built ferryctl back for job ids and spool names from a running ferryd.
@Suite("Shell completions", .serialized)
struct CompletionTests {
    /// Runs `script` in `shell` with the built products first on the PATH; returns stdout's lines.
    static func run(_ shell: [String], _ script: String, in directory: TemporaryDirectory) async throws -> (lines: [String], stderr: String) {
        let path = directory.url("script-\(UUID().uuidString)")
        try script.write(toFile: path, atomically: true, encoding: .utf8)
        var environment = ProcessInfo.processInfo.environment
        environment["PATH"] = BuiltProducts.directory + ":" + (environment["PATH"] ?? "/usr/bin:/bin")
        environment["HOME"] = directory.path
        environment["FERRY_CONFIG"] = "/nonexistent"
        let out = directory.url("out"), err = directory.url("err")
        let status = try await runToCompletion(shell + [path], environment: environment, stdoutPath: out, stderrPath: err, timeout: .seconds(30))
        let stdout = (try? String(contentsOfFile: out, encoding: .utf8)) ?? ""
        let stderr = (try? String(contentsOfFile: err, encoding: .utf8)) ?? ""
        #expect(status == 0, "\(shell[0]) exited \(status): \(stderr)")
        return (stdout.split(separator: "\n").map(String.init), stderr)
    }

    /// What bash offers for `words` (the last one being completed), as `complete -F _ferryctl` does.
    static func bash(_ words: [String], in directory: TemporaryDirectory) async throws -> [String] {
        let quoted = words.map { "'" + $0.replacingOccurrences(of: "'", with: "'\\''") + "'" }.joined(separator: " ")
        let script = """
            source <(ferryctl --generate-completion-script bash)
            COMP_WORDS=(\(quoted))
            COMP_CWORD=$(( ${#COMP_WORDS[@]} - 1 ))
            COMP_LINE="${COMP_WORDS[*]}"
            COMP_POINT=${#COMP_LINE}
            _ferryctl ferryctl "${COMP_WORDS[COMP_CWORD]}" "${COMP_WORDS[COMP_CWORD-1]}"
            printf '%s\\n' "${COMPREPLY[@]}"
            """
        return try await run(["/bin/bash"], script, in: directory).lines.filter { !$0.isEmpty }
    }

    /// Whether an interactive `shell` (zsh or fish, in a pseudo-terminal), given `line` and a TAB,
    /// shows `expected` (Tests/Servers/complete_in_shell.py).
    static func completes(_ shell: String, _ line: String, to expected: String, in directory: TemporaryDirectory) async throws -> Bool {
        let script = Self.serversDirectory + "/complete_in_shell.py"
        var environment = ProcessInfo.processInfo.environment
        environment["PATH"] = BuiltProducts.directory + ":" + (environment["PATH"] ?? "/usr/bin:/bin")
        environment["HOME"] = directory.path
        environment["FERRY_CONFIG"] = "/nonexistent"
        let out = directory.url("pty-out"), err = directory.url("pty-err")
        let status = try await runToCompletion(
            ["/usr/bin/python3", script, shell, line, expected], environment: environment, stdoutPath: out, stderrPath: err,
            timeout: .seconds(30))
        if status != 0 {
            Issue.record("\(shell) did not complete \(line) to \(expected): \((try? String(contentsOfFile: out, encoding: .utf8)) ?? "")")
        }
        return status == 0
    }

    static let serversDirectory = URL(fileURLWithPath: #filePath)
        .deletingLastPathComponent().deletingLastPathComponent().appendingPathComponent("Servers").path

    @Test("job ids by state and spool names come from the running daemon, in bash, zsh and fish")
    func fromTheDaemon() async throws {
        let shells = try TemporaryDirectory("completion")
        try await withDaemonHarness(spools: [TestSpool(), TestSpool(name: "other")]) { harness in
            try await harness.start()
            #expect(try await harness.ctl("pause").status == 0)
            try harness.drop("a.txt", Array("first".utf8))
            try harness.drop("b.txt", Array("second".utf8), spool: "other")
            var ids: [String] = []
            try await waitUntil("both files queued") {
                let listed = try await harness.ctl("list", "--json").json()["jobs"] as? [[String: Any]] ?? []
                ids = listed.compactMap { $0["id"] as? String }
                return ids.count == 2
            }
            let socket = harness.controlSocket
            #expect(Set(try await Self.bash(["ferryctl", "--socket", socket, "show", ""], in: shells)) == Set(ids))
            #expect(try await Self.bash(["ferryctl", "--socket", socket, "show", ids[0]], in: shells) == [ids[0]])
            #expect(Set(try await Self.bash(["ferryctl", "--socket=\(socket)", "hold", ""], in: shells)) == Set(ids))
            #expect(try await Self.bash(["ferryctl", "--socket", socket, "release", ""], in: shells) == [], "nothing is held")
            #expect(try await Self.bash(["ferryctl", "--socket", socket, "retry", ""], in: shells) == [], "nothing failed")
            #expect(Set(try await Self.bash(["ferryctl", "--socket", socket, "list", "--spool", ""], in: shells)) == ["other", "test"])
            #expect(try await Self.bash(["ferryctl", "--socket", socket, "pause", "o"], in: shells) == ["other"])

            let held = try await harness.ctl("hold", ids[1])
            #expect(held.status == 0, "\(held)")
            #expect(try await Self.bash(["ferryctl", "--socket", socket, "release", ""], in: shells) == [ids[1]])
            #expect(try await Self.bash(["ferryctl", "--socket", socket, "cancel", "--spool", "t"], in: shells) == ["test"])

            for shell in ["zsh", "fish"] {
                let line = "ferryctl --socket \(socket) "
                #expect(try await Self.completes(shell, line + "pause o", to: line + "pause other", in: shells))
                #expect(try await Self.completes(shell, line + "release ", to: line + "release \(ids[1])", in: shells))
                #expect(try await Self.completes(shell, line + "show " + ids[0].dropLast(3), to: line + "show \(ids[0])", in: shells))
                #expect(try await Self.completes(shell, line + "list --spool ot", to: line + "list --spool other", in: shells))
            }
        }
    }

    @Test("without a daemon, completions are empty, silent and quick")
    func withoutDaemon() async throws {
        let shells = try TemporaryDirectory("completion")
        // No socket at all, then a socket that accepts and never answers: the deadline (1 s) ends it.
        let missing = shells.url("missing.sock")
        let silent = shells.url("silent.sock")
        // Close-on-exec: the shells and ferryctl started below must not hold the listener.
        let listener = socket(AF_UNIX, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        defer { close(listener) }
        try #require(silent.utf8.count < MemoryLayout.size(ofValue: sockaddr_un().sun_path), "socket path too long: \(silent)")
        var address = sockaddr_un()
        address.sun_family = sa_family_t(AF_UNIX)
        withUnsafeMutableBytes(of: &address.sun_path) { buffer in
            for (index, byte) in silent.utf8.enumerated() { buffer[index] = byte }
        }
        let bound = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(listener, $0, socklen_t(MemoryLayout<sockaddr_un>.size)) }
        }
        #expect(bound == 0 && listen(listener, 8) == 0)
        for socket in [missing, silent] {
            let started = ContinuousClock.now
            let script = """
                source <(ferryctl --generate-completion-script bash)
                COMP_WORDS=(ferryctl --socket '\(socket)' show '')
                COMP_CWORD=4
                COMP_LINE="${COMP_WORDS[*]}"
                COMP_POINT=${#COMP_LINE}
                _ferryctl ferryctl '' show
                printf '%s\\n' "${COMPREPLY[@]}"
                """
            let (lines, stderr) = try await Self.run(["/bin/bash"], script, in: shells)
            let empty = lines.allSatisfy { $0.isEmpty }
            #expect(empty, "\(lines)")
            #expect(stderr.isEmpty, "\(stderr)")
            // The 1 s deadline plus bash and ferryctl starting, with ample room for a machine busy
            // with other tests: without the deadline, the silent socket would hold it for good.
            #expect(ContinuousClock.now - started < .seconds(15))
        }
    }
}

import Foundation

#if canImport(Glibc)
import Glibc
#endif

/// A real `systemd-journald`, private to one test: journald's own parser of the native protocol
/// checks what ferryd sends, and `journalctl` reads it back.
///
/// It runs as the journal namespace `ferrytest` (a namespace instance reads neither the kernel log
/// nor audit) inside a mount namespace of its own (`unshare --mount`), where the test's directory
/// is bind-mounted over `/run` and `/var/log`: its sockets land in `run/systemd/journal.ferrytest/`
/// and its files in `log/journal/<machine-id>.ferrytest/`, both in the test's directory, and
/// nothing of the host's is touched. Needs root (mount namespaces), util-linux's `unshare` and
/// systemd's journald and journalctl (scripts/install-deps.sh installs systemd), and
/// `/etc/machine-id` (systemd's package makes it).
public final class JournaldInstance: @unchecked Sendable {
    public static let namespace = "ferrytest"
    public static let executable = "/lib/systemd/systemd-journald"

    public let directory: TemporaryDirectory
    private let child: ChildProcess

    /// The native protocol's socket: pass it as `FERRY_TEST_JOURNAL_SOCKET`.
    public var socketPath: String { directory.url("run/systemd/journal.\(Self.namespace)/socket") }

    /// The stream socket systemd connects a service's stdout and stderr to.
    public var streamSocketPath: String { directory.url("run/systemd/journal.\(Self.namespace)/stdout") }

    private init(directory: TemporaryDirectory, child: ChildProcess) {
        self.directory = directory
        self.child = child
    }

    /// Starts journald and waits until its socket exists.
    public static func start() async throws -> JournaldInstance {
        guard getuid() == 0 else { throw TestFailure("a private systemd-journald needs root (it runs in a mount namespace of its own)") }
        guard FileManager.default.isExecutableFile(atPath: executable) else {
            throw TestFailure("\(executable) is missing: install systemd (scripts/install-deps.sh does)")
        }
        let directory = try TemporaryDirectory("ferry-journald")
        try directory.makeDirectory("run")
        try directory.makeDirectory("log/journal")
        let script = """
            mount --bind "$0/run" /run && mount --bind "$0/log" /var/log && exec \(executable) \(namespace)
            """
        let child = try ChildProcess(
            executable: "/usr/bin/unshare", arguments: ["--mount", "--propagation", "private", "/bin/sh", "-c", script, directory.path],
            logPath: directory.url("journald.log"))
        let instance = JournaldInstance(directory: directory, child: child)
        try await waitUntil("systemd-journald's socket at \(instance.socketPath)\n--- its output ---\n\(child.log)", timeout: .seconds(20)) {
            if !child.isRunning {
                throw TestFailure("systemd-journald exited (status \(child.terminationStatus)):\n\(child.log)")
            }
            return fileExists(instance.socketPath)
        }
        return instance
    }

    /// Stops journald (SIGTERM).
    public func stop() async {
        guard child.isRunning else { return }
        child.send(SIGTERM)
        _ = try? await child.waitForExit(timeout: .seconds(10))
    }

    /// The entries `journalctl` reads with `arguments` (matches such as `FERRY_JOB=…`, `-p warning`),
    /// oldest first: each field's values (a field may repeat), binary ones decoded as UTF-8.
    public func entries(_ arguments: [String] = []) async throws -> [[String: [String]]] {
        let journals = directory.url("log/journal")
        let names = try FileManager.default.contentsOfDirectory(atPath: journals).filter { $0.hasSuffix("." + Self.namespace) }
        guard let name = names.first else { return [] }
        let output = try TemporaryDirectory("ferry-journalctl")
        let status = try await runToCompletion(
            ["/usr/bin/journalctl", "--directory", journals + "/" + name, "--output", "json", "--all", "--no-pager"] + arguments,
            environment: ["PATH": "/usr/bin:/bin", "SYSTEMD_COLORS": "0"],
            stdoutPath: output.url("stdout"), stderrPath: output.url("stderr"), timeout: .seconds(30))
        let text = try String(contentsOfFile: output.url("stdout"), encoding: .utf8)
        guard status == 0 else {
            let errors = (try? String(contentsOfFile: output.url("stderr"), encoding: .utf8)) ?? ""
            throw TestFailure("journalctl \(arguments.joined(separator: " ")) exited \(status): \(errors)")
        }
        return try text.split(separator: "\n").map { line in
            guard let object = try JSONSerialization.jsonObject(with: Data(line.utf8)) as? [String: Any] else {
                throw TestFailure("journalctl printed a line that is not a JSON object: \(line)")
            }
            return object.compactMapValues(Self.values)
        }
    }

    /// A field's values in journalctl's JSON: a string, an array of bytes (not printable text), or
    /// an array of either (the field repeats); null for a value too large, which `--all` prevents.
    private static func values(_ json: Any) -> [String]? {
        if let text = json as? String { return [text] }
        guard let array = json as? [Any] else { return nil }
        if let bytes = array as? [Int] { return [String(decoding: bytes.map { UInt8(truncatingIfNeeded: $0) }, as: UTF8.self)] }
        return array.flatMap { values($0) ?? [] }
    }

    deinit {
        if child.isRunning { child.send(SIGKILL) }
    }
}

/// Runs `body` with a private systemd-journald, always stopping it afterwards.
public func withJournald<T>(_ body: (JournaldInstance) async throws -> T) async throws -> T {
    let journald = try await JournaldInstance.start()
    do {
        let result = try await body(journald)
        await journald.stop()
        return result
    } catch {
        await journald.stop()
        throw error
    }
}

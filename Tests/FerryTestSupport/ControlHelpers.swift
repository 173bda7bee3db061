import Foundation

#if canImport(Glibc)
import Glibc
#endif

/// A raw connection to a control socket, for sending arbitrary bytes (garbage, huge lines,
/// truncated JSON) and reading reply lines.
public final class RawControlSocket: @unchecked Sendable {
    public let descriptor: Int32
    private var pending: [UInt8] = []

    public init(path: String) throws {
        descriptor = socket(AF_UNIX, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        guard descriptor >= 0 else { throw TestFailure("socket: \(String(cString: strerror(errno)))") }
        var address = sockaddr_un()
        address.sun_family = sa_family_t(AF_UNIX)
        withUnsafeMutableBytes(of: &address.sun_path) { $0.copyBytes(from: Array(path.utf8)) }
        let result = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { connect(descriptor, $0, socklen_t(MemoryLayout<sockaddr_un>.size)) }
        }
        guard result == 0 else {
            // Not closed here: the instance is whole, so deinit runs and closes it (closing it
            // twice could close a descriptor another thread has opened since, under the same number).
            throw TestFailure("connect \(path): \(String(cString: strerror(errno)))")
        }
    }

    deinit { close(descriptor) }

    /// Writes all of `bytes` (blocking).
    public func send(_ bytes: [UInt8]) throws {
        var offset = 0
        while offset < bytes.count {
            let written = bytes[offset...].withUnsafeBytes { Glibc.send(descriptor, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
            guard written > 0 else { throw TestFailure("send: \(String(cString: strerror(errno)))") }
            offset += written
        }
    }

    public func send(_ text: String) throws { try send(Array(text.utf8)) }

    /// The next reply line, or `nil` when the daemon closed the connection. Throws after `timeout`.
    public func readLine(timeout: Duration = .seconds(10)) throws -> String? {
        let deadline = ContinuousClock.now + timeout
        while true {
            if let newline = pending.firstIndex(of: 0x0A) {
                let line = String(decoding: pending[..<newline], as: UTF8.self)
                pending.removeSubrange(...newline)
                return line
            }
            let left = deadline - .now
            guard left > .zero else { throw TestFailure("no reply line within \(timeout)") }
            var poller = pollfd(fd: descriptor, events: Int16(POLLIN), revents: 0)
            let milliseconds = Int32(min(1000, max(1, left.components.seconds * 1000 + left.components.attoseconds / 1_000_000_000_000_000)))
            guard poll(&poller, 1, milliseconds) > 0 else { continue }
            var buffer = [UInt8](repeating: 0, count: 65536)
            let count = buffer.withUnsafeMutableBytes { recv(descriptor, $0.baseAddress, $0.count, 0) }
            if count == 0 { return nil }
            if count < 0 {
                if errno == EINTR || errno == EAGAIN { continue }
                if errno == ECONNRESET { return nil }
                throw TestFailure("recv: \(String(cString: strerror(errno)))")
            }
            pending += buffer[0..<count]
        }
    }

    /// Sends a request line and returns the reply, parsed.
    public func request(_ line: String, timeout: Duration = .seconds(10)) throws -> [String: Any] {
        try send(line + "\n")
        guard let reply = try readLine(timeout: timeout) else { throw TestFailure("the daemon closed the connection") }
        return try parseJSONObject(reply)
    }
}

/// Parses one JSON object.
public func parseJSONObject(_ text: String) throws -> [String: Any] {
    guard let object = try JSONSerialization.jsonObject(with: Data(text.utf8)) as? [String: Any] else {
        throw TestFailure("not a JSON object: \(text)")
    }
    return object
}

/// What a `ferryctl` run printed and how it exited.
public struct FerryctlResult: Sendable, CustomStringConvertible {
    public var status: Int32
    public var stdout: String
    public var stderr: String

    public var description: String { "exit \(status)\n--- stdout ---\n\(stdout)\n--- stderr ---\n\(stderr)" }

    /// stdout parsed as one JSON object.
    public func json() throws -> [String: Any] { try parseJSONObject(stdout) }
}

/// Runs `ferryctl` (the built one, or `executable`) to completion, optionally as another user
/// through `setpriv` (tests run as root).
public func runFerryctl(
    _ arguments: [String], socket: String?, asUser user: String? = nil, executable: String? = nil,
    environment: [String: String] = [:], timeout: Duration = .seconds(60)
) async throws -> FerryctlResult {
    let ferryctl = try executable ?? BuiltProducts.path("ferryctl")
    var command = [ferryctl] + (socket.map { ["--socket", $0] } ?? []) + arguments
    if let user {
        command = ["/usr/bin/setpriv", "--reuid=\(user)", "--regid=\(user == "nobody" ? "nogroup" : user)", "--clear-groups", "--"] + command
    }
    var env = ProcessInfo.processInfo.environment
    env["FERRY_CONFIG"] = "/nonexistent"
    for (key, value) in environment { env[key] = value }
    let directory = try TemporaryDirectory("ferryctl-run")
    let outPath = directory.url("stdout")
    let errPath = directory.url("stderr")
    let status = try await runToCompletion(command, environment: env, stdoutPath: outPath, stderrPath: errPath, timeout: timeout)
    return FerryctlResult(
        status: status,
        stdout: (try? String(contentsOfFile: outPath, encoding: .utf8)) ?? "",
        stderr: (try? String(contentsOfFile: errPath, encoding: .utf8)) ?? "")
}

/// Runs `command` (an absolute executable path, then its arguments) with stdin from /dev/null and
/// stdout and stderr to files, and returns its exit status (128 + N for signal N).
///
/// It spawns and reaps the child itself (`posix_spawn`, `waitpid`) rather than through Foundation's
/// `Process`. Foundation learns that a child ended when the child's end of a socket pair closes,
/// then waits for it with a blocking `waitpid` on its one process-monitor thread; a child that
/// closes inherited descriptors and lives on (`systemd-socket-activate` before it execs ferryd)
/// holds that thread until it exits, and every other child's end with it.
public func runToCompletion(
    _ command: [String], environment: [String: String], stdoutPath: String, stderrPath: String, timeout: Duration
) async throws -> Int32 {
    let pid = try spawn(command, environment: environment, stdoutPath: stdoutPath, stderrPath: stderrPath)
    var status: Int32 = 0
    do {
        try await waitUntil("\(command.joined(separator: " ")) to exit", timeout: timeout) {
            waitpid(pid, &status, WNOHANG) == pid
        }
    } catch {
        kill(pid, SIGKILL)
        waitpid(pid, &status, 0)
        throw error
    }
    return exitStatus(status)
}

/// Starts `command` (an absolute executable path, then its arguments) with stdin from /dev/null and
/// stdout and stderr to files (`environment`: the whole environment; `nil`: this process's); the
/// caller reaps it with `waitpid`.
public func spawn(_ command: [String], environment: [String: String]?, stdoutPath: String, stderrPath: String) throws -> pid_t {
    var actions = posix_spawn_file_actions_t()
    posix_spawn_file_actions_init(&actions)
    defer { posix_spawn_file_actions_destroy(&actions) }
    posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0)
    posix_spawn_file_actions_addopen(&actions, 1, stdoutPath, O_WRONLY | O_CREAT | O_TRUNC, 0o600)
    posix_spawn_file_actions_addopen(&actions, 2, stderrPath, O_WRONLY | O_CREAT | O_TRUNC, 0o600)
    let argv = command.map { strdup($0) } + [nil]
    let envp = environment.map { $0.map { strdup("\($0.key)=\($0.value)") } + [nil] }
    defer {
        for pointer in argv { free(pointer) }
        for pointer in envp ?? [] { free(pointer) }
    }
    var pid: pid_t = 0
    let spawned = envp.map { posix_spawn(&pid, command[0], &actions, nil, argv, $0) } ?? posix_spawn(&pid, command[0], &actions, nil, argv, environ)
    guard spawned == 0 else { throw TestFailure("cannot run \(command[0]): \(String(cString: strerror(spawned)))") }
    return pid
}

/// A `waitpid` status as an exit status (128 + N for signal N).
public func exitStatus(_ status: Int32) -> Int32 {
    let signal = status & 0x7F
    return signal == 0 ? (status >> 8) & 0xFF : 128 + signal
}

/// Copies the built executable `name` to `destination`, mode 0755, so that any user may run it (the
/// build directory may be private). The copy is made by `cp` in a process of its own: were this
/// (multi-threaded) test process to hold the copy open for writing, a child forked meanwhile by
/// another test could inherit that descriptor and make exec'ing the copy fail with "Text file busy".
public func copyBuiltExecutable(_ name: String, to destination: String) async throws {
    let logs = try TemporaryDirectory("copy-executable")
    let status = try await runToCompletion(
        ["/bin/cp", try BuiltProducts.path(name), destination], environment: ProcessInfo.processInfo.environment,
        stdoutPath: logs.url("out"), stderrPath: logs.url("err"), timeout: .seconds(60))
    guard status == 0 else {
        throw TestFailure("cp \(name) \(destination) failed: \((try? String(contentsOfFile: logs.url("err"), encoding: .utf8)) ?? "")")
    }
    chmod(destination, 0o755)
}

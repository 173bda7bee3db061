import Foundation
import Synchronization

#if canImport(Glibc)
import Glibc
#endif

/// The built executables (`ferryd`, `ferryctl`, `ferry-receiver`), found next to the test binary.
public enum BuiltProducts {
    /// The build directory holding the test bundle and the executables.
    public static var directory: String {
        if let explicit = ProcessInfo.processInfo.environment["FERRY_BUILD_DIR"] { return explicit }
        var buffer = [CChar](repeating: 0, count: 4096)
        let count = readlink("/proc/self/exe", &buffer, buffer.count - 1)
        let executable = count > 0 ? String(decoding: buffer.prefix(Int(count)).map { UInt8(bitPattern: $0) }, as: UTF8.self) : CommandLine.arguments[0]
        var directory = (executable as NSString).deletingLastPathComponent
        // swift test runs <build>/FerryPackageTests.xctest; it may also be inside a bundle directory.
        while !directory.isEmpty && directory != "/" && !FileManager.default.fileExists(atPath: directory + "/ferryd") {
            directory = (directory as NSString).deletingLastPathComponent
        }
        return directory
    }

    public static func path(_ name: String) throws -> String {
        let path = directory + "/" + name
        guard FileManager.default.isExecutableFile(atPath: path) else {
            throw TestFailure("\(name) is not built at \(path); run `swift build` first (swift test builds it)")
        }
        return path
    }
}

/// A child process with its standard error captured to a file, killed when released.
///
/// Spawned and reaped here (`posix_spawn`, `waitpid` of its own pid), not through Foundation's
/// `Process`: Foundation learns that a child ended when the child's end of a socket pair closes,
/// then waits for it with a blocking `waitpid` on its one process-monitor thread, so a child that
/// closes inherited descriptors and lives on (`systemd-socket-activate` before it execs ferryd)
/// held that thread, and every other child's end with it (a parallel test run hung so).
public final class ChildProcess: @unchecked Sendable {
    public let pid: pid_t
    public let logPath: String
    /// The executable's file name, for messages.
    public let name: String
    private let stdoutHandle: FileHandle
    /// The `waitpid` status, once the child is reaped.
    private let reaped = Mutex<Int32?>(nil)

    /// Starts `executable` with `arguments` (and this process's environment with `environment` over
    /// it), stdin from /dev/null; stderr is appended to `logPath`, stdout goes to a pipe.
    public init(executable: String, arguments: [String], logPath: String, environment: [String: String] = [:]) throws {
        _ = FileManager.default.createFile(atPath: logPath, contents: nil)
        self.logPath = logPath
        name = (executable as NSString).lastPathComponent
        var ends: [Int32] = [-1, -1]
        guard pipe(&ends) == 0 else { throw TestFailure("pipe: \(String(cString: strerror(errno)))") }
        for end in ends { _ = fcntl(end, F_SETFD, FD_CLOEXEC) }
        var actions = posix_spawn_file_actions_t()
        posix_spawn_file_actions_init(&actions)
        defer { posix_spawn_file_actions_destroy(&actions) }
        posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0)
        posix_spawn_file_actions_adddup2(&actions, ends[1], 1)
        posix_spawn_file_actions_addopen(&actions, 2, logPath, O_WRONLY | O_APPEND | O_CREAT, 0o600)
        var env = ProcessInfo.processInfo.environment
        for (key, value) in environment { env[key] = value }
        let argv = ([executable] + arguments).map { strdup($0) } + [nil]
        let envp = env.map { strdup("\($0.key)=\($0.value)") } + [nil]
        defer {
            for pointer in argv { free(pointer) }
            for pointer in envp { free(pointer) }
        }
        var pid: pid_t = 0
        let spawned = posix_spawn(&pid, executable, &actions, nil, argv, envp)
        close(ends[1])
        guard spawned == 0 else {
            close(ends[0])
            throw TestFailure("cannot run \(executable): \(String(cString: strerror(spawned)))")
        }
        self.pid = pid
        stdoutHandle = FileHandle(fileDescriptor: ends[0], closeOnDealloc: true)
    }

    deinit {
        if isRunning {
            kill(pid, SIGKILL)
            var status: Int32 = 0
            while waitpid(pid, &status, 0) == -1 && errno == EINTR {}
        }
    }

    /// Whether the child has not exited yet (reaping it if it has).
    public var isRunning: Bool {
        reaped.withLock { reaped in
            if reaped == nil {
                var status: Int32 = 0
                if waitpid(pid, &status, WNOHANG) == pid { reaped = status }
            }
            return reaped == nil
        }
    }

    /// The exit status, or the number of the signal that ended it (as Foundation's `Process`
    /// reports); 0 while it runs.
    public var terminationStatus: Int32 {
        guard !isRunning, let status = reaped.withLock({ $0 }) else { return 0 }
        let signal = status & 0x7F
        return signal == 0 ? (status >> 8) & 0xFF : signal
    }

    /// Everything written to stderr so far.
    public var log: String { (try? String(contentsOfFile: logPath, encoding: .utf8)) ?? "" }

    /// Everything left on stdout until the child closes it (blocking).
    public func remainingStdout() -> String {
        String(decoding: stdoutHandle.readDataToEndOfFile(), as: UTF8.self)
    }

    /// Reads stdout until a line satisfies `predicate`, and returns that line.
    public func readStdoutLine(timeout: Duration = .seconds(30), where predicate: @escaping @Sendable (String) -> Bool) async throws -> String {
        let handle = stdoutHandle
        let found = Mutex<String?>(nil)
        let reader = Thread {
            var pending = Data()
            while true {
                let chunk = handle.availableData
                if chunk.isEmpty { return }
                pending.append(chunk)
                while let newline = pending.firstIndex(of: 0x0A) {
                    let line = String(decoding: pending[pending.startIndex..<newline], as: UTF8.self)
                    pending = Data(pending[(newline + 1)...])
                    if predicate(line) {
                        found.withLock { $0 = line }
                        return
                    }
                }
            }
        }
        reader.start()
        try await waitUntil("a line on stdout of \(name)", timeout: timeout) {
            found.withLock { $0 != nil } || !isRunning
        }
        guard let line = found.withLock({ $0 }) else {
            throw TestFailure("process exited before printing the expected line; stderr:\n\(log)")
        }
        return line
    }

    /// Sends `signal`.
    public func send(_ signal: Int32) {
        if isRunning { kill(pid, signal) }
    }

    /// Waits for the process to exit and returns its status.
    @discardableResult
    public func waitForExit(timeout: Duration = .seconds(30)) async throws -> Int32 {
        try await waitUntil("process \(pid) to exit", timeout: timeout) { !isRunning }
        return terminationStatus
    }
}

/// A `ferryd` run against a configuration in a test directory.
public final class Ferryd: @unchecked Sendable {
    public let child: ChildProcess
    public let configPath: String

    /// Starts `ferryd --config configPath`, appending its stderr to `logPath`.
    public init(configPath: String, logPath: String, environment: [String: String] = [:]) throws {
        self.configPath = configPath
        child = try ChildProcess(
            executable: try BuiltProducts.path("ferryd"), arguments: ["--config", configPath],
            logPath: logPath, environment: environment)
    }

    /// Starts the daemon and waits for its `ready` line.
    public static func start(configPath: String, logPath: String, environment: [String: String] = [:]) async throws -> Ferryd {
        let daemon = try Ferryd(configPath: configPath, logPath: logPath, environment: environment)
        try await daemon.waitForLog("msg=ready")
        return daemon
    }

    public var log: String { child.log }

    /// Waits until the log contains `text` (counting from the start of the log file).
    public func waitForLog(_ text: String, timeout: Duration = .seconds(30)) async throws {
        try await waitUntil("ferryd to log \(text)\n--- log so far ---\n\(log)", timeout: timeout) {
            if log.contains(text) { return true }
            if !child.isRunning { throw TestFailure("ferryd exited (status \(child.terminationStatus)) before logging \(text); log:\n\(log)") }
            return false
        }
    }

    /// SIGTERM, then wait for exit.
    @discardableResult
    public func stop(timeout: Duration = .seconds(30)) async throws -> Int32 {
        child.send(SIGTERM)
        return try await child.waitForExit(timeout: timeout)
    }

    /// SIGKILL, then wait for exit.
    public func kill9() async throws {
        child.send(SIGKILL)
        try await child.waitForExit()
    }
}

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
public final class ChildProcess: @unchecked Sendable {
    public let process: Process
    public let logPath: String
    private let stdoutPipe = Pipe()

    /// Starts `executable` with `arguments`; stderr goes to `logPath`, stdout to a pipe.
    public init(executable: String, arguments: [String], logPath: String, environment: [String: String] = [:]) throws {
        process = Process()
        process.executableURL = URL(fileURLWithPath: executable)
        process.arguments = arguments
        var env = ProcessInfo.processInfo.environment
        for (key, value) in environment { env[key] = value }
        process.environment = env
        _ = FileManager.default.createFile(atPath: logPath, contents: nil)
        self.logPath = logPath
        let log = try FileHandle(forWritingTo: URL(fileURLWithPath: logPath))
        log.seekToEndOfFile()
        process.standardError = log
        process.standardOutput = stdoutPipe
        try process.run()
    }

    deinit {
        if process.isRunning {
            kill(process.processIdentifier, SIGKILL)
            process.waitUntilExit()
        }
    }

    public var pid: Int32 { process.processIdentifier }
    public var isRunning: Bool { process.isRunning }

    /// Everything written to stderr so far.
    public var log: String { (try? String(contentsOfFile: logPath, encoding: .utf8)) ?? "" }

    /// Reads stdout until a line satisfies `predicate`, and returns that line.
    public func readStdoutLine(timeout: Duration = .seconds(30), where predicate: @escaping @Sendable (String) -> Bool) async throws -> String {
        let handle = stdoutPipe.fileHandleForReading
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
        try await waitUntil("a line on stdout of \(process.executableURL?.lastPathComponent ?? "process")", timeout: timeout) {
            found.withLock { $0 != nil } || !process.isRunning
        }
        guard let line = found.withLock({ $0 }) else {
            throw TestFailure("process exited before printing the expected line; stderr:\n\(log)")
        }
        return line
    }

    /// Sends `signal`.
    public func send(_ signal: Int32) {
        kill(process.processIdentifier, signal)
    }

    /// Waits for the process to exit and returns its status.
    @discardableResult
    public func waitForExit(timeout: Duration = .seconds(30)) async throws -> Int32 {
        try await waitUntil("process \(pid) to exit", timeout: timeout) { !process.isRunning }
        return process.terminationStatus
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
            if !child.isRunning { throw TestFailure("ferryd exited (status \(child.process.terminationStatus)) before logging \(text); log:\n\(log)") }
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

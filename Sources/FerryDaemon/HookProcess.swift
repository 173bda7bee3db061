import FerrySystem
import CFerrySystem
import FerryDelivery
import Foundation
import Subprocess
import Synchronization
import SystemPackage

#if canImport(Glibc)
import Glibc
#endif

/// Runs one hook program: never through a shell, in a process group of its own, the job's JSON on
/// standard input, a clean environment, its output drained (so a hook that floods it cannot block)
/// with only the tail kept, and killed with its whole group once `timeout` passes.
struct HookProcess: Sendable {
    var argv: [String]
    var environment: [String: String]
    var workingDirectory: String
    var input: [UInt8]
    var timeout: Duration

    /// The output kept: the last this many bytes (standard output and error together).
    static let outputTailLimit = 4096

    /// How the run ended, the tail of its output, and how many bytes it wrote in all.
    struct Result: Sendable {
        var ending: HookEnding
        var outputTail: String
        var outputBytes: Int
    }

    /// Environment variables a hook inherits from ferryd, with every `LC_*` (no others: ferryd's
    /// environment may hold the secrets its configuration reads with `${env:…}`).
    static let inherited: Set<String> = ["PATH", "LANG", "TZ", "HOME"]

    func run() async -> Result {
        let watch = RunWatch()
        let stdin: FileDescriptor
        do {
            stdin = try Self.memoryFile(holding: input)
        } catch {
            return Result(ending: .failed("cannot prepare the hook's standard input: \(error)"), outputTail: "", outputBytes: 0)
        }
        var options = PlatformOptions()
        options.processGroupID = 0
        // Cancelled (ferryd stopping): the whole group goes, not only the hook's first process.
        options.teardownSequence = [.send(signal: .kill, toProcessGroup: true, allowedDurationToNextStep: .zero)]
        var variables: [Environment.Key: String] = [:]
        let current = ProcessInfo.processInfo.environment
        for (name, value) in current where Self.inherited.contains(name) || name.hasPrefix("LC_") {
            variables[Environment.Key(stringLiteral: name)] = value
        }
        if variables["PATH"] == nil { variables["PATH"] = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin" }
        for (name, value) in environment { variables[Environment.Key(stringLiteral: name)] = value }
        let configuration = Configuration(
            executable: .path(FilePath(argv[0])), arguments: Arguments(Array(argv.dropFirst())), environment: .custom(variables),
            workingDirectory: FilePath(workingDirectory), platformOptions: options)
        let timeout = self.timeout
        let ending: HookEnding = await withTaskGroup(of: HookEnding?.self) { group in
            group.addTask {
                do {
                    let result = try await Subprocess.run(
                        configuration, input: .fileDescriptor(stdin, closeAfterSpawningProcess: true), output: .sequence,
                        error: .combinedWithOutput
                    ) { execution in
                        watch.processGroup.withLock { $0 = execution.processIdentifier.value }
                        for try await buffer in execution.standardOutput {
                            buffer.withUnsafeBytes { bytes in watch.tail.withLock { $0.append(bytes) } }
                        }
                    }
                    switch result.terminationStatus {
                    case .exited(let code): return .exited(code)
                    case .signaled(let signal): return .signalled(signal)
                    }
                } catch {
                    // The descriptor is Subprocess's once handed over: it closes it, spawned or not.
                    return Task.isCancelled ? nil : .failed("cannot run \(argv[0]): \(Self.describe(error))")
                }
            }
            group.addTask {
                try? await EventLoopSleep.sleep(for: timeout)
                return Task.isCancelled ? nil : .timedOut(timeout)
            }
            let first = await group.next() ?? nil
            if case .timedOut = first, let leader = watch.processGroup.withLock({ $0 }) {
                // The whole group: a hook's own children go with it.
                kill(-leader, SIGKILL)
                _ = await group.next()
            } else {
                group.cancelAll()
            }
            return first ?? .failed("stopped: ferryd is shutting down")
        }
        let kept = watch.tail.withLock { $0 }
        return Result(ending: ending, outputTail: kept.text, outputBytes: kept.total)
    }

    /// An anonymous in-memory file holding `bytes`, positioned at its start.
    private static func memoryFile(holding bytes: [UInt8]) throws -> FileDescriptor {
        let fd = cferry_memfd("ferry-hook-input")
        guard fd >= 0 else { throw Errno(rawValue: errno) }
        let descriptor = FileDescriptor(rawValue: fd)
        do {
            _ = try descriptor.writeAll(bytes)
            _ = try descriptor.seek(offset: 0, from: FileDescriptor.SeekOrigin.start)
        } catch {
            try? descriptor.close()
            throw error
        }
        return descriptor
    }

    private static func describe(_ error: any Error) -> String {
        if let error = error as? SubprocessError, let code = error.underlyingError {
            return "\(String(cString: strerror(Int32(code.rawValue))))"
        }
        return "\(error)"
    }
}

/// What the tasks of one run share: the process group to kill, the output kept.
private final class RunWatch: Sendable {
    let processGroup = Mutex<pid_t?>(nil)
    let tail = Mutex(OutputTail(limit: HookProcess.outputTailLimit))
}

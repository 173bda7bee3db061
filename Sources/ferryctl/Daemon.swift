import ArgumentParser
import FerryControl
import Foundation

/// The daemon one invocation talks to: where its socket is, and how results are printed.
struct Daemon: Sendable {
    /// How long a non-streaming request may wait for its reply.
    static let replyTimeout: Double = 30

    let socketPath: String
    /// Whether results are printed as JSON.
    let json: Bool

    init(options: GlobalOptions) throws {
        socketPath = try SocketResolution.socketPath(for: options)
        json = options.json
    }

    /// Sends one request on a fresh connection and returns its raw result.
    /// - Parameter timeout: seconds to wait for the reply (`nil`: no limit); then `ControlClientError.timedOut`.
    func request<Arguments: Encodable & Sendable>(
        _ command: ControlCommand, _ arguments: Arguments, timeout: Double? = Daemon.replyTimeout
    ) async throws -> JSONValue {
        let path = socketPath
        return try await Deadline.run(timeout) {
            try await ControlClient.withConnection(path: path) { connection in
                try await connection.call(command, arguments)
            }
        }
    }

    /// Sends one request and returns its raw result (for `--json`) with the same decoded as `Result`.
    func request<Arguments: Encodable & Sendable, Result: Decodable>(
        _ command: ControlCommand, _ arguments: Arguments, as type: Result.Type, timeout: Double? = Daemon.replyTimeout
    ) async throws -> (raw: JSONValue, result: Result) {
        let raw = try await request(command, arguments, timeout: timeout)
        return (raw, try Self.decode(raw, as: Result.self, what: "the \(command.rawValue) result"))
    }

    /// Runs `body` with a connection of its own, without a time limit (for streams).
    func withConnection<Value: Sendable>(_ body: (inout ControlConnection) async throws -> Value) async throws -> Value {
        try await ControlClient.withConnection(path: socketPath, body)
    }

    /// Decodes a result or event, calling a mismatch an unexpected answer.
    static func decode<Value: Decodable>(_ raw: JSONValue, as type: Value.Type, what: String) throws(ControlClientError) -> Value {
        do {
            return try raw.decode(Value.self)
        } catch {
            throw .protocolViolation("cannot read \(what): \(error)")
        }
    }

    /// Prints a raw result as one pretty-printed JSON document.
    func printJSON(_ raw: JSONValue) throws {
        let encoder = ControlJSON.encoder
        encoder.outputFormatting.insert(.prettyPrinted)
        Terminal.line(String(decoding: try encoder.encode(raw), as: UTF8.self))
    }

    /// Prints one stream item as one compact JSON line.
    static func printJSONLine(_ raw: JSONValue) throws {
        Terminal.out(String(decoding: try ControlJSON.line(raw), as: UTF8.self))
    }
}

/// Runs an operation against a time limit.
enum Deadline {
    /// Runs `operation`, or throws `ControlClientError.timedOut` if it has not finished within
    /// `seconds` (`nil`: no limit). The operation is cancelled when the time is up.
    static func run<Value: Sendable>(
        _ seconds: Double?, _ operation: @escaping @Sendable () async throws -> Value
    ) async throws -> Value {
        guard let seconds else { return try await operation() }
        return try await withThrowingTaskGroup(of: Value?.self) { group in
            group.addTask { try await operation() }
            group.addTask {
                try await Task.sleep(for: .milliseconds(Int64(seconds * 1000)))
                return nil
            }
            defer { group.cancelAll() }
            guard let first = try await group.next(), let value = first else {
                throw ControlClientError.timedOut("ferryd did not answer within \(Format.duration(seconds))")
            }
            return value
        }
    }
}

/// A subcommand that talks to ferryd: `run()` resolves the socket, calls `execute`, and turns
/// errors into one line on stderr and the matching exit status.
protocol DaemonCommand: AsyncParsableCommand {
    var global: GlobalOptions { get }
    func execute(_ daemon: Daemon) async throws
}

extension DaemonCommand {
    mutating func run() async throws {
        let daemon: Daemon
        do {
            daemon = try Daemon(options: global)
        } catch let error as ValidationError {
            Terminal.error(error.message)
            throw ExitStatus.usage.code
        }
        do {
            try await execute(daemon)
        } catch let error as ControlClientError {
            Terminal.error(error.description)
            throw ExitStatus(for: error).code
        } catch let error as ControlError {
            Terminal.error(error.message)
            throw ExitStatus(for: error.code).code
        } catch let error as ExitCode {
            throw error
        } catch let error as ValidationError {
            throw error
        } catch let error as CleanExit {
            throw error
        } catch {
            Terminal.error("\(error)")
            throw ExitStatus.failed.code
        }
    }
}

extension ExitStatus {
    /// The exit status for a failed request.
    init(for error: ControlClientError) {
        switch error {
        case .notReachable, .protocolViolation: self = .unavailable
        case .permissionDenied: self = .permissionDenied
        case .timedOut: self = .timeout
        case .replied(let reply): self.init(for: reply.code)
        }
    }

    /// The exit status for an error reply.
    init(for code: ControlError.Code) {
        switch code {
        case .permissionDenied: self = .permissionDenied
        case .timeout: self = .timeout
        case .unavailable, .busy: self = .unavailable
        default: self = .failed
        }
    }
}

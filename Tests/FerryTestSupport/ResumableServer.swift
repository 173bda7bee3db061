import Foundation

#if canImport(Glibc)
import Glibc
#endif

/// What a resumable-upload test server saw: its `GET /__stats`.
public struct ResumableStats: Decodable, Sendable {
    public struct Request: Decodable, Sendable {
        public var method: String
        public var path: String
        public var bodyBytes: Int
        public var uploadComplete: String?
        public var uploadOffset: String?
        public var contentType: String?
        public var interop: String?
        /// The request's `Idempotency-Key` (the Python server).
        public var idempotencyKey: String?
        /// The status answered (the Python server).
        public var status: Int?
        /// Every status answered, interim ones (104) first (the NIO server).
        public var statuses: [Int]?
    }
    /// An upload the application received whole.
    public struct Completed: Decodable, Sendable {
        public var path: String
        public var size: Int
        public var sha256: String
        public var contentType: String?
        /// The name in the creation's `Content-Disposition` (Python server).
        public var filename: String?
    }
    /// A request a server that knows nothing of the draft took as a whole file (Python server).
    public struct Ordinary: Decodable, Sendable {
        public var path: String
        public var size: Int
        public var sha256: String
        public var filename: String?
    }
    /// An upload the server holds (Python server).
    public struct Upload: Decodable, Sendable {
        public var id: String
        public var offset: Int
        public var complete: Bool
    }
    public var counts: [String: Int]
    /// Request body bytes read, by method.
    public var bodyBytes: [String: Int]
    public var requests: [Request]
    public var completed: [Completed]
    public var ordinary: [Ordinary]?
    public var uploads: [Upload]?
    /// Uploads the NIO application saw end in an error (cancelled, a failed resumption).
    public var failedUploads: [String]?

    /// Body bytes the server read in all.
    public var totalBodyBytes: Int { bodyBytes.values.reduce(0, +) }
}

/// A server of the IETF resumable upload draft on 127.0.0.1: `nio-resumable-server` (swift-nio-extras'
/// NIOResumableUpload, interop 6; built with the tests) or `Tests/Servers/resumable_server.py` (the
/// project's own, interop 9, with faults to order).
public final class ResumableServer: @unchecked Sendable {
    public enum Kind: String, Sendable { case nio, python }

    public let kind: Kind
    public let child: ChildProcess
    /// The server's base URL, `http://127.0.0.1:PORT`.
    public let url: String
    public let port: Int

    /// Starts the server; `options` are the Python server's fault switches (`--max-append-size N`,
    /// `--conflict-once`, `--lose-once`, `--no-resumption`).
    public init(_ kind: Kind, logPath: String, options: [String] = []) async throws {
        self.kind = kind
        switch kind {
        case .nio:
            child = try ChildProcess(executable: try BuiltProducts.path("nio-resumable-server"), arguments: [], logPath: logPath)
        case .python:
            let script = URL(fileURLWithPath: #filePath).deletingLastPathComponent()
                .appendingPathComponent("../Servers/resumable_server.py").standardized.path
            let (python, prefix) = S3TestServer.pythonArguments
            child = try ChildProcess(executable: python, arguments: prefix + [script] + options, logPath: logPath)
        }
        let line = try await child.readStdoutLine { $0.hasPrefix("{\"listening\"") }
        guard let listening = try? JSONDecoder().decode([String: String].self, from: Data(line.utf8))["listening"],
              let port = URLComponents(string: listening)?.port else {
            throw TestFailure("the resumable test server printed \(line)")
        }
        url = listening
        self.port = port
    }

    deinit {
        if child.isRunning { child.send(SIGKILL) }
    }

    public var log: String { child.log }

    public func stats() throws -> ResumableStats {
        let answer = try httpRequest(port: port, path: "/__stats")
        guard answer.status == 200 else { throw TestFailure("GET /__stats from the resumable server: \(answer)") }
        let decoder = JSONDecoder()
        decoder.keyDecodingStrategy = .convertFromSnakeCase
        do {
            return try decoder.decode(ResumableStats.self, from: Data(answer.body.utf8))
        } catch {
            throw TestFailure("the resumable server's stats did not decode (\(error)): \(answer.body)")
        }
    }

    public func stop() async {
        guard child.isRunning else { return }
        child.send(SIGTERM)
        _ = try? await child.waitForExit(timeout: .seconds(10))
    }
}

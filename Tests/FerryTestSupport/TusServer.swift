import Foundation

#if canImport(Glibc)
import Glibc
#endif

/// What the tus server saw: its `GET /__stats`.
public struct TusStats: Decodable, Sendable {
    /// One request as the server's middleware recorded it; `cut` when `--cut-at` reset it (its
    /// `status` is what the app answered, which the client never saw).
    public struct Request: Decodable, Sendable {
        public var method: String
        public var path: String
        public var uploadOffset: Int?
        public var bodyBytes: Int
        public var status: Int?
        public var cut: Bool
    }
    /// An upload in the files directory (`size` is nil while its length is deferred).
    public struct Upload: Decodable, Sendable {
        public var id: String
        public var name: String?
        public var size: Int?
        public var offset: Int
    }
    /// A complete upload: `name` from the `filename` metadata, `sha256` of the stored file.
    public struct Completed: Decodable, Sendable {
        public var id: String
        public var name: String?
        public var size: Int
        public var sha256: String
    }
    /// PATCH body bytes the tus app read (stored, except a body refused past Upload-Length).
    public var patchBytes: Int
    /// POST body bytes (creation-with-upload).
    public var postBytes: Int
    /// Requests by method: OPTIONS, POST, HEAD, PATCH, DELETE.
    public var counts: [String: Int]
    public var cuts: Int
    /// PATCH requests `--stall-at` stopped reading (0 or 1).
    public var stalls: Int
    /// PATCH requests `--pause-at` held (0 or 1).
    public var pauses: Int
    public var requests: [Request]
    public var uploads: [Upload]
    public var completed: [Completed]
}

/// `Tests/Servers/tus_server.py`: a real tus 1.0 server (tuspyserver 4.4.3 under uvicorn) behind a
/// proxy that, with `cutAt`, resets the first PATCH taking an upload to that byte (the server keeps
/// exactly `cutAt` bytes, so HEAD then answers Upload-Offset: cutAt).
public final class TusServer: @unchecked Sendable {
    public let child: ChildProcess
    public let filesDirectory: String
    /// The tus endpoint (creation URL) to configure in Ferry, e.g. `http://127.0.0.1:PORT/files`.
    public let url: String
    public let port: Int

    public static var script: String {
        URL(fileURLWithPath: #filePath).deletingLastPathComponent()
            .appendingPathComponent("../Servers/tus_server.py").standardized.path
    }

    /// Starts the server storing uploads in `filesDirectory` and waits for its listening line.
    public static func start(filesDirectory: String, cutAt: Int? = nil, stallAt: Int? = nil, pauseAt: Int? = nil) async throws -> TusServer {
        try await TusServer(filesDirectory: filesDirectory, cutAt: cutAt, stallAt: stallAt, pauseAt: pauseAt)
    }

    public init(filesDirectory: String, cutAt: Int? = nil, stallAt: Int? = nil, pauseAt: Int? = nil) async throws {
        self.filesDirectory = filesDirectory
        let explicit = ProcessInfo.processInfo.environment["FERRY_TEST_PYTHON"]
        let arguments = (explicit == nil ? ["python3"] : []) + [Self.script, "--files", filesDirectory]
            + (cutAt.map { ["--cut-at", String($0)] } ?? [])
            + (stallAt.map { ["--stall-at", String($0)] } ?? [])
            + (pauseAt.map { ["--pause-at", String($0)] } ?? [])
        child = try ChildProcess(executable: PythonReceiver.python, arguments: arguments, logPath: filesDirectory + ".log")
        let line: String
        do {
            line = try await child.readStdoutLine { $0.hasPrefix("{\"listening\"") }
        } catch {
            throw TestFailure("""
                the tus test server did not start; install it with
                `scripts/install-deps.sh --test` (tuspyserver 4.4.3, uvicorn; make test does). Its output:
                \(child.log)
                """)
        }
        guard let listening = try? JSONDecoder().decode([String: String].self, from: Data(line.utf8))["listening"],
              let port = URLComponents(string: listening)?.port else {
            throw TestFailure("the tus test server printed an unexpected line: \(line)")
        }
        url = listening
        self.port = port
    }

    deinit {
        if child.isRunning { child.send(SIGKILL) }
    }

    /// Everything the server wrote to stderr so far (one line per request).
    public var log: String { child.log }

    /// The server's counters, requests and uploads (hashing complete uploads it has not hashed yet).
    public func stats() async throws -> TusStats {
        let body = try tusHTTPGet(port: port, path: "/__stats")
        do {
            return try JSONDecoder().decode(TusStats.self, from: Data(body.utf8))
        } catch {
            throw TestFailure("the tus server's stats did not decode (\(error)): \(body)")
        }
    }

    /// Makes the server give up on the request `stallAt` stalled (its client is taken as gone): the
    /// server keeps the bytes it read. A request `pauseAt` held is read on.
    public func release() throws {
        _ = try tusHTTPGet(port: port, path: "/__release")
    }

    /// SIGTERM, then wait for exit.
    public func stop(timeout: Duration = .seconds(10)) async throws {
        guard child.isRunning else { return }
        child.send(SIGTERM)
        try await child.waitForExit(timeout: timeout)
    }
}

/// `GET path` on 127.0.0.1:`port`; the body of a 200 answer.
private func tusHTTPGet(port: Int, path: String) throws -> String {
    let answer = try httpRequest(port: port, path: path)
    guard answer.status == 200 else { throw TestFailure("GET \(path) from the tus server: \(answer)") }
    return answer.body
}

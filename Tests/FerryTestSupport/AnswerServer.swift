import Foundation

#if canImport(Glibc)
import Glibc
#endif

/// `Tests/Servers/answer_server.py`: an ingest API that answers 201 with `{"id": N, …}`, a
/// `Location`, an `ETag` and an `X-Request-Id`, and may check or echo RFC 9530 digests.
public final class AnswerServer: @unchecked Sendable {
    /// One request as the server logged it.
    public struct Request: Decodable, Sendable {
        public var n: Int
        public var method: String
        public var path: String
        public var headers: [String: String]
        public var size: Int
        public var sha256: String
        public var status: Int

        public func header(_ name: String) -> String? {
            headers.first { $0.key.caseInsensitiveCompare(name) == .orderedSame }?.value
        }
    }

    public let child: ChildProcess
    public let directory: String
    public let url: String
    public let port: Int

    public static var script: String {
        URL(fileURLWithPath: #filePath).deletingLastPathComponent().appendingPathComponent("../Servers/answer_server.py").standardized.path
    }

    /// `statuses`: the first requests are answered with these; `checkDigest`: 400 on a digest that
    /// does not match; `echoDigest`: 2xx answers carry `Repr-Digest` of the file received.
    public init(directory: String, statuses: [Int] = [], checkDigest: Bool = false, echoDigest: Bool = false) async throws {
        self.directory = directory
        let (python, prefix) = S3TestServer.pythonArguments
        var arguments = prefix + [Self.script, "--directory", directory]
        if !statuses.isEmpty { arguments += ["--statuses", statuses.map(String.init).joined(separator: ",")] }
        if checkDigest { arguments.append("--check-digest") }
        if echoDigest { arguments.append("--echo-digest") }
        child = try ChildProcess(executable: python, arguments: arguments, logPath: directory + ".log")
        let line = try await child.readStdoutLine { $0.hasPrefix("listening on ") }
        url = String(line.dropFirst("listening on ".count))
        port = Int(url.split(separator: ":").last ?? "") ?? 0
    }

    deinit { if child.isRunning { child.send(SIGKILL) } }

    /// Requests answered so far, in order.
    public var requests: [Request] {
        guard let text = try? String(contentsOfFile: directory + "/requests.jsonl", encoding: .utf8) else { return [] }
        return text.split(separator: "\n").compactMap { try? JSONDecoder().decode(Request.self, from: Data($0.utf8)) }
    }

    public func stop() async {
        child.send(SIGTERM)
        _ = try? await child.waitForExit(timeout: .seconds(10))
    }
}

import Foundation

/// One request as the Python receiver (Werkzeug or python-multipart) parsed it.
public struct PythonReceivedRequest: Decodable, Sendable {
    public struct File: Decodable, Sendable {
        /// The part's place among the body's file parts, from 0 (``PythonReceivedRequest/files`` is in this order).
        public var index: Int
        public var field: String
        public var filename: String?
        public var contentType: String?
        public var size: Int
        public var sha256: String

        enum CodingKeys: String, CodingKey {
            case index, field, filename, size, sha256
            case contentType = "content_type"
        }
    }
    public var method: String
    public var path: String
    /// Every header as sent (names in the client's case).
    public var headers: [String: String]
    /// Each text field's first value.
    public var fields: [String: String]
    /// Every value of each text field, in body order (a repeated field has several).
    public var fieldLists: [String: [String]]
    /// The file parts in body order.
    public var files: [File]
    public var status: Int
    public var error: String?

    enum CodingKeys: String, CodingKey {
        case method, path, headers, fields, files, status, error
        case fieldLists = "field_lists"
    }

    /// Header `name`, whatever its case.
    public func header(_ name: String) -> String? {
        headers.first { $0.key.lowercased() == name.lowercased() }?.value
    }

    /// The `Idempotency-Key` header.
    public var idempotencyKey: String? { header("Idempotency-Key") }
}

/// `Tests/Servers/multipart_server.py` run with a third-party parser: an independent server to
/// check Ferry's bodies against.
public final class PythonReceiver: @unchecked Sendable {
    public enum Parser: String, Sendable { case werkzeug, pythonMultipart = "python-multipart" }

    public let child: ChildProcess
    public let directory: String
    public let url: String

    public static var script: String {
        URL(fileURLWithPath: #filePath).deletingLastPathComponent()
            .appendingPathComponent("../Servers/multipart_server.py").standardized.path
    }

    /// The interpreter: `$FERRY_TEST_PYTHON`, else `python3` on the PATH.
    public static var python: String {
        ProcessInfo.processInfo.environment["FERRY_TEST_PYTHON"] ?? "/usr/bin/env"
    }

    public init(parser: Parser, directory: String) async throws {
        self.directory = directory
        let explicit = ProcessInfo.processInfo.environment["FERRY_TEST_PYTHON"]
        let arguments = (explicit == nil ? ["python3"] : []) + [Self.script, "--parser", parser.rawValue, "--directory", directory]
        child = try ChildProcess(executable: Self.python, arguments: arguments, logPath: directory + ".log")
        let line: String
        do {
            line = try await child.readStdoutLine { $0.hasPrefix("listening on ") }
        } catch {
            throw TestFailure("""
                the \(parser.rawValue) test server did not start; install its parser with
                `pip install werkzeug python-multipart` (make test does). Its output:
                \(child.log)
                """)
        }
        url = String(line.dropFirst("listening on ".count))
    }

    deinit { child.send(SIGKILL_) }

    /// Requests parsed so far.
    public var requests: [PythonReceivedRequest] {
        guard let text = try? String(contentsOfFile: directory + "/requests.jsonl", encoding: .utf8) else { return [] }
        return text.split(separator: "\n").compactMap { try? JSONDecoder().decode(PythonReceivedRequest.self, from: Data($0.utf8)) }
    }
}

#if canImport(Glibc)
import Glibc
let SIGKILL_ = SIGKILL
#endif

import Foundation

#if canImport(Glibc)
import Glibc
#endif

/// A real S3 server on 127.0.0.1 for tests, started by `Tests/Servers/s3_server.py` (moto_server,
/// `rclone serve s3`, SeaweedFS's `weed`), with one bucket, checking SigV4 signatures with the keys
/// below where the server can; and a view of what it holds (through boto3).
public final class S3TestServer: @unchecked Sendable {
    /// The servers the tests run against.
    public enum Kind: String, Sendable, CaseIterable, CustomStringConvertible {
        case moto, rclone, seaweedfs
        public var description: String { rawValue }
    }

    public static let accessKey = "AKIAFERRYTEST0000001"
    public static let secretKey = "ferry/test+secret=key0000000000000000000"
    public static let bucket = "ferry-test"
    /// A key moto and SeaweedFS let only read and list (`READER_ACCESS_KEY` of the script).
    public static let readerAccessKey = "AKIAFERRYREADER00001"
    public static let readerSecretKey = "ferry/reader+secret=key00000000000000000"

    public let kind: Kind
    public let child: ChildProcess
    /// The endpoint, `http://127.0.0.1:PORT`.
    public let endpoint: String
    public let port: Int

    public static var script: String {
        URL(fileURLWithPath: #filePath).deletingLastPathComponent().appendingPathComponent("../Servers/s3_server.py").standardized.path
    }

    static var pythonArguments: (String, [String]) {
        if let explicit = ProcessInfo.processInfo.environment["FERRY_TEST_PYTHON"] { return (explicit, []) }
        return ("/usr/bin/env", ["python3"])
    }

    /// Starts a server of `kind` with its data under `directory`; throws ``Unavailable`` when the
    /// server program is not installed.
    public init(kind: Kind, directory: String) async throws {
        self.kind = kind
        let (python, prefix) = Self.pythonArguments
        // Port 0: the script picks one, and another if the server does not come up on it.
        child = try ChildProcess(
            executable: python,
            arguments: prefix + [Self.script, "serve", "--kind", kind.rawValue, "--port", "0", "--dir", directory,
                                 "--access-key", Self.accessKey, "--secret-key", Self.secretKey, "--bucket", Self.bucket],
            logPath: directory + ".log")
        let line: String
        do {
            line = try await child.readStdoutLine(timeout: .seconds(60)) { $0.hasPrefix("ready ") || $0.hasPrefix("unavailable") }
        } catch {
            throw TestFailure("the \(kind) S3 server did not start (scripts/install-deps.sh --test installs it):\n\(child.log)")
        }
        if line.hasPrefix("unavailable") { throw TestFailure("the \(kind) S3 server is not installed (scripts/install-deps.sh --test): \(line)") }
        endpoint = String(line.dropFirst("ready ".count))
        guard let port = endpoint.split(separator: ":").last.flatMap({ Int($0) }) else {
            throw TestFailure("the \(kind) S3 server said \(line)")
        }
        self.port = port
    }

    deinit {
        if child.isRunning { child.send(SIGTERM) }
    }

    public func stop() async {
        guard child.isRunning else { return }
        child.send(SIGTERM)
        _ = try? await child.waitForExit(timeout: .seconds(20))
        if child.isRunning { child.send(SIGKILL) }
    }

    public var log: String { child.log }

    // MARK: What the server holds

    /// An object as the server returns it.
    public struct Object: Decodable, Sendable {
        public var size: Int
        public var sha256: String
        public var etag: String?
        public var metadata: [String: String]
        public var contentType: String?
        /// In a bucket with versioning on.
        public var versionID: String?
        public var storageClass: String?

        enum CodingKeys: String, CodingKey {
            case size, sha256, etag, metadata
            case contentType = "content_type", versionID = "version_id", storageClass = "storage_class"
        }
    }

    /// An open multipart upload.
    public struct OpenUpload: Decodable, Sendable {
        public var key: String
        public var uploadID: String

        enum CodingKeys: String, CodingKey {
            case key = "Key", uploadID = "UploadId"
        }
    }

    public func object(_ key: String) throws -> Object? {
        let (status, output) = try inspect(["object", key])
        guard status == 0 else { return nil }
        return try JSONDecoder().decode(Object.self, from: Data(output.utf8))
    }

    public func openUploads() throws -> [OpenUpload] {
        let (status, output) = try inspect(["uploads"])
        guard status == 0 else { throw TestFailure("listing uploads failed: \(output)") }
        return try JSONDecoder().decode([OpenUpload].self, from: Data(output.utf8))
    }

    public func keys() throws -> [String] {
        let (status, output) = try inspect(["keys"])
        guard status == 0 else { throw TestFailure("listing keys failed: \(output)") }
        return try JSONDecoder().decode([String].self, from: Data(output.utf8))
    }

    /// Aborts every open multipart upload, as another client or a lifecycle rule would; returns how many.
    @discardableResult
    public func abortUploads() throws -> Int {
        let (status, output) = try inspect(["abort-uploads"])
        guard status == 0, let count = Int(output.trimmingCharacters(in: .whitespacesAndNewlines)) else {
            throw TestFailure("aborting uploads failed: \(output)")
        }
        return count
    }

    /// Turns versioning on for the bucket (moto and SeaweedFS; rclone answers NotImplemented).
    public func enableVersioning() throws {
        let (status, output) = try inspect(["enable-versioning"])
        guard status == 0 else { throw TestFailure("enabling versioning failed: \(output)") }
    }

    /// Runs `s3_server.py inspect …` and returns its exit status and output. Spawned and reaped
    /// here (`spawn`, `waitpid` of its own pid) rather than through Foundation's `Process`: a
    /// parallel test run hung in its `waitUntilExit` while Foundation's process-monitor thread
    /// waited on the live ferryd of `systemd-socket-activate` (see `runToCompletion`).
    private func inspect(_ command: [String]) throws -> (Int32, String) {
        let (python, prefix) = Self.pythonArguments
        let arguments = [python] + prefix + [Self.script, "inspect", "--endpoint", endpoint, "--access-key", Self.accessKey,
                                             "--secret-key", Self.secretKey, "--bucket", Self.bucket] + command
        let scratch = try TemporaryDirectory("ferry-s3-inspect")
        let (stdoutPath, stderrPath) = (scratch.url("stdout"), scratch.url("stderr"))
        let pid = try spawn(arguments, environment: nil, stdoutPath: stdoutPath, stderrPath: stderrPath)
        var status: Int32 = 0
        while waitpid(pid, &status, 0) == -1 && errno == EINTR {}
        let output = (try? String(contentsOfFile: stdoutPath, encoding: .utf8)) ?? ""
        let errors = (try? String(contentsOfFile: stderrPath, encoding: .utf8)) ?? ""
        let exit = exitStatus(status)
        return (exit, exit == 0 ? output : output + errors)
    }
}

/// `Tests/Servers/cut_proxy.py`: a TCP proxy that counts the bytes clients send, and can reset the
/// connection carrying a given byte, hold the upload to a rate, flip a bit in transit, or lose the
/// answer to one request.
public final class CutProxy: @unchecked Sendable {
    public let child: ChildProcess
    public let port: Int

    public struct Stats: Decodable, Sendable {
        public var upstreamBytes: Int
        public var cuts: Int
        public var connections: Int
        /// The most requests in flight at once (sent, not yet answered).
        public var mostInFlight: Int
        /// Bytes changed in transit (`flip`).
        public var flips: Int
        /// Answers not passed on (`dropAnswer`).
        public var droppedAnswers: Int

        enum CodingKeys: String, CodingKey {
            case upstreamBytes = "upstream_bytes", cuts, connections, flips
            case droppedAnswers = "dropped_answers"
            case mostInFlight = "most_in_flight"
        }
    }

    /// `flip`: the first occurrence of this text the clients send has a bit flipped, once.
    /// `dropAnswer`: a regular expression; the first request that matches it reaches the server, and
    /// its answer is lost (the client's connection is closed when the answer starts), once; the
    /// client gets `replacement` (a whole HTTP response) instead, if given. `cutEvery`: every
    /// connection is cut once it has carried that many bytes from ferryd (a link that keeps dropping).
    public init(
        target: Int, cutAt: Int? = nil, cutEvery: Int? = nil, rate: Int? = nil, flip: String? = nil, dropAnswer: String? = nil,
        replacement: String? = nil, logPath: String
    ) async throws {
        let script = URL(fileURLWithPath: #filePath).deletingLastPathComponent().appendingPathComponent("../Servers/cut_proxy.py").standardized.path
        let (python, prefix) = S3TestServer.pythonArguments
        child = try ChildProcess(
            executable: python,
            arguments: prefix + [script, "--target", "127.0.0.1:\(target)"] + (cutAt.map { ["--cut-at", String($0)] } ?? [])
                + (cutEvery.map { ["--cut-every", String($0)] } ?? []) + (rate.map { ["--rate", String($0)] } ?? []) + (flip.map { ["--flip", $0] } ?? [])
                + (dropAnswer.map { ["--drop-answer", $0] } ?? []) + (replacement.map { ["--replacement", $0] } ?? []),
            logPath: logPath)
        let line = try await child.readStdoutLine { $0.hasPrefix("{\"listening\"") }
        guard let port = (try? JSONDecoder().decode([String: Int].self, from: Data(line.utf8)))?["listening"] else {
            throw TestFailure("the proxy printed \(line)")
        }
        self.port = port
    }

    deinit {
        if child.isRunning { child.send(SIGKILL) }
    }

    public var url: String { "http://127.0.0.1:\(port)" }

    public func stats() throws -> Stats {
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        guard fd >= 0 else { throw TestFailure("socket: \(errno)") }
        defer { close(fd) }
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_port = in_port_t(UInt16(port).bigEndian)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        let connected = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { connect(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
        }
        guard connected == 0 else { throw TestFailure("cannot reach the proxy") }
        _ = "STATS\n".withCString { write(fd, $0, 6) }
        var data = Data()
        var buffer = [UInt8](repeating: 0, count: 4096)
        while true {
            let count = read(fd, &buffer, buffer.count)
            if count <= 0 { break }
            data.append(contentsOf: buffer[0..<count])
        }
        return try JSONDecoder().decode(Stats.self, from: data)
    }

    public func stop() async {
        child.send(SIGTERM)
        _ = try? await child.waitForExit(timeout: .seconds(10))
    }
}

/// A TCP port on 127.0.0.1 that nothing listens on right now.
public func freeLoopbackPort() throws -> Int {
    let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
    guard fd >= 0 else { throw TestFailure("socket: \(errno)") }
    defer { close(fd) }
    var address = sockaddr_in()
    address.sin_family = sa_family_t(AF_INET)
    address.sin_port = 0
    address.sin_addr.s_addr = inet_addr("127.0.0.1")
    let bound = withUnsafePointer(to: &address) {
        $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
    }
    guard bound == 0 else { throw TestFailure("bind: \(errno)") }
    var length = socklen_t(MemoryLayout<sockaddr_in>.size)
    _ = withUnsafeMutablePointer(to: &address) {
        $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { getsockname(fd, $0, &length) }
    }
    return Int(UInt16(bigEndian: address.sin_port))
}

import Foundation

#if canImport(Glibc)
import Glibc
#endif

/// WsgiDAV, a WebDAV server written by others (RFC 4918: a PUT into a missing collection is 409,
/// MKCOL makes one), serving a directory on 127.0.0.1 through `Tests/Servers/dav_server.py`.
public final class DAVServer: @unchecked Sendable {
    public let child: ChildProcess
    /// `http://127.0.0.1:PORT`.
    public let url: String
    /// The directory served: what the server stored.
    public let root: String

    /// - Parameter mkcolBusy: how many MKCOL requests are answered 503 with `Retry-After: 1` first.
    public init(root: String, logPath: String, mkcolBusy: Int = 0) async throws {
        self.root = root
        try FileManager.default.createDirectory(atPath: root, withIntermediateDirectories: true)
        let script = URL(fileURLWithPath: #filePath).deletingLastPathComponent()
            .appendingPathComponent("../Servers/dav_server.py").standardized.path
        let (python, prefix) = S3TestServer.pythonArguments
        child = try ChildProcess(executable: python, arguments: prefix + [script, "--root", root, "--mkcol-busy", "\(mkcolBusy)"], logPath: logPath)
        let line = try await child.readStdoutLine { $0.hasPrefix("{\"listening\"") }
        guard let listening = try? JSONDecoder().decode([String: String].self, from: Data(line.utf8))["listening"] else {
            throw TestFailure("the WebDAV test server printed \(line)")
        }
        url = listening
    }

    deinit {
        if child.isRunning { child.send(SIGKILL) }
    }

    public var log: String { child.log }

    public func stop() async {
        guard child.isRunning else { return }
        child.send(SIGTERM)
        _ = try? await child.waitForExit(timeout: .seconds(10))
    }
}

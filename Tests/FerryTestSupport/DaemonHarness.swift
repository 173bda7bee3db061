import FerryQueue
import FerryReceiver
import Foundation

/// A spool section of a test configuration.
public struct TestSpool: Sendable {
    public var name = "test"
    /// Extra `key = value` lines inside `[[spool]]` (before any sub-table).
    public var options: [String] = []
    /// `[spool.fields]` entries, already TOML-quoted values.
    public var fields: [String] = []
    /// `[spool.headers]` entries.
    public var headers: [String] = []
    /// `[spool.retry]` entries; the default retries fast for tests.
    public var retry: [String] = ["initial_delay = \"100ms\"", "max_delay = \"1s\""]
    /// The path of the spool's URL on the harness's receiver; default `/upload/NAME`.
    public var urlPath: String?

    public init(
        name: String = "test", options: [String] = [], fields: [String] = [], headers: [String] = [], retry: [String]? = nil,
        urlPath: String? = nil
    ) {
        self.urlPath = urlPath
        self.name = name
        self.options = options
        self.fields = fields
        self.headers = headers
        if let retry { self.retry = retry }
    }
}

/// A temp directory with a spool, a receiver on 127.0.0.1, a configuration file and a `ferryd`
/// process using them. Use through ``withDaemonHarness(spools:topLevel:plan:_:)`` so everything is
/// stopped and removed whether the test passes or not.
public final class DaemonHarness: @unchecked Sendable {
    public let directory: TemporaryDirectory
    public let receiver: Receiver
    public let configPath: String
    public let logPath: String
    public private(set) var daemon: Ferryd?
    public let spools: [TestSpool]

    /// The control socket's path.
    public let controlSocket: String

    public init(
        spools: [TestSpool] = [TestSpool()], topLevel: [String] = [], url: String? = nil, controlSocket: String? = nil,
        plan: (@Sendable (RequestInfo) -> ReceiverAction)? = nil
    ) async throws {
        directory = try TemporaryDirectory()
        receiver = try await Receiver.start(directory: directory.url("received"), plan: plan)
        configPath = directory.url("ferry.toml")
        logPath = directory.url("ferryd.log")
        self.spools = spools
        let base = directory
        self.controlSocket = controlSocket.map { base.url($0) } ?? base.url("state/control.sock")
        var lines = [
            "state_directory = \"\(directory.url("state"))\"",
            "control_socket = \"\(self.controlSocket)\"",
            "log_level = \"debug\"",
        ] + topLevel
        for spool in spools {
            let spoolDirectory = try directory.makeDirectory("spool-\(spool.name)")
            lines += ["", "[[spool]]", "name = \"\(spool.name)\"", "directory = \"\(spoolDirectory)\"",
                      "url = \"\(url ?? receiver.url(path: spool.urlPath ?? "/upload/\(spool.name)"))\""]
            if !spool.options.contains(where: { $0.hasPrefix("settle") }) { lines.append("settle = \"300ms\"") }
            lines += spool.options
            if !spool.fields.isEmpty { lines += ["[spool.fields]"] + spool.fields }
            if !spool.headers.isEmpty { lines += ["[spool.headers]"] + spool.headers }
            if !spool.retry.isEmpty { lines += ["[spool.retry]"] + spool.retry }
        }
        try lines.joined(separator: "\n").write(toFile: configPath, atomically: true, encoding: .utf8)
    }

    /// The directory of spool `name`.
    public func spoolPath(_ name: String = "test") -> String { directory.url("spool-\(name)") }

    /// Starts ferryd and waits until it is ready.
    public func start(environment: [String: String] = [:]) async throws {
        daemon = try await Ferryd.start(configPath: configPath, logPath: logPath, environment: environment)
    }

    /// Drops a file into a spool the way producers should (rename into place).
    @discardableResult
    public func drop(_ name: String, _ bytes: [UInt8], spool: String = "test") throws -> String {
        let path = spoolPath(spool) + "/" + name
        try dropFile(bytes, at: path)
        return path
    }

    /// The queue, opened read-only beside the running daemon.
    public func queue() throws -> JobStore {
        try JobStore(path: directory.url("state/queue.sqlite"), readOnly: true)
    }

    /// Waits until the receiver has accepted `count` files.
    public func waitForAccepted(_ count: Int, timeout: Duration = .seconds(30)) async throws {
        try await waitUntil("\(count) accepted uploads (have \(receiver.acceptedRequests.count))\n--- ferryd log ---\n\(daemon?.log ?? "")", timeout: timeout) {
            receiver.acceptedRequests.count >= count
        }
    }

    /// Waits until every job is done or failed and its file dealt with.
    public func waitForQuiet(timeout: Duration = .seconds(30)) async throws {
        try await waitUntil("the queue to drain\n--- ferryd log ---\n\(daemon?.log ?? "")", timeout: timeout) {
            let store = try queue()
            defer { try? store.close() }
            let counts = try await store.counts().values.reduce(into: [JobState: Int]()) { total, perSpool in
                for (state, count) in perSpool { total[state, default: 0] += count }
            }
            let active = JobState.active.reduce(0) { $0 + (counts[$1] ?? 0) }
            let pending = try await store.pendingDispositions(limit: 1)
            return active == 0 && pending.isEmpty && (counts[.done, default: 0] + counts[.failed, default: 0]) > 0
        }
    }

    /// Runs `ferryctl` against this daemon's control socket.
    public func ctl(_ arguments: String..., asUser user: String? = nil, executable: String? = nil) async throws -> FerryctlResult {
        try await runFerryctl(arguments, socket: controlSocket, asUser: user, executable: executable)
    }

    /// Stops the daemon (SIGTERM) and the receiver.
    public func shutdown() async {
        if let daemon, daemon.child.isRunning { _ = try? await daemon.stop() }
        try? await receiver.stop()
    }

    /// Kills the daemon with SIGKILL.
    public func kill9() async throws {
        try await daemon?.kill9()
    }
}

/// Runs `body` with a fresh harness, always shutting it down afterwards.
public func withDaemonHarness<T>(
    spools: [TestSpool] = [TestSpool()], topLevel: [String] = [], url: String? = nil, controlSocket: String? = nil,
    plan: (@Sendable (RequestInfo) -> ReceiverAction)? = nil,
    _ body: (DaemonHarness) async throws -> T
) async throws -> T {
    let harness = try await DaemonHarness(spools: spools, topLevel: topLevel, url: url, controlSocket: controlSocket, plan: plan)
    do {
        let result = try await body(harness)
        await harness.shutdown()
        return result
    } catch {
        await harness.shutdown()
        throw error
    }
}

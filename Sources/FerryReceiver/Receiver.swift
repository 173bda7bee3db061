import Foundation
import Logging
import NIOCore
import NIOPosix
import NIOSSL
import Synchronization

/// A real HTTP/1.1 server on loopback that receives uploads: it parses `multipart/form-data`
/// bodies as they stream in, stores each file part under its file name in a directory, and records
/// every request (headers, fields, file sizes and SHA-256, `Idempotency-Key`).
///
/// `ferryd demo` runs one as its destination; the tests and the benchmarks run it as the server
/// under test, and a ``plan`` makes it misbehave on cue (errors, `Retry-After`, stalls, resets).
public final class Receiver: Sendable {
    /// The address it listens on.
    public let host: String
    /// The port it listens on (chosen by the kernel when started with port 0).
    public let port: Int
    /// Where received files are stored.
    public let directory: String

    private let channel: any Channel
    let core: ReceiverCore

    /// Starts listening. The receiver only binds to the address given; tests use 127.0.0.1.
    /// - Parameters:
    ///   - plan: decides per request what to do; `nil` stores everything and answers 201.
    ///   - discard: parse bodies but neither store nor hash file parts (a fast sink for benchmarks;
    ///     sizes are still recorded).
    ///   - tls: serve HTTPS with this certificate and key (tests use a CA they make themselves).
    ///   - keepFiles: `false` hashes file parts without writing them (the size and SHA-256 are still
    ///     recorded, and in the manifest): for torture runs that move gigabytes.
    ///   - manifest: append one JSON line per stored file to this file (see ``ReceiverManifest``).
    public static func start(
        host: String = "127.0.0.1", port: Int = 0, directory: String,
        group: any EventLoopGroup = MultiThreadedEventLoopGroup.singleton,
        plan: (@Sendable (RequestInfo) -> ReceiverAction)? = nil,
        discard: Bool = false,
        keepFiles: Bool = true,
        manifest: String? = nil,
        tls: TLSConfiguration? = nil,
        logger: Logger = Logger(label: "ferry.receiver")
    ) async throws -> Receiver {
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        let manifestWriter = try manifest.map { try ReceiverManifest(path: $0) }
        let core = ReceiverCore(directory: directory, plan: plan, discard: discard, keepFiles: keepFiles, manifest: manifestWriter, logger: logger)
        let sslContext = try tls.map { try NIOSSLContext(configuration: $0) }
        let bootstrap = ServerBootstrap(group: group)
            .serverChannelOption(.backlog, value: 512)
            .serverChannelOption(.socketOption(.so_reuseaddr), value: 1)
            .childChannelOption(.recvAllocator, value: AdaptiveRecvByteBufferAllocator(minimum: 4096, initial: 65536, maximum: 1 << 20))
            .childChannelInitializer { channel in
                core.track(channel)
                return channel.eventLoop.makeCompletedFuture {
                    try channel.pipeline.syncOperations.addHandler(ReadPacer())
                    if let sslContext {
                        try channel.pipeline.syncOperations.addHandler(NIOSSLServerHandler(context: sslContext))
                    }
                    try channel.pipeline.syncOperations.configureHTTPServerPipeline(withErrorHandling: true)
                    try channel.pipeline.syncOperations.addHandler(ReceiverHandler(core: core))
                }
            }
        let channel = try await bootstrap.bind(host: host, port: port).get()
        return Receiver(host: host, port: channel.localAddress?.port ?? port, directory: directory, channel: channel, core: core,
                        scheme: tls == nil ? "http" : "https")
    }

    private let scheme: String

    private init(host: String, port: Int, directory: String, channel: any Channel, core: ReceiverCore, scheme: String) {
        self.host = host
        self.port = port
        self.directory = directory
        self.channel = channel
        self.core = core
        self.scheme = scheme
    }

    /// A server TLS configuration from a PEM certificate chain and a PEM private key.
    public static func tlsConfiguration(certificate: String, key: String) throws -> TLSConfiguration {
        TLSConfiguration.makeServerConfiguration(
            certificateChain: try NIOSSLCertificate.fromPEMFile(certificate).map { .certificate($0) },
            privateKey: .privateKey(try NIOSSLPrivateKey(file: key, format: .pem)))
    }

    /// `http://host:port` (or `https://`) + `path`.
    public func url(path: String = "/upload") -> String { "\(scheme)://\(host):\(port)\(path)" }

    /// Replaces the plan for requests that arrive from now on.
    public func setPlan(_ plan: (@Sendable (RequestInfo) -> ReceiverAction)?) {
        core.state.withLock { $0.plan = plan }
    }

    /// Every request seen so far, in arrival order.
    public var requests: [ReceivedRequest] { core.state.withLock { $0.requests } }

    /// Complete requests that the receiver answered with a 2xx.
    public var acceptedRequests: [ReceivedRequest] {
        requests.filter { $0.complete && ($0.status.map { (200..<300).contains($0) } ?? false) }
    }

    /// How many connections the receiver has accepted since it started.
    public var connectionsAccepted: Int { core.state.withLock { $0.connectionsAccepted } }

    /// Stops listening; connections in progress are closed.
    public func stop() async throws {
        try await channel.close()
        for child in core.openChannels() { try? await child.close() }
    }
}

/// The receiver's shared state, reached by every connection's handler.
final class ReceiverCore: Sendable {
    let directory: String
    let logger: Logger
    let state: Mutex<State>
    /// Parse only: no files written, no hashes.
    let discard: Bool
    /// Write file parts to the directory (else only hash them).
    let keepFiles: Bool
    /// Where stored files are logged, if anywhere.
    let manifest: ReceiverManifest?

    struct State {
        var requests: [ReceivedRequest] = []
        var plan: (@Sendable (RequestInfo) -> ReceiverAction)?
        var storedNames: Set<String> = []
        var channels: [ObjectIdentifier: any Channel] = [:]
        var connectionsAccepted = 0
    }

    init(directory: String, plan: (@Sendable (RequestInfo) -> ReceiverAction)?, discard: Bool = false, keepFiles: Bool = true,
         manifest: ReceiverManifest? = nil, logger: Logger) {
        self.directory = directory
        self.discard = discard
        self.keepFiles = keepFiles
        self.manifest = manifest
        self.logger = logger
        state = Mutex(State(plan: plan))
    }

    func begin(method: String, uri: String, headers: [HeaderField]) -> (Int, ReceiverAction) {
        state.withLock { state in
            let index = state.requests.count
            state.requests.append(ReceivedRequest(index: index, method: method, uri: uri, headers: headers))
            let info = RequestInfo(index: index, method: method, uri: uri, headers: headers)
            return (index, state.plan?(info) ?? .store())
        }
    }

    func update(_ index: Int, _ change: (inout ReceivedRequest) -> Void) {
        state.withLock { change(&$0.requests[index]) }
    }

    /// Remembers a connection until it closes, so ``Receiver/stop()`` can close it.
    func track(_ channel: any Channel) {
        let id = ObjectIdentifier(channel)
        state.withLock { state in
            state.channels[id] = channel
            state.connectionsAccepted += 1
        }
        channel.closeFuture.whenComplete { [weak self] _ in
            _ = self?.state.withLock { $0.channels.removeValue(forKey: id) }
        }
    }

    func openChannels() -> [any Channel] { state.withLock { Array($0.channels.values) } }

    /// Reserves a unique file name in the directory for `filename`.
    func reserveName(for filename: String) -> String {
        let base = Self.sanitize(filename)
        return state.withLock { state in
            let dot = base.lastIndex(of: ".").flatMap { $0 > base.startIndex ? $0 : nil }
            let stem = dot.map { String(base[..<$0]) } ?? base
            let ext = dot.map { String(base[$0...]) } ?? ""
            var candidate = base
            var counter = 0
            while state.storedNames.contains(candidate)
                || FileManager.default.fileExists(atPath: directory + "/" + candidate) {
                counter += 1
                candidate = "\(stem).\(counter)\(ext)"
            }
            state.storedNames.insert(candidate)
            return candidate
        }
    }

    /// A safe local name: the last path component, no leading dot, no NUL or slash.
    static func sanitize(_ filename: String) -> String {
        var name = filename.split(whereSeparator: { $0 == "/" || $0 == "\\" }).last.map(String.init) ?? ""
        name = String(name.unicodeScalars.filter { $0 != "\0" }.map(Character.init))
        if name.hasPrefix(".") { name = "_" + name }
        if name.isEmpty { name = "upload" }
        while name.utf8.count > 240 { name.removeFirst() }
        return name
    }
}


/// An append-only JSON Lines record of the files a receiver stored, one line per file, written with
/// one `write(2)` on an `O_APPEND` descriptor before the answer is sent: a driver reading it (even
/// across receiver restarts, which append to the same file) sees every file a client was told
/// arrived.
///
///     {"time":1763876401.123,"request":3,"filename":"a.bin","size":1234,
///      "sha256":"…","idempotency_key":"01K…","status":201}
///
/// `status` is what the receiver answered, or `null` when a planned fault stored the file but sent
/// no answer (`stallAfterBody`/`closeAfterBody` with `store`).
public final class ReceiverManifest: Sendable {
    private let file: Appender
    public var path: String { file.path }

    public init(path: String) throws {
        file = try Appender(path: path)
    }

    func record(_ received: ReceivedFile, idempotencyKey: String?, status: Int?, request: Int) {
        let time = String(format: "%.3f", Date().timeIntervalSince1970)
        let key = idempotencyKey.map(Self.jsonString) ?? "null"
        file.append("{\"time\":\(time),\"request\":\(request),\"filename\":\(Self.jsonString(received.filename)),"
            + "\"size\":\(received.size),\"sha256\":\"\(received.sha256)\",\"idempotency_key\":\(key),"
            + "\"status\":\(status.map(String.init) ?? "null")}\n")
    }

    /// `text` as a JSON string literal.
    public static func jsonString(_ text: String) -> String { ReceiverHandler.jsonString(text) }

    /// A file opened `O_APPEND` that takes whole lines, each in one `write(2)`.
    public final class Appender: Sendable {
        private let fd: Int32
        public let path: String

        public init(path: String) throws {
            self.path = path
            fd = open(path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0o644)
            if fd < 0 {
                throw CocoaError(.fileWriteUnknown, userInfo: [NSFilePathErrorKey: path, NSLocalizedDescriptionKey: String(cString: strerror(errno))])
            }
        }

        deinit { close(fd) }

        public func append(_ line: String) {
            var bytes = Array(line.utf8)
            bytes.withUnsafeMutableBytes { raw in
                var offset = 0
                while offset < raw.count {
                    let count = write(fd, raw.baseAddress! + offset, raw.count - offset)
                    if count < 0 {
                        if errno == EINTR { continue }
                        return
                    }
                    offset += count
                }
            }
        }
    }
}

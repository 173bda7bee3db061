import FerrySystem
import CFerrySystem
import FerryConfig
import FerryControl
import Foundation
import Logging
import NIOCore
import NIOPosix
import Synchronization

#if canImport(Glibc)
import Glibc
#endif

/// Serves the control protocol (``ControlProtocol``) on a stream Unix socket: one task per
/// connection, requests answered in order, each checked against the peer's credentials.
///
/// The socket is the one systemd passes (`LISTEN_FDS`, fd 3) when socket-activated; otherwise
/// `control_socket` is created, mode 0666 (0660 when `control_read_only_for_others = false`) with
/// group `control_group`, and removed at exit. Limits: 64 KiB per request line, connections as
/// ``ControlAdmission`` allows (a few per read-only user; privileged peers always get in), and
/// `control_idle_timeout` for a connection with no request in progress.
final class ControlServer: Sendable {
    let path: String
    let access: ControlAccess
    let service: ControlService
    let logger: Logger
    private let admission = ControlAdmission()


    init(path: String, access: ControlAccess, service: ControlService, logger: Logger) {
        self.path = path
        self.access = access
        self.service = service
        var logger = logger
        logger[metadataKey: "component"] = "control"
        self.logger = logger
    }

    /// Binds (or adopts) the socket. Throws when it cannot, so the daemon does not run unreachable.
    func bind() async throws -> (NIOAsyncChannel<NIOAsyncChannel<ControlFrame, ByteBuffer>, Never>, created: Bool) {
        let bootstrap = ServerBootstrap(group: MultiThreadedEventLoopGroup.singleton)
            .serverChannelOption(.backlog, value: 256)
            // `printf … | socat - UNIX-CONNECT:…` half-closes after sending; it still reads the replies.
            .childChannelOption(.allowRemoteHalfClosure, value: true)
        let initializer: @Sendable (Channel) -> EventLoopFuture<NIOAsyncChannel<ControlFrame, ByteBuffer>> = { channel in
            channel.eventLoop.makeCompletedFuture {
                try channel.pipeline.syncOperations.addHandler(
                    ByteToMessageHandler(ControlLineDecoder(maximumLength: ControlProtocol.maximumRequestLength)))
                return try NIOAsyncChannel<ControlFrame, ByteBuffer>(wrappingChannelSynchronously: channel)
            }
        }
        if let descriptor = Self.activatedSocket() {
            logger.info("control socket passed by systemd", metadata: ["fd": "\(descriptor)"])
            return (try await bootstrap.bind(descriptor, childChannelInitializer: initializer), false)
        }
        try prepareSocketPath()
        let server = try await bootstrap.bind(unixDomainSocketPath: path, childChannelInitializer: initializer)
        chmod(path, access.readOnlyForOthers ? 0o666 : 0o660)
        if let group = access.group, chown(path, UInt32.max, group.id) != 0 {
            logger.warning("cannot give the control socket to control_group", metadata: [
                "group": "\(group.name)", "error": "\(String(cString: strerror(errno)))",
            ])
        }
        return (server, true)
    }

    /// Accepts connections until cancelled, then removes the socket file it created.
    func serve(_ server: NIOAsyncChannel<NIOAsyncChannel<ControlFrame, ByteBuffer>, Never>, created: Bool) async {
        defer { if created { unlink(path) } }
        logger.info("control socket ready", metadata: ["path": "\(created ? path : "(passed by systemd)")"])
        await acceptConnections(on: server, what: "control socket", logger: logger) { await self.handle($0) }
    }

    private func handle(_ connection: NIOAsyncChannel<ControlFrame, ByteBuffer>) async {
        let channel = connection.channel
        let busy = ConnectionActivity()
        // Idle connections are closed, except while a long request (wait, watch) runs; so is one
        // whose client has not read a reply for as long (requests pipelined, replies never read).
        let idle = access.idleTimeout
        let idleWatch = Task {
            while !Task.isCancelled {
                try? await EventLoopSleep.sleep(for: min(idle, .seconds(1)))
                if busy.idleFor >= idle || busy.writingFor >= idle {
                    channel.close(promise: nil)
                    return
                }
            }
        }
        defer { idleWatch.cancel() }

        let policy = ControlAccessPolicy(access: access)
        var credentials: cferry_ucred?
        if let provider = channel as? SocketOptionProvider {
            do {
                credentials = try await provider.unsafeGetSocketOption(
                    level: SocketOptionLevel(SOL_SOCKET), name: SocketOptionName(CFERRY_SO_PEERCRED)).get()
            } catch {
                logger.warning("cannot read the control peer's credentials; treating it as an unknown user", metadata: ["error": "\(error)"])
            }
        } else {
            logger.warning("cannot read the control peer's credentials from this channel type; treating it as an unknown user")
        }
        let peer = credentials.map(policy.peer) ?? ControlPeer(pid: 0, uid: UInt32.max, gid: UInt32.max, access: .none)
        let refusal = admission.admit(peer)
        defer { if refusal == nil { admission.release(peer) } }

        do {
            try await connection.executeThenClose { inbound, outbound in
                let writer = ReplyWriter(outbound: outbound)
                if let refusal {
                    try await writer.send(ControlReply(id: nil, error: ControlError(.busy, refusal)))
                    return
                }
                if peer.access == .none {
                    try await writer.send(ControlReply(id: nil, error: ControlError(.permissionDenied,
                        "\(peer) may not use ferryd's control socket (control_read_only_for_others = false)")))
                    return
                }
                let closing = ConnectionClosing()
                channel.closeFuture.whenComplete { _ in closing.closed() }
                let session = ControlSession(peer: peer, writer: writer, closing: closing)
                for try await frame in inbound {
                    busy.begin()
                    let replies = await service.respond(to: frame, session: session)
                    // A reply the client does not read for control_idle_timeout closes the
                    // connection (a stream's events, which wait on a slow reader, do not).
                    busy.writeBegan()
                    for reply in replies { try await writer.send(reply) }
                    busy.writeEnded()
                    busy.end()
                }
            }
        } catch {
            logger.debug("control connection ended", metadata: ["error": "\(error)", "peer": "\(peer)"])
        }
    }

    // MARK: Socket set-up

    /// The listening socket systemd passed, if this process was socket-activated (`LISTEN_PID` is
    /// this process and `LISTEN_FDS` ≥ 1: fd 3). The variables are removed, as sd_listen_fds(3) does,
    /// so they do not leak to children.
    static func activatedSocket() -> CInt? {
        guard let pid = ProcessInfo.processInfo.environment["LISTEN_PID"], Int32(pid) == getpid(),
              let count = ProcessInfo.processInfo.environment["LISTEN_FDS"].flatMap(Int.init), count >= 1
        else { return nil }
        unsetenv("LISTEN_PID")
        unsetenv("LISTEN_FDS")
        unsetenv("LISTEN_FDNAMES")
        let descriptor: CInt = 3
        _ = fcntl(descriptor, F_SETFD, FD_CLOEXEC)
        return descriptor
    }

    /// Makes sure `path` can be bound: creates its directory, and removes a stale socket left by a
    /// daemon that died — but never one another daemon is listening on, nor anything that is not a socket.
    private func prepareSocketPath() throws {
        let directory = (path as NSString).deletingLastPathComponent
        if !directory.isEmpty {
            try? FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true, attributes: [.posixPermissions: 0o755])
        }
        var st = stat()
        guard lstat(path, &st) == 0 else { return }
        guard st.st_mode & S_IFMT == S_IFSOCK else {
            throw DaemonError.other("control_socket \(path) exists and is not a socket; remove it or choose another path")
        }
        if Self.isListening(path) {
            throw DaemonError.alreadyRunning("a running process (another ferryd, or something else) is listening on the control socket \(path); stop it, or give this ferryd another control_socket")
        }
        unlink(path)
    }

    /// Whether something accepts connections on the Unix socket at `path`.
    static func isListening(_ path: String) -> Bool {
        let fd = socket(AF_UNIX, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        guard fd >= 0 else { return false }
        defer { close(fd) }
        var address = sockaddr_un()
        address.sun_family = sa_family_t(AF_UNIX)
        let bytes = Array(path.utf8)
        guard bytes.count < MemoryLayout.size(ofValue: address.sun_path) else { return false }
        withUnsafeMutableBytes(of: &address.sun_path) { raw in
            raw.copyBytes(from: bytes)
        }
        let result = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { connect(fd, $0, socklen_t(MemoryLayout<sockaddr_un>.size)) }
        }
        return result == 0
    }
}

/// Writes reply lines to one connection.
struct ReplyWriter: Sendable {
    let outbound: NIOAsyncChannelOutboundWriter<ByteBuffer>

    func send(_ reply: ControlReply) async throws {
        let line = (try? ControlJSON.line(reply))
            ?? Data(#"{"v":1,"id":null,"ok":false,"error":{"code":"internal","message":"cannot encode the reply"}}"#.utf8 + [0x0A])
        try await outbound.write(ByteBuffer(bytes: line))
    }
}

/// One control connection as the commands see it: who asked, and how to stream to them.
struct ControlSession: Sendable {
    let peer: ControlPeer
    let writer: ReplyWriter
    /// What runs when the connection closes (the client went away).
    let closing: ConnectionClosing
}

/// Tracks whether a connection has a request in progress, and since when it has been idle.
final class ConnectionActivity: Sendable {
    private let state = Mutex<(busy: Bool, since: ContinuousClock.Instant)>((false, .now))
    private let writing = Mutex<ContinuousClock.Instant?>(nil)

    func begin() { state.withLock { $0 = (true, .now) } }
    func end() { state.withLock { $0 = (false, .now) } }

    var idleFor: Duration {
        state.withLock { $0.busy ? .zero : .now - $0.since }
    }

    func writeBegan() { writing.withLock { $0 = .now } }
    func writeEnded() { writing.withLock { $0 = nil } }

    /// How long the reply being written has waited for the client to read.
    var writingFor: Duration { writing.withLock { $0.map { .now - $0 } ?? .zero } }
}

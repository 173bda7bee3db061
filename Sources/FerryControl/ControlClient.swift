import Foundation
import NIOCore
import NIOPosix

#if canImport(Glibc)
import Glibc
#endif

/// Why a client could not get an answer.
public enum ControlClientError: Error, Sendable, CustomStringConvertible {
    /// Nothing is listening at the socket path (the daemon is not running, or is elsewhere).
    case notReachable(path: String, reason: String)
    /// The socket exists but this user may not connect to it, or the daemon refused the command.
    case permissionDenied(path: String, reason: String)
    /// The daemon answered with an error.
    case replied(ControlError)
    /// The daemon did not answer in time.
    case timedOut(String)
    /// The daemon closed the connection, or sent something that is not a reply.
    case protocolViolation(String)

    public var description: String {
        switch self {
        case .notReachable(let path, let reason):
            "cannot reach ferryd at \(path): \(reason) — is it running (systemctl status ferryd)? Use --socket or control_socket in the config if it listens elsewhere."
        case .permissionDenied(let path, let reason):
            "permission denied on \(path): \(reason) — run as root, as the daemon's user, or as a member of its control_group."
        case .replied(let error): error.message
        case .timedOut(let what): what
        case .protocolViolation(let what): "unexpected answer from ferryd: \(what)"
        }
    }
}

/// A connection to the daemon's control socket: sends requests and reads their replies, in order.
public struct ControlConnection {
    private var inbound: NIOAsyncChannelInboundStream<ControlFrame>.AsyncIterator
    private let outbound: NIOAsyncChannelOutboundWriter<ByteBuffer>
    private var nextID = 1
    private let path: String

    init(path: String, inbound: NIOAsyncChannelInboundStream<ControlFrame>.AsyncIterator, outbound: NIOAsyncChannelOutboundWriter<ByteBuffer>) {
        self.path = path
        self.inbound = inbound
        self.outbound = outbound
    }

    /// Sends one request and returns its result, or throws the daemon's error.
    public mutating func call<Arguments: Encodable>(_ command: ControlCommand, _ arguments: Arguments) async throws(ControlClientError) -> JSONValue {
        let id = nextID
        nextID += 1
        let line: Data
        do {
            line = try ControlJSON.line(ControlRequest(id: id, command: command, arguments: arguments))
        } catch {
            throw .protocolViolation("cannot encode the request: \(error)")
        }
        do {
            try await outbound.write(ByteBuffer(bytes: line))
        } catch {
            // ferryd may have refused the connection (too many connections) and closed it: say why.
            if let refusal = try? await nextReply(), let error = refusal.error { throw .replied(error) }
            throw .notReachable(path: path, reason: "the connection closed while sending (\(error))")
        }
        let reply = try await nextReply()
        if let error = reply.error {
            if error.code == .permissionDenied { throw .permissionDenied(path: path, reason: error.message) }
            throw .replied(error)
        }
        guard reply.ok == true, let result = reply.result else {
            throw .protocolViolation("a reply without a result")
        }
        return result
    }

    /// Sends one request and decodes its result as `Result`.
    public mutating func call<Arguments: Encodable, Result: Decodable>(
        _ command: ControlCommand, _ arguments: Arguments, as type: Result.Type
    ) async throws(ControlClientError) -> Result {
        let value = try await call(command, arguments)
        do {
            return try value.decode(Result.self)
        } catch {
            throw .protocolViolation("cannot read the \(command.rawValue) result: \(error)")
        }
    }

    /// The next event of a streaming command (`watch`), or `nil` when the daemon closed the stream.
    public mutating func nextEvent() async throws(ControlClientError) -> JSONValue? {
        let reply: ControlReply
        do {
            reply = try await nextReply()
        } catch {
            if case .protocolViolation = error { return nil }
            throw error
        }
        if let error = reply.error { throw .replied(error) }
        return reply.event
    }

    private mutating func nextReply() async throws(ControlClientError) -> ControlReply {
        let frame: ControlFrame?
        do {
            frame = try await inbound.next()
        } catch {
            throw .protocolViolation("the connection failed: \(error)")
        }
        switch frame {
        case nil:
            throw .protocolViolation("the daemon closed the connection")
        case .oversized:
            throw .protocolViolation("a reply longer than \(ControlProtocol.maximumReplyLength) bytes")
        case .line(let buffer):
            do {
                return try ControlJSON.decoder.decode(ControlReply.self, from: Data(buffer.readableBytesView))
            } catch {
                throw .protocolViolation("a reply that is not valid JSON: \(error)")
            }
        }
    }
}

/// Connects to a ferryd control socket.
public enum ControlClient {
    /// Connects to the socket at `path`, runs `body` with the connection, and closes it.
    public static func withConnection<Result: Sendable>(
        path: String, _ body: (inout ControlConnection) async throws -> Result
    ) async throws -> Result {
        try checkSocket(path)
        let channel: NIOAsyncChannel<ControlFrame, ByteBuffer>
        do {
            channel = try await ClientBootstrap(group: MultiThreadedEventLoopGroup.singleton)
                .connect(unixDomainSocketPath: path) { channel in
                    channel.eventLoop.makeCompletedFuture {
                        try channel.pipeline.syncOperations.addHandler(
                            ByteToMessageHandler(ControlLineDecoder(maximumLength: ControlProtocol.maximumReplyLength)))
                        return try NIOAsyncChannel<ControlFrame, ByteBuffer>(wrappingChannelSynchronously: channel)
                    }
                }
        } catch let error as IOError {
            switch error.errnoCode {
            case EACCES, EPERM: throw ControlClientError.permissionDenied(path: path, reason: "this user may not connect to the socket")
            case ECONNREFUSED: throw ControlClientError.notReachable(path: path, reason: "nothing is listening (a stale socket)")
            case ENOENT: throw ControlClientError.notReachable(path: path, reason: "no such socket")
            default: throw ControlClientError.notReachable(path: path, reason: String(cString: strerror(error.errnoCode)))
            }
        } catch {
            throw ControlClientError.notReachable(path: path, reason: "\(error)")
        }
        return try await channel.executeThenClose { inbound, outbound in
            var connection = ControlConnection(path: path, inbound: inbound.makeAsyncIterator(), outbound: outbound)
            return try await body(&connection)
        }
    }

    private static func checkSocket(_ path: String) throws(ControlClientError) {
        var st = stat()
        guard stat(path, &st) == 0 else {
            let code = errno
            if code == EACCES { throw .permissionDenied(path: path, reason: "a directory on the way is not searchable by this user") }
            throw .notReachable(path: path, reason: code == ENOENT ? "no such socket" : String(cString: strerror(code)))
        }
        guard st.st_mode & S_IFMT == S_IFSOCK else {
            throw .notReachable(path: path, reason: "not a socket")
        }
    }
}

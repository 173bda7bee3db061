import FerrySystem
import FerryConfig
import Logging
import NIOCore
import NIOHTTP1
import NIOPosix
import Synchronization

#if canImport(Glibc)
import Glibc
#endif

/// Serves the metrics over HTTP/1.1 for Prometheus to scrape, on `metrics_listen`: `GET /metrics`
/// (and `HEAD`) answer the same text as `ferryctl metrics`; other paths get 404, other methods 405.
///
/// There is no authentication and no TLS: bind it to loopback (or a trusted network) and let a
/// local Prometheus or agent scrape it. Limits: ``maximumConnections`` connections at once; a
/// connection that sends nothing for ``idleTimeout``, or completes no request for that long (a
/// client trickling bytes), is closed; a request with a body is refused (413).
final class MetricsServer: Sendable {
    typealias Connection = NIOAsyncChannel<HTTPServerRequestPart, HTTPServerResponsePart>

    let address: ListenAddress
    let scrape: @Sendable () async throws -> String
    let logger: Logger
    private let server: NIOAsyncChannel<Connection, Never>
    private let connections = Atomic<Int>(0)

    static let maximumConnections = 64
    static let idleTimeout = TimeAmount.seconds(30)
    static let contentType = "text/plain; version=0.0.4; charset=utf-8"

    private init(address: ListenAddress, server: NIOAsyncChannel<Connection, Never>, scrape: @escaping @Sendable () async throws -> String, logger: Logger) {
        self.address = address
        self.server = server
        self.scrape = scrape
        self.logger = logger
    }

    /// Binds `address` if there is one (`metrics_listen` is set), else returns `nil`.
    static func bind(_ address: ListenAddress?, scrape: @escaping @Sendable () async throws -> String, logger: Logger) async throws(DaemonError) -> MetricsServer? {
        guard let address else { return nil }
        return try await listen(on: address, scrape: scrape, logger: logger)
    }

    /// Binds `address`; throws a ``DaemonError`` naming it when it cannot (in use, not local).
    /// - Parameter scrape: the metrics text, read afresh for each request.
    static func listen(on address: ListenAddress, scrape: @escaping @Sendable () async throws -> String, logger: Logger) async throws(DaemonError) -> MetricsServer {
        var logger = logger
        logger[metadataKey: "component"] = "metrics"
        let bootstrap = ServerBootstrap(group: MultiThreadedEventLoopGroup.singleton)
            .serverChannelOption(.backlog, value: 64)
            .serverChannelOption(.socketOption(.so_reuseaddr), value: 1)
        do {
            let socketAddress = try SocketAddress(ipAddress: address.host, port: address.port)
            let server = try await bootstrap.bind(to: socketAddress) { channel in
                channel.eventLoop.makeCompletedFuture {
                    try channel.pipeline.syncOperations.addHandler(IdleStateHandler(readTimeout: idleTimeout))
                    try channel.pipeline.syncOperations.addHandler(CloseWhenIdle())
                    try channel.pipeline.syncOperations.configureHTTPServerPipeline(withErrorHandling: true)
                    return try Connection(wrappingChannelSynchronously: channel)
                }
            }
            return MetricsServer(address: address, server: server, scrape: scrape, logger: logger)
        } catch {
            throw .other("cannot listen on metrics_listen \(address): \(Self.describe(error))")
        }
    }

    private static func describe(_ error: any Error) -> String {
        if let error = error as? IOError {
            let reason = String(cString: strerror(error.errnoCode))
            return error.errnoCode == EADDRINUSE ? "\(reason) (another process has this port: stop it or choose another)" : reason
        }
        return "\(error)"
    }

    /// Answers requests until cancelled.
    func serve() async {
        logger.info("metrics endpoint ready", metadata: ["url": "http://\(address)/metrics"])
        await acceptConnections(on: server, what: "the metrics endpoint", logger: logger) { await self.handle($0) }
    }

    private func handle(_ connection: Connection) async {
        let open = connections.add(1, ordering: .relaxed).newValue
        defer { connections.subtract(1, ordering: .relaxed) }
        guard open <= Self.maximumConnections else {
            try? await connection.channel.close()
            return
        }
        // Each connection must complete a request every idleTimeout, however slowly it sends bytes.
        let lastAnswer = Mutex(ContinuousClock.now)
        let channel = connection.channel
        let deadline = Duration.nanoseconds(Self.idleTimeout.nanoseconds)
        let trickle = Task {
            while !Task.isCancelled {
                try? await EventLoopSleep.sleep(for: .seconds(1))
                if ContinuousClock.now - lastAnswer.withLock({ $0 }) > deadline {
                    channel.close(promise: nil)
                    return
                }
            }
        }
        defer { trickle.cancel() }
        // Cancelling the server (shutdown) closes its connections too.
        await withTaskCancellationHandler {
            do {
                try await connection.executeThenClose { inbound, outbound in
                    var head: HTTPRequestHead?
                    for try await part in inbound {
                        switch part {
                        case .head(let received):
                            head = received
                        case .body:
                            continue
                        case .end:
                            guard let request = head else { continue }
                            head = nil
                            try await respond(to: request, outbound)
                            lastAnswer.withLock { $0 = .now }
                            if !request.isKeepAlive || Self.hasBody(request) { return }
                        }
                    }
                }
            } catch {
                logger.debug("metrics connection ended", metadata: ["error": "\(error)"])
            }
        } onCancel: {
            connection.channel.close(promise: nil)
        }
    }

    /// Whether the request announces a body (`Content-Length` above 0, or chunked).
    static func hasBody(_ request: HTTPRequestHead) -> Bool {
        if let length = request.headers.first(name: "Content-Length").flatMap(Int.init), length > 0 { return true }
        return request.headers[canonicalForm: "Transfer-Encoding"].contains { $0.lowercased() == "chunked" }
    }

    private func respond(to request: HTTPRequestHead, _ outbound: NIOAsyncChannelOutboundWriter<HTTPServerResponsePart>) async throws {
        let path = request.uri.split(separator: "?", maxSplits: 1, omittingEmptySubsequences: false).first.map(String.init) ?? ""
        var status = HTTPResponseStatus.ok
        var body: String
        var headers = HTTPHeaders()
        if Self.hasBody(request) {
            status = .payloadTooLarge
            body = "a metrics request has no body\n"
        } else if request.method != .GET && request.method != .HEAD {
            status = .methodNotAllowed
            headers.add(name: "Allow", value: "GET, HEAD")
            body = "only GET and HEAD are allowed\n"
        } else if path != "/metrics" {
            status = .notFound
            body = "not found; the metrics are at /metrics\n"
        } else {
            do {
                body = try await scrape()
            } catch {
                logger.warning("cannot read the metrics", metadata: ["error": "\(error)"])
                status = .internalServerError
                body = "cannot read the metrics; see ferryd's log\n"
            }
        }
        headers.add(name: "Content-Type", value: status == .ok ? Self.contentType : "text/plain; charset=utf-8")
        headers.add(name: "Content-Length", value: String(body.utf8.count))
        if !request.isKeepAlive || Self.hasBody(request) { headers.add(name: "Connection", value: "close") }
        try await outbound.write(.head(HTTPResponseHead(version: .http1_1, status: status, headers: headers)))
        if request.method != .HEAD {
            try await outbound.write(.body(.byteBuffer(ByteBuffer(string: body))))
        }
        try await outbound.write(.end(nil))
    }
}

/// Closes a connection that sent nothing for the idle timeout (``IdleStateHandler``'s event).
private final class CloseWhenIdle: ChannelInboundHandler, RemovableChannelHandler {
    typealias InboundIn = ByteBuffer
    typealias InboundOut = ByteBuffer

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        context.fireChannelRead(data)
    }

    func userInboundEventTriggered(context: ChannelHandlerContext, event: Any) {
        if event is IdleStateHandler.IdleStateEvent {
            context.close(promise: nil)
        } else {
            context.fireUserInboundEventTriggered(event)
        }
    }
}

import AsyncHTTPClient
import FerrySystem
import Foundation
import Logging
import NIOCore
import NIOHTTP1
import NIOPosix
import NIOSSL
import _NIOFileSystem

#if canImport(Glibc)
import Glibc
#endif

/// Sends request bodies from files over HTTP/1.1 or HTTP/2 (TLS with ALPN), on AsyncHTTPClient's
/// pooled keep-alive connections. The body is streamed in 64 KiB chunks, so memory does not grow
/// with the file; redirects are not followed (a redirected POST can silently lose its body).
public final class Uploader: Sendable {
    let client: HTTPClient
    /// One client per event loop, for bodies sent as file regions (see ``EventLoopClients``).
    let fileRegionClients: EventLoopClients
    public let settings: TransportSettings

    /// How much of a response body is kept.
    public static let responseLimit = 64 * 1024
    /// Chunk size when streaming a body file. 64 KiB chunks stay below the daemon's fixed malloc mmap
    /// threshold (128 KiB), so freed chunks are reused instead of each new one faulting in fresh
    /// pages; measured on loopback, this sends 1 GiB as fast as curl while peak RSS stays within a
    /// few MiB of idle (bench/core.sh).
    static let chunkLength = ByteCount.kibibytes(64)
    /// How many body chunks may be handed to AsyncHTTPClient before the event loops are waited for
    /// (see ``execute(_:logger:counter:watchdog:progress:)``).
    static let chunksPerEventLoopBarrier = 8
    /// The event loops the connections run on.
    let eventLoops: [any EventLoop]
    /// The bandwidth limits every body sent through this uploader draws from, if any.
    public let throttle: Throttle?
    /// Watches every request's progress, in one loop for all (shared with ``limited(by:)`` views).
    let patrol: WatchdogPatrol

    public init(settings: TransportSettings) throws {
        self.settings = settings
        var tls = TLSConfiguration.makeClientConfiguration()
        tls.certificateVerification = .fullVerification
        // Closing a connection waits this long for the server's close_notify (NIOSSL's default is
        // 5 s). A server that stopped reading never sends it, so an upload abandoned at shutdown
        // kept ferryd alive that much past shutdown_timeout; the answer is in hand or given up by then.
        tls.shutdownTimeout = .milliseconds(500)
        if let caFile = settings.caFile {
            tls.trustRoots = .file(caFile)
        }
        var configuration = HTTPClient.Configuration(
            tlsConfiguration: tls,
            redirectConfiguration: .disallow,
            timeout: .init(
                connect: .nanoseconds(Int64(settings.connectTimeout / .nanoseconds(1))),
                read: .nanoseconds(Int64(settings.noProgressTimeout / .nanoseconds(1))),
                write: .nanoseconds(Int64(settings.noProgressTimeout / .nanoseconds(1)))),
            decompression: .disabled)
        configuration.connectionPool = .init(idleTimeout: .seconds(60), concurrentHTTP1ConnectionsPerHostSoftLimit: 16)
        // A refused or failed connection fails the attempt at once; Ferry's own backoff (with jitter,
        // bounded by max_delay) decides when to try again, instead of the pool retrying silently
        // until connect_timeout while the upload slot waits.
        configuration.connectionPool.retryConnectionEstablishment = false
        configuration.httpVersion = .automatic
        // Ferry bootstraps no tracer: without this each request starts and ends a no-op span
        // (its name formatted, its attributes set), about 1 % of ferryd's CPU for small files.
        configuration.tracing.tracer = nil
        client = HTTPClient(eventLoopGroup: HTTPClient.defaultEventLoopGroup, configuration: configuration)
        fileRegionClients = EventLoopClients(group: HTTPClient.defaultEventLoopGroup, configuration: configuration)
        eventLoops = Array(HTTPClient.defaultEventLoopGroup.makeIterator())
        throttle = nil
        patrol = WatchdogPatrol(timeout: settings.noProgressTimeout)
    }

    private init(sharing uploader: Uploader, throttle: Throttle) {
        client = uploader.client
        fileRegionClients = uploader.fileRegionClients
        settings = uploader.settings
        eventLoops = uploader.eventLoops
        self.throttle = throttle
        patrol = uploader.patrol
    }

    /// This uploader's connection pool, with every body it sends drawing from `throttle` (one
    /// spool's view; only the original is shut down).
    public func limited(by throttle: Throttle) -> Uploader {
        Uploader(sharing: self, throttle: throttle)
    }

    /// Waits until `bytes` may be sent under the throttle, if there is one; a wait is no stall.
    func throttled(_ bytes: Int64, watchdog: ProgressWatchdog) async {
        guard let throttle else { return }
        let forgiven = throttle.debtsForgiven
        var wait = throttle.take(bytes)
        guard wait > .zero else { return }
        watchdog.willWait(wait)
        while wait > .zero {
            let slice = min(wait, Throttle.waitSlice)
            guard (try? await EventLoopSleep.sleep(for: slice)) != nil else { break }
            wait = throttle.stillOwed(wait, after: slice, since: forgiven)
        }
        watchdog.progressed()
    }

    /// Closes the connection pools.
    public func shutdown() async throws {
        try await client.shutdown()
        try await fileRegionClients.shutdown()
    }

    /// Sends `request`. `progress` is called with the running count of body bytes handed to the connection.
    ///
    /// A watchdog aborts the request when no body chunk is taken by the connection and no response
    /// byte arrives for ``TransportSettings/noProgressTimeout``. AsyncHTTPClient's own write timeout
    /// is paused while the socket is not writable, so it cannot see a server that stops reading.
    public func send(
        _ request: UploadRequest, logger: Logger, progress: @escaping @Sendable (Int64) -> Void = { _ in }
    ) async -> UploadResult {
        if let port = URL(string: request.url)?.port, !(1...65535).contains(port) {
            // NIO stops the process on such a port; the configuration is checked for it, but a URL
            // can also come from a server (a Location) or from a queue written by an older ferryd.
            return .failed(TransportFailure(kind: .other, message: "the upload URL names port \(port); a port is a number from 1 to 65535"), bytesSent: 0)
        }
        let counter = ByteCounter()
        // A body sent by sendfile(2) from the spool file itself can be stuck by that file being cut short.
        var stuckSource: (@Sendable () -> Bool)?
        if request.expectedSource != nil, request.bodyPath != nil, Self.sendsFilesFromTheKernel(request.url) {
            stuckSource = { Self.sourceChanged(request) }
        }
        let watchdog = ProgressWatchdog(timeout: settings.noProgressTimeout, limitsAnswer: !request.answerMayTrickle, sourceChanged: stuckSource)
        let exchange = Task {
            try await self.execute(request, logger: logger, counter: counter, watchdog: watchdog, progress: progress)
        }
        let watch = patrol.watch(watchdog) { exchange.cancel() }
        let outcome = await withTaskCancellationHandler { await exchange.result } onCancel: { exchange.cancel() }
        patrol.stopWatching(watch)
        if watchdog.fired {
            // If the server's answer had already arrived, it stands.
            if case .success(let late) = outcome, case .response(let status, _, _, _) = late {
                if watchdog.answerOverdue {
                    logger.notice("the server's answer did not end within no_progress_timeout of its status; the status stands, the rest is dropped",
                                  metadata: ["status": "\(status)", "no_progress_timeout": "\(settings.noProgressTimeout)"])
                }
                return Self.checkedAgainstSource(late, request, bytesSent: counter.value, logger: logger)
            }
            if Self.sourceChanged(request) {
                // The file sent from the spool was cut short or rewritten under the transfer (a
                // region past its new end can never be sent): that, not the server, stopped it.
                return .failed(TransportFailure(kind: .sourceChanged, message: "the file changed during the upload"), bytesSent: counter.value)
            }
            return .failed(TransportFailure(
                kind: .timeout,
                message: "no progress for \(settings.noProgressTimeout) (the server stopped reading or answering)"),
                bytesSent: counter.value)
        }
        switch outcome {
        case .success(let result):
            return Self.checkedAgainstSource(result, request, bytesSent: counter.value, logger: logger)
        case .failure(let error):
            if Task.isCancelled || error is CancellationError || (error as? HTTPClientError) == .cancelled {
                return .cancelled(bytesSent: counter.value)
            }
            if Self.sourceChanged(request) {
                // Over TLS a file cut short ends the body early, which the client reports as its own
                // error: the changed file, not the link, ended the attempt (it is superseded, not retried).
                return .failed(TransportFailure(kind: .sourceChanged, message: "the file changed during the upload"), bytesSent: counter.value)
            }
            var failure = Self.describe(error, request: request)
            // A route lost under an open connection gives the errors of a connect that failed
            // (EHOSTUNREACH): only a request that sent nothing found the server unreachable.
            if failure.kind == .connect, counter.value > 0 { failure.kind = .io }
            return .failed(failure, bytesSent: counter.value)
        }
    }

    /// Whether a body from a file goes to `url` by `sendfile(2)` (plain HTTP), so that the progress
    /// of a request counts bytes the kernel has taken, reported as each write completes; over TLS
    /// it counts chunks handed to the encryption, some of which may still be queued in the process.
    static func sendsFilesFromTheKernel(_ url: String) -> Bool {
        URL(string: url)?.scheme?.lowercased() == "http"
    }

    private func execute(
        _ request: UploadRequest, logger: Logger, counter: ByteCounter, watchdog: ProgressWatchdog,
        progress: @escaping @Sendable (Int64) -> Void
    ) async throws -> UploadResult {
        var http = HTTPClientRequest(url: request.url)
        http.method = HTTPMethod(rawValue: request.method)
        for header in request.headers { http.headers.add(name: header.name, value: header.value) }
        if let contentType = request.contentType { http.headers.replaceOrAdd(name: "Content-Type", value: contentType) }
        if let key = request.idempotencyKey { http.headers.replaceOrAdd(name: "Idempotency-Key", value: key) }
        if !http.headers.contains(name: "User-Agent") {
            http.headers.add(name: "User-Agent", value: FerryVersion.userAgent)
        }
        guard let bodyPath = request.bodyPath else {
            if let bytes = request.bytes {
                return try await executeFromMemory(request, bytes: bytes, headers: http.headers, logger: logger,
                                                   counter: counter, watchdog: watchdog, progress: progress)
            }
            if request.method == "POST" || request.method == "PUT" || request.method == "PATCH" {
                http.body = .bytes(ByteBuffer())  // Content-Length: 0
            }
            return try await exchange(http, counter: counter, watchdog: watchdog, logger: logger)
        }
        if Self.sendsFilesFromTheKernel(request.url) {
            // No TLS to encrypt the body in user space: the kernel sends it from the file (sendfile).
            return try await executeFromFile(request, bodyPath: bodyPath, headers: http.headers, logger: logger,
                                             counter: counter, watchdog: watchdog, progress: progress)
        }
        let options = OpenOptions.Read(followSymbolicLinks: true, closeOnExec: true)
        return try await FileSystem.shared.withFileHandle(forReadingAt: FilePath(bodyPath), options: options) { file in
            if let expected = request.expectedSource {
                // Sent from the spool itself: this must be the file the job names, unchanged.
                let status = try await file.info().platformSpecificStatus.map(FileStatus.init)
                guard let status, status.isSameVersion(as: expected) else {
                    throw SourceChanged()
                }
            }
            // AsyncHTTPClient hands each chunk to the connection's event loop without waiting for it to
            // be written, and stops asking for more only once that loop has seen the socket fill up.
            // When the loop is slow to run (a busy machine), chunks pile up in its task queue: peaks of
            // 20+ MiB for one upload were measured. Waiting every few chunks until every event loop has
            // run what was queued before bounds that to a few chunks (bench/bench.py, scenario 1).
            let loops = eventLoops
            let handed = ByteCounter()
            // Under a bandwidth limit, pieces of about a tenth of a second's worth.
            let chunkLength = throttle?.pieceLength(ceiling: Int64(Self.chunkLength.bytes)) ?? Int64(Self.chunkLength.bytes)
            let range = request.bodyOffset..<(request.bodyOffset + request.contentLength)
            let handOver: @Sendable (ByteBuffer) async -> ByteBuffer = { buffer in
                await self.throttled(Int64(buffer.readableBytes), watchdog: watchdog)
                watchdog.progressed()
                progress(counter.add(Int64(buffer.readableBytes)))
                if handed.add(1) % Int64(Self.chunksPerEventLoopBarrier) == 0 {
                    for loop in loops { try? await loop.submit {}.get() }
                }
                return buffer
            }
            if let growing = request.growing {
                // Read each chunk once the builder has written it.
                let position = ByteCounter()
                _ = position.add(range.lowerBound)
                let chunks = AsyncThrowingStream<ByteBuffer, any Error>(unfolding: {
                    let offset = position.value
                    guard offset < range.upperBound else { return nil }
                    let length = min(chunkLength, range.upperBound - offset)
                    try await growing.wait(until: offset + length)
                    let chunk = try await file.readChunk(fromAbsoluteOffset: offset, length: .bytes(length))
                    guard chunk.readableBytes > 0 else { throw SourceChanged() }
                    _ = position.add(Int64(chunk.readableBytes))
                    return chunk
                })
                http.body = .stream(chunks.map(handOver), length: .known(request.contentLength))
            } else {
                http.body = .stream(file.readChunks(in: range, chunkLength: .bytes(chunkLength)).map(handOver), length: .known(request.contentLength))
            }
            return try await exchange(http, counter: counter, watchdog: watchdog, logger: logger)
        }
    }

    /// Whether the request's body is the spool file itself and that file is no longer the version
    /// being sent.
    static func sourceChanged(_ request: UploadRequest) -> Bool {
        guard let expected = request.expectedSource, let path = request.bodyPath else { return false }
        var st = stat()
        return stat(path, &st) != 0 || !FileStatus(st).isSameVersion(as: expected)
    }

    /// An answer to a request whose body was the spool file itself, checked against that file once
    /// the server has read it all: the kernel reads a file region when it sends it (sendfile(2)
    /// even later, from the page cache), so a file rewritten in place during the request may have
    /// reached the server as a mix of its two versions. Whatever the server answered, that was
    /// not the version queued: the job is superseded and the new version sent as a new job.
    static func checkedAgainstSource(_ result: UploadResult, _ request: UploadRequest, bytesSent: Int64, logger: Logger) -> UploadResult {
        guard case .response(let status, _, _, _) = result, sourceChanged(request) else { return result }
        logger.warning("the file changed while it was being sent; the server may hold a mix of its two versions, and the new version is sent again",
                       metadata: ["status": "\(status)"])
        return .failed(TransportFailure(
            kind: .sourceChanged,
            message: "the file changed while it was being sent (the server answered \(status) to a body that may mix the two versions)"),
            bytesSent: bytesSent)
    }

    /// Executes `http` and reads the answer.
    private func exchange(_ http: HTTPClientRequest, counter: ByteCounter, watchdog: ProgressWatchdog, logger: Logger) async throws -> UploadResult {
        let response = try await client.execute(http, deadline: .distantFuture, logger: logger.forHTTPClient)
        // Counted at the head: a server that answers early and reads on still answered early.
        let sentAtHead = counter.value
        watchdog.progressed()
        watchdog.answerStarted()
        // The status is in: whatever happens while reading the rest of the answer (a reset, the
        // watchdog, a shutdown), the server has decided, and a 2xx must not become a retry.
        var body: [UInt8] = []
        var drained = 0
        do {
            for try await chunk in response.body {
                watchdog.progressed()
                if body.count < Self.responseLimit {
                    body += chunk.readableBytesView.prefix(Self.responseLimit - body.count)
                }
                drained += chunk.readableBytes
                // Do not read an endless answer; the connection is simply not reused.
                if drained > 4 * 1024 * 1024 { break }
            }
        } catch {
            logger.debug("reading the response body failed after the status arrived", metadata: ["error": "\(error)"])
        }
        let headers = response.headers.map { (name: $0.name, value: $0.value) }
        return .response(status: Int(response.status.code), headers: headers, body: body, bytesSent: sentAtHead)
    }

    /// A readable account of a transport error.
    static func describe(_ error: any Error, request: UploadRequest) -> TransportFailure {
        let host = URL(string: request.url).map { "\($0.host ?? "?")\($0.port.map { ":\($0)" } ?? "")" } ?? "the server"
        if let error = error as? HTTPClientError {
            switch error {
            case .connectTimeout:
                return TransportFailure(kind: .connect, message: "connecting to \(host) timed out")
            case .readTimeout:
                return TransportFailure(kind: .timeout, message: "no response from \(host) within the no-progress timeout")
            case .writeTimeout:
                return TransportFailure(kind: .timeout, message: "\(host) stopped reading the upload (no progress within the timeout)")
            case .remoteConnectionClosed:
                return TransportFailure(kind: .connectionClosed, message: "\(host) closed the connection before answering")
            default:
                let text = "\(error)"
                if text.hasPrefix("HTTPClientError.invalidHeaderField") {
                    // The error quotes the header, which may be a secret: never repeat it.
                    return TransportFailure(kind: .other, message: "a header of the request to \(host) holds a character HTTP does not allow in a header; check the spool's headers and the secrets they read")
                }
                return TransportFailure(kind: .other, message: "HTTP error talking to \(host): \(text)")
            }
        }
        if let error = error as? HTTPParserError {
            // The server sent something that is not an HTTP/1.1 answer NIO can read.
            let what = error == .headerOverflow
                ? "its headers are larger than the 80 KiB an HTTP client reads" : "\(error)"
            return TransportFailure(kind: .other, message: "the answer from \(host) is not valid HTTP: \(what)")
        }
        if let error = error as? NIOSSLError {
            let text = "\(error)"
            if text.contains("CERTIFICATE_VERIFY_FAILED") {
                return TransportFailure(kind: .tls, message: "the certificate of \(host) is not trusted (verification failed); for a private CA, set ca_file")
            }
            return TransportFailure(kind: .tls, message: "TLS with \(host) failed: \(text)")
        }
        if let error = error as? IOError {
            // Refused or without a route: no connection was made (the connect's own error).
            let unreachable = [ECONNREFUSED, EHOSTUNREACH, ENETUNREACH, EHOSTDOWN, ENETDOWN].contains(error.errnoCode)
            return TransportFailure(kind: unreachable ? .connect : .io, message: "connection to \(host) failed: \(error.description)")
        }
        if let error = error as? NIOConnectionError {
            let reasons = error.connectionErrors.map { attempt -> String in
                if let io = attempt.error as? IOError { return systemErrorMessage(io.errnoCode) }
                return "\(attempt.error)"
            }
            let reason = reasons.first ?? (error.dnsAError ?? error.dnsAAAAError).map { "DNS lookup failed: \($0)" } ?? "no address"
            return TransportFailure(kind: .connect, message: "cannot connect to \(host): \(reason)")
        }
        if let error = error as? ChannelError, case .connectTimeout = error {
            return TransportFailure(kind: .connect, message: "connecting to \(host) timed out")
        }
        if error is SourceChanged {
            return TransportFailure(kind: .sourceChanged, message: "the file changed before it was sent")
        }
        if let error = error as? FileSystemError {
            return TransportFailure(kind: .io, message: "reading the request body failed: \(error.message)")
        }
        return TransportFailure(kind: .other, message: "request to \(host) failed: \(error)")
    }
}

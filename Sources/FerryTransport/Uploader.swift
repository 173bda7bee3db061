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
        client = HTTPClient(eventLoopGroup: HTTPClient.defaultEventLoopGroup, configuration: configuration)
        eventLoops = Array(HTTPClient.defaultEventLoopGroup.makeIterator())
    }

    /// Closes the connection pool.
    public func shutdown() async throws {
        try await client.shutdown()
    }

    /// Sends `request`. `progress` is called with the running count of body bytes handed to the connection.
    ///
    /// A watchdog aborts the request when no body chunk is taken by the connection and no response
    /// byte arrives for ``TransportSettings/noProgressTimeout``. AsyncHTTPClient's own write timeout
    /// is paused while the socket is not writable, so it cannot see a server that stops reading.
    public func send(
        _ request: UploadRequest, logger: Logger, progress: @escaping @Sendable (Int64) -> Void = { _ in }
    ) async -> UploadResult {
        let counter = ByteCounter()
        let watchdog = ProgressWatchdog(timeout: settings.noProgressTimeout)
        do {
            return try await withThrowingTaskGroup(of: UploadResult?.self) { group in
                group.addTask {
                    try await self.execute(request, logger: logger, counter: counter, watchdog: watchdog, progress: progress)
                }
                group.addTask {
                    try await watchdog.run()
                    return nil
                }
                let first = try await group.next()!
                group.cancelAll()
                if let result = first { return result }
                // The watchdog fired. If the server's answer had already arrived, it stands.
                if case .some(.some(let late)) = try? await group.next(), case .response(let status, _, _, _) = late {
                    if watchdog.answerOverdue {
                        logger.notice("the server's answer did not end within no_progress_timeout of its status; the status stands, the rest is dropped",
                                      metadata: ["status": "\(status)", "no_progress_timeout": "\(settings.noProgressTimeout)"])
                    }
                    return late
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
        } catch {
            if watchdog.fired {
                return .failed(TransportFailure(kind: .timeout, message: "no progress for \(settings.noProgressTimeout)"), bytesSent: counter.value)
            }
            if Task.isCancelled || error is CancellationError || (error as? HTTPClientError) == .cancelled {
                return .cancelled(bytesSent: counter.value)
            }
            return .failed(Self.describe(error, request: request), bytesSent: counter.value)
        }
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
        if URL(string: request.url)?.scheme?.lowercased() == "http" {
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
            let range = request.bodyOffset..<(request.bodyOffset + request.contentLength)
            let handOver: @Sendable (ByteBuffer) async -> ByteBuffer = { buffer in
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
                    let length = min(Int64(Self.chunkLength.bytes), range.upperBound - offset)
                    try await growing.wait(until: offset + length)
                    let chunk = try await file.readChunk(fromAbsoluteOffset: offset, length: .bytes(length))
                    guard chunk.readableBytes > 0 else { throw SourceChanged() }
                    _ = position.add(Int64(chunk.readableBytes))
                    return chunk
                })
                http.body = .stream(chunks.map(handOver), length: .known(request.contentLength))
            } else {
                http.body = .stream(file.readChunks(in: range, chunkLength: Self.chunkLength).map(handOver), length: .known(request.contentLength))
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

    /// How much of the body one `sendfile` write carries. The no-progress watchdog hears of a write
    /// only when it completes, so this bounds how slow a link may be (256 KiB per minute) before it
    /// counts as stalled.
    static let regionLength: Int64 = 256 * 1024

    /// Sends the body of a plain-HTTP request as file regions: NIO writes them with `sendfile(2)`,
    /// so the bytes go from the page cache to the socket without passing through ferryd (HTTP/1.1;
    /// with TLS, ``execute(_:logger:counter:watchdog:progress:)`` streams chunks instead).
    private func executeFromFile(
        _ request: UploadRequest, bodyPath: String, headers: HTTPHeaders, logger: Logger, counter: ByteCounter,
        watchdog: ProgressWatchdog, progress: @escaping @Sendable (Int64) -> Void
    ) async throws -> UploadResult {
        let descriptor = open(bodyPath, O_RDONLY | O_CLOEXEC)
        guard descriptor >= 0 else { throw IOError(errnoCode: errno, reason: "open \(bodyPath)") }
        let file = NIOFileHandle(_deprecatedTakingOwnershipOfDescriptor: descriptor)
        let writing = PendingWrites()
        let result: Result<UploadResult, any Error>
        do {
            if let expected = request.expectedSource {
                var st = stat()
                guard fstat(descriptor, &st) == 0, FileStatus(st).isSameVersion(as: expected) else { throw SourceChanged() }
            }
            // Sent from the spool itself (put, tus): before each region, is it still that version? A file
            // cut short under sendfile(2) would otherwise leave the request waiting for bytes that never come.
            let expected = request.expectedSource
            @Sendable func unchanged() -> Bool {
                guard let expected else { return true }
                var st = stat()
                return fstat(descriptor, &st) == 0 && FileStatus(st).isSameVersion(as: expected)
            }
            result = .success(try await sendRegions(
                of: file, request, headers: headers, logger: logger, counter: counter, watchdog: watchdog,
                progress: progress, writing: writing, unchanged: unchanged))
        } catch {
            result = .failure(error)
        }
        // Once the request has ended, NIO no longer writes from the file (a closed connection fails
        // its pending writes), though AsyncHTTPClient may never complete the futures of writes it
        // had not passed on: wait for them only briefly. Closing is safe even then: a region still
        // queued finds its handle closed, not another file under a reused descriptor number.
        if let done = writing.future {
            let loop = done.eventLoop
            let settled = loop.makePromise(of: Void.self)
            let once = Once()
            let settle: @Sendable () -> Void = { if once.first() { settled.succeed() } }
            done.whenComplete { _ in settle() }
            loop.scheduleTask(in: .seconds(1)) { settle() }
            _ = try? await settled.futureResult.get()
        }
        Self.close(file)
        return try result.get()
    }

    /// Closes a body file handle; if NIO is using it at this very moment, tries again shortly.
    static func close(_ file: NIOFileHandle) {
        do {
            try file.close()
        } catch {
            Task.detached {
                for _ in 0..<50 {
                    try? await Task.sleep(for: .milliseconds(100))
                    if (try? file.close()) != nil { return }
                }
            }
        }
    }

    private func sendRegions(
        of file: NIOFileHandle, _ request: UploadRequest, headers: HTTPHeaders, logger: Logger, counter: ByteCounter,
        watchdog: ProgressWatchdog, progress: @escaping @Sendable (Int64) -> Void, writing: PendingWrites,
        unchanged: @escaping @Sendable () -> Bool
    ) async throws -> UploadResult {
        let start = request.bodyOffset
        let end = request.bodyOffset + request.contentLength
        let loop = client.eventLoopGroup.next()
        let body = HTTPClient.Body.stream(contentLength: request.contentLength) { writer in
            @Sendable func write(from offset: Int64) -> EventLoopFuture<Void> {
                let upTo = min(offset + Self.regionLength, end)
                guard unchanged() else { return loop.makeFailedFuture(SourceChanged()) }
                let written: EventLoopFuture<Void>
                if let growing = request.growing {
                    written = growing.ready(until: upTo, on: loop).flatMap {
                        writer.write(.fileRegion(FileRegion(fileHandle: file, readerIndex: Int(offset), endIndex: Int(upTo))))
                    }
                } else {
                    written = writer.write(.fileRegion(FileRegion(fileHandle: file, readerIndex: Int(offset), endIndex: Int(upTo))))
                }
                return written.flatMap {
                    watchdog.progressed()
                    progress(counter.add(upTo - offset))
                    guard upTo < end else { return written }
                    // Through the loop's queue, so a chain of writes that complete at once does not
                    // recurse, and the loop runs its other work between them.
                    return written.eventLoop.submit {}.flatMap { write(from: upTo) }
                }
            }
            let done = write(from: start)
            writing.future = done
            return done
        }
        var http = try HTTPClient.Request(url: request.url, method: HTTPMethod(rawValue: request.method), headers: headers, body: body)
        http.headers.remove(name: "Content-Length")
        let delegate = ResponseCollector(limit: Self.responseLimit, watchdog: watchdog)
        // The request, its connection and the body's readiness all on one loop: a body that becomes
        // ready on another loop let the answer overtake the end of the body, and the connection was
        // never given back to the pool.
        let task = client.execute(request: http, delegate: delegate, eventLoop: .delegateAndChannel(on: loop), deadline: nil, logger: logger)
        return try await answer(of: task, from: delegate, counter: counter, logger: logger)
    }

    /// Executes `http` and reads the answer.
    private func exchange(_ http: HTTPClientRequest, counter: ByteCounter, watchdog: ProgressWatchdog, logger: Logger) async throws -> UploadResult {
        let response = try await client.execute(http, deadline: .distantFuture, logger: logger)
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
        return .response(status: Int(response.status.code), headers: headers, body: body, bytesSent: counter.value)
    }

    /// A readable account of a transport error.
    static func describe(_ error: any Error, request: UploadRequest) -> TransportFailure {
        let host = URL(string: request.url).map { "\($0.host ?? "?")\($0.port.map { ":\($0)" } ?? "")" } ?? "the server"
        if let error = error as? HTTPClientError {
            switch error {
            case .connectTimeout:
                return TransportFailure(kind: .timeout, message: "connecting to \(host) timed out")
            case .readTimeout:
                return TransportFailure(kind: .timeout, message: "no response from \(host) within the no-progress timeout")
            case .writeTimeout:
                return TransportFailure(kind: .timeout, message: "\(host) stopped reading the upload (no progress within the timeout)")
            case .remoteConnectionClosed:
                return TransportFailure(kind: .connectionClosed, message: "\(host) closed the connection before answering")
            default:
                return TransportFailure(kind: .other, message: "HTTP error talking to \(host): \(error)")
            }
        }
        if let error = error as? NIOSSLError {
            let text = "\(error)"
            if text.contains("CERTIFICATE_VERIFY_FAILED") {
                return TransportFailure(kind: .tls, message: "the certificate of \(host) is not trusted (verification failed); for a private CA, set ca_file")
            }
            return TransportFailure(kind: .tls, message: "TLS with \(host) failed: \(text)")
        }
        if let error = error as? IOError {
            return TransportFailure(kind: .io, message: "connection to \(host) failed: \(error.description)")
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
            return TransportFailure(kind: .timeout, message: "connecting to \(host) timed out")
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

extension Uploader {
    /// Closes the connection pool, blocking; for `defer` blocks.
    public func syncShutdown() throws {
        try client.syncShutdown()
    }
}

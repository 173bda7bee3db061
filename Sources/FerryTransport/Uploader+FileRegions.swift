import AsyncHTTPClient
import FerrySystem
import Logging
import NIOCore
import NIOHTTP1
import NIOPosix
import Synchronization

#if canImport(Glibc)
import Glibc
#endif

/// Plain HTTP: the body as file regions, which NIO writes with `sendfile(2)`.
extension Uploader {
    /// The most of the body one `sendfile` write carries (``RegionSizer`` starts smaller, and
    /// shrinks regions on a slow link, as the no-progress watchdog hears of a write only when it
    /// completes).
    static let regionLength: Int64 = 256 * 1024

    /// Sends the body of a plain-HTTP request as file regions: NIO writes them with `sendfile(2)`,
    /// so the bytes go from the page cache to the socket without passing through ferryd (HTTP/1.1;
    /// with TLS, ``execute(_:logger:counter:watchdog:progress:)`` streams chunks instead).
    func executeFromFile(
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
                    try? await EventLoopSleep.sleep(for: .milliseconds(100))
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
        let (loop, client) = fileRegionClients.next()
        let throttle = self.throttle
        // Under a bandwidth limit, regions of about a tenth of a second's worth.
        let sizer = Mutex(RegionSizer(
            ceiling: throttle?.pieceLength(ceiling: Self.regionLength) ?? Self.regionLength, noProgressTimeout: watchdog.timeout))
        let body = HTTPClient.Body.stream(contentLength: request.contentLength) { writer in
            @Sendable func write(from offset: Int64) -> EventLoopFuture<Void> {
                let upTo = min(offset + sizer.withLock { $0.length }, end)
                if let throttle, case let forgiven = throttle.debtsForgiven, case let wait = throttle.take(upTo - offset), wait > .zero {
                    // The region waits for its tokens on the loop, in slices; a wait is no stall.
                    watchdog.willWait(wait)
                    @Sendable func waiting(_ left: Duration) -> EventLoopFuture<Void> {
                        guard left > .zero else {
                            watchdog.progressed()
                            return send(from: offset, upTo: upTo)
                        }
                        let slice = min(left, Throttle.waitSlice)
                        return loop.scheduleTask(in: .nanoseconds(Int64(slice / .nanoseconds(1)))) {}
                            .futureResult.flatMap { waiting(throttle.stillOwed(left, after: slice, since: forgiven)) }
                    }
                    return waiting(wait)
                }
                return send(from: offset, upTo: upTo)
            }
            @Sendable func send(from offset: Int64, upTo: Int64) -> EventLoopFuture<Void> {
                guard unchanged() else { return loop.makeFailedFuture(SourceChanged()) }
                @Sendable func region() -> EventLoopFuture<ContinuousClock.Instant> {
                    let started = ContinuousClock.now
                    return writer.write(.fileRegion(FileRegion(fileHandle: file, readerIndex: Int(offset), endIndex: Int(upTo)))).map { started }
                }
                let written = request.growing.map { $0.ready(until: upTo, on: loop).flatMap(region) } ?? region()
                return written.flatMap { started in
                    sizer.withLock { $0.wrote(upTo - offset, in: .now - started) }
                    watchdog.progressed()
                    progress(counter.add(upTo - offset))
                    guard upTo < end else { return loop.makeSucceededVoidFuture() }
                    // Through the loop's queue, so a chain of writes that complete at once does not
                    // recurse, and the loop runs its other work between them.
                    return loop.submit {}.flatMap { write(from: upTo) }
                }
            }
            let done = write(from: start)
            writing.future = done
            return done
        }
        var http = try HTTPClient.Request(url: request.url, method: HTTPMethod(rawValue: request.method), headers: headers, body: body)
        http.headers.remove(name: "Content-Length")
        let delegate = ResponseCollector(limit: Self.responseLimit, watchdog: watchdog, sent: counter)
        // The request, its connection and the body's readiness all on one loop: a body that becomes
        // ready on another loop let the answer overtake the end of the body, and the connection was
        // never given back to the pool. `client` has no other loop, so its pooled keep-alive
        // connections are there without requiring it (which would make a connection per request).
        let task = client.execute(request: http, delegate: delegate, eventLoop: .delegate(on: loop), deadline: nil, logger: logger.forHTTPClient)
        return try await answer(of: task, from: delegate, counter: counter, logger: logger)
    }
}

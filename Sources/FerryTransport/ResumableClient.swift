import FerryConfig
import FerryDelivery
import FerryQueue
import FerrySystem
import Foundation
import Logging
import Synchronization

/// One file to deliver by the resumable upload draft: where to create the upload, the file, and what
/// is known already.
public struct ResumableTransfer: Sendable {
    /// Where the upload is created (the spool's URL, names filled in), with `method`.
    public var endpoint: String
    public var method: String
    /// Names the endpoint (a digest: the endpoint may hold a secret); stored with the upload.
    public var endpointKey: String
    /// Configured headers (values may be secrets), for the endpoint's origin.
    public var headers: [(name: String, value: String)]
    /// Origins an upload URL may be on and still get ``headers`` (the endpoint's and `send_headers_to`).
    public var trustedOrigins: Set<HTTPOrigin>
    /// The file's `Content-Type`, sent on the creation request.
    public var contentType: String
    /// The file, opened safely: every request body is read through its descriptor and checked
    /// against its version.
    public var source: SourceFile
    public var chunkSize: Int64?
    public var interop: ResumableInteropVersion
    /// The upload from an earlier attempt at this endpoint, if any.
    public var known: ResumableUpload?
    /// The job's key: an attempt's first creation is sent with it (``CreationKey``).
    public var idempotencyKey: String
    /// Files up to this long go whole in the creation request (``ResumableUploadMachine/Settings/wholeBodyLimit``).
    public var wholeBodyLimit = ResumableUploadMachine.defaultWholeBodyLimit
    /// The file's name, sent on the creation request as `Content-Disposition` (unless the configured
    /// headers set one): how tusd's draft handler names the upload.
    public var filename: String?

    public init(
        endpoint: String, method: String, endpointKey: String, headers: [(name: String, value: String)], trustedOrigins: Set<HTTPOrigin>,
        contentType: String, source: SourceFile, chunkSize: Int64?, interop: ResumableInteropVersion, known: ResumableUpload?,
        idempotencyKey: String
    ) {
        self.endpoint = endpoint
        self.method = method
        self.endpointKey = endpointKey
        self.headers = headers
        self.trustedOrigins = trustedOrigins
        self.contentType = contentType
        self.source = source
        self.chunkSize = chunkSize
        self.interop = interop
        self.known = known
        self.idempotencyKey = idempotencyKey
    }

    public var length: Int64 { source.status.size }

    /// The configured headers for a request to `url` (none off the trusted origins) and the draft's version.
    func headers(for url: String) -> [(name: String, value: String)] {
        HTTPOrigin.headers(headers, for: url, trusted: trustedOrigins) + [("Upload-Draft-Interop-Version", interop.headerValue)]
    }
}

/// A client of the IETF draft "Resumable Uploads for HTTP" on an ``Uploader``'s connection pool: the
/// I/O shell around ``ResumableUploadMachine``, which decides every step. This type makes the requests
/// the machine asks for, hands every new upload state to `record` (which must make it durable)
/// before the next request, and logs the machine's notices. What `OPTIONS` showed of an endpoint is
/// kept for ten minutes, shared by the uploads that start together.
public final class ResumableClient: Sendable {
    let uploader: Uploader
    private let discovered = Mutex<[String: (Task<ResumableUploadMachine.Discovery, Never>, ContinuousClock.Instant)]>([:])

    public init(uploader: Uploader) { self.uploader = uploader }

    /// Sends what the server does not have yet. If `record` throws, the transfer stops and the error
    /// is rethrown. `progress` gets the file position reached (confirmed offset plus bytes in flight).
    public func send(
        _ transfer: ResumableTransfer, logger: Logger,
        record: @escaping @Sendable (ResumableUpload) async throws -> Void,
        progress: @escaping @Sendable (Int64) -> Void
    ) async throws -> ResumableTransferResult {
        var machine = ResumableUploadMachine(
            settings: .init(endpoint: transfer.endpoint, length: transfer.length, chunkSize: transfer.chunkSize,
                            endpointKey: transfer.endpointKey, interop: transfer.interop, wholeBodyLimit: transfer.wholeBodyLimit),
            known: transfer.known, now: Date())
        var action = machine.start()
        var creations = 0
        while true {
            if Task.isCancelled, !action.isFinish { action = machine.cancel() }
            switch action {
            case .finish(let report):
                for notice in machine.takeNotices() { Self.log(notice, to: logger) }
                return ResumableTransferResult(
                    report: report, bytesSent: machine.bytesSent, upload: machine.upload, progressed: machine.progressed,
                    answeredEarly: machine.answeredEarly)
            case .discover:
                action = machine.discovered(await discover(transfer, logger: logger))
            case .create(let bodyLength, let complete):
                creations += 1
                // Not after an upload the server lost (known, then 404): its key would get the lost one's answer.
                let key = creations == 1 && transfer.known == nil ? CreationKey.value(jobKey: transfer.idempotencyKey, bytes: bodyLength) : nil
                action = machine.created(await create(
                    transfer, bodyLength: bodyLength, complete: complete, key: key, logger: logger, progress: progress))
            case .askOffset(let url):
                var headers = transfer.headers(for: url)
                headers.append(("Cache-Control", "no-store"))
                action = machine.offsetAsked(RequestOutcome(await uploader.send(.bodiless(url: url, method: "HEAD", headers: headers), logger: logger)))
                if let upload = machine.upload { progress(upload.offset) }
            case .append(let url, let offset, let length, let complete):
                action = machine.appended(await append(transfer, url: url, range: offset..<(offset + length), complete: complete,
                                                       logger: logger, progress: progress))
            case .record(let upload):
                try await record(upload)
                action = machine.recorded()
            case .terminate(let url):
                await terminate(url, headers: transfer.headers(for: url), logger: logger)
                action = machine.terminated()
            }
            for notice in machine.takeNotices() { Self.log(notice, to: logger) }
        }
    }

    /// The creation request: the file's first `bodyLength` bytes (none, or all of it), with `key` as
    /// its `Idempotency-Key` (``CreationKey``).
    private func create(
        _ transfer: ResumableTransfer, bodyLength: Int64, complete: Bool, key: String?, logger: Logger,
        progress: @escaping @Sendable (Int64) -> Void
    ) async -> ResumableUploadMachine.Response {
        var headers = transfer.headers(for: transfer.endpoint)
        headers.append(("Upload-Complete", ResumableFields.boolean(complete)))
        headers.append(("Upload-Length", String(transfer.length)))
        if let filename = transfer.filename, HTTPHeaders.value("Content-Disposition", in: headers) == nil {
            headers.append(("Content-Disposition", ContentDisposition.attachment(filename: filename)))
        }
        let request = UploadRequest(
            url: transfer.endpoint, method: transfer.method, headers: headers, bodyPath: bodyLength > 0 ? transfer.source.procPath : nil,
            contentLength: bodyLength, contentType: transfer.contentType, idempotencyKey: key,
            expectedSource: bodyLength > 0 ? transfer.source.status : nil)
        return RequestOutcome(await uploader.send(request, logger: logger, progress: progress))
    }

    /// `PATCH` a range of the file at its offset.
    private func append(
        _ transfer: ResumableTransfer, url: String, range: Range<Int64>, complete: Bool, logger: Logger,
        progress: @escaping @Sendable (Int64) -> Void
    ) async -> ResumableUploadMachine.Response {
        var headers = transfer.headers(for: url)
        headers.append(("Upload-Offset", String(range.lowerBound)))
        headers.append(("Upload-Complete", ResumableFields.boolean(complete)))
        // No Upload-Length: the creation declared it, and tusd refuses it on an append to an upload
        // whose length is known (400 ERR_INVALID_UPLOAD_LENGTH).
        if complete, transfer.interop.closesConnectionAfterCompletingAppend { headers.append(("Connection", "close")) }
        let request = UploadRequest(
            url: url, method: "PATCH", headers: headers, bodyPath: range.isEmpty ? nil : transfer.source.procPath, bodyOffset: range.lowerBound,
            contentLength: Int64(range.count), contentType: ResumableFields.partialUpload, idempotencyKey: nil,
            expectedSource: range.isEmpty ? nil : transfer.source.status)
        return RequestOutcome(await uploader.send(request, logger: logger, progress: { progress(range.lowerBound + $0) }))
    }

    /// Asks the server to forget an upload, best-effort: an upload that is cancelled, or superseded
    /// by a new version of its file. `headers` must carry `Upload-Draft-Interop-Version`.
    public func terminate(_ url: String, headers: [(name: String, value: String)], logger: Logger) async {
        switch await uploader.send(.bodiless(url: url, method: "DELETE", headers: headers), logger: logger) {
        case .response(let status, _, _, _) where (200..<300).contains(status) || status == 404 || status == 410:
            logger.info("the server's upload was deleted", metadata: ["status": "\(status)"])
        case .response(let status, _, _, _):
            logger.notice("the server did not delete the upload", metadata: ["status": "\(status)"])
        case .failed(let failure, _):
            logger.notice("could not ask the server to delete the upload", metadata: ["error": "\(failure)"])
        case .cancelled:
            break
        }
    }

    /// Whether the endpoint offers resumable uploads, from `OPTIONS` (kept for ten minutes per
    /// endpoint and version; a failure is not kept).
    func discover(_ transfer: ResumableTransfer, logger: Logger) async -> ResumableUploadMachine.Discovery {
        let key = transfer.interop.headerValue + " " + transfer.endpoint
        let now = ContinuousClock.now
        let task = discovered.withLock { known -> Task<ResumableUploadMachine.Discovery, Never> in
            if let (task, at) = known[key], now - at < .seconds(600) { return task }
            // An endpoint rendered per file ({filename}) is a key per file: the stale ones go, so
            // that the cache holds no more than ten minutes' endpoints.
            known = known.filter { now - $0.value.1 < .seconds(600) }
            let task = Task { await self.askOffer(transfer, logger: logger) }
            known[key] = (task, now)
            return task
        }
        // A waiter that is cancelled (its job held, say) leaves the others their answer.
        let result = await SharedTaskWait.value(of: task, ifCancelled: .failed("cancelled"))
        if case .failed = result, !Task.isCancelled {
            discovered.withLock { known in
                if let (current, _) = known[key], current == task { known[key] = nil }
            }
        }
        return result
    }

    private func askOffer(_ transfer: ResumableTransfer, logger: Logger) async -> ResumableUploadMachine.Discovery {
        let request = UploadRequest.bodiless(url: transfer.endpoint, method: "OPTIONS", headers: transfer.headers(for: transfer.endpoint))
        switch await uploader.send(request, logger: logger) {
        case .response(let status, let headers, _, _):
            // 501: a server that has no OPTIONS (Python's http.server, many small ones) offers no
            // resumable uploads; any other 5xx may pass, so the attempt is retried.
            if status >= 500, status != 501 { return .failed("the server answered OPTIONS with \(status)") }
            let offered = transfer.interop.offersResumption(status: status, headers: headers)
            logger.debug("resumable upload support", metadata: [
                "status": "\(status)", "offered": "\(offered)", "limit": "\(HTTPHeaders.value("Upload-Limit", in: headers) ?? "-")",
            ])
            if !offered, HTTPHeaders.value("Tus-Resumable", in: headers) ?? HTTPHeaders.value("Tus-Version", in: headers) != nil {
                // tusd without its experimental protocol, or asked at an interop version it does not know.
                logger.warning("""
                    the server speaks tus (its OPTIONS answer has Tus-Resumable or Tus-Version) and offers no resumable upload at interop \
                    version \(transfer.interop.headerValue): set protocol = "tus", or, for tusd started with \
                    -enable-experimental-protocol, interop_version = 6
                    """)
            }
            return offered ? .offered(UploadLimit(headers: headers, interop: transfer.interop) ?? UploadLimit()) : .notOffered
        case .failed(let failure, _):
            return failure.isUnreachable ? .unreachable(failure.message) : .failed(failure.message)
        case .cancelled:
            return .failed("cancelled")
        }
    }

    static func log(_ notice: ResumableUploadMachine.Notice, to logger: Logger) {
        switch notice {
        case .notOffered: logger.info("the server does not offer resumable uploads (no Upload-Limit in its OPTIONS answer); sending the file whole")
        case .lost(let status): logger.notice("the server no longer has the upload; starting a new one", metadata: ["status": "\(status)"])
        case .mismatch(let offset, let length):
            logger.warning("the server's upload does not match the file; starting a new one",
                           metadata: ["offset": "\(offset)", "length": "\(length.map(String.init) ?? "-")"])
        case .created(let offset): logger.debug("resumable upload created", metadata: ["offset": "\(offset)"])
        case .resumed(let offset): logger.debug("resumable upload resumed", metadata: ["offset": "\(offset)"])
        case .completedEarlier: logger.notice("the server had completed the upload; the answer to its last request was lost")
        case .appendTooLarge(let length): logger.notice("the server refused an append as too large (413); sending smaller ones", metadata: ["length": "\(length)"])
        }
    }
}

extension ResumableUploadMachine.Action {
    var isFinish: Bool {
        if case .finish = self { return true }
        return false
    }
}

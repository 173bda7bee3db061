import Crypto
import FerryConfig
import FerryDelivery
import FerryQueue
import FerrySystem
import Foundation
import Logging
import NIOPosix
import Synchronization

/// One file to deliver with tus: where to create the upload, the file, and what is known already.
public struct TusTransfer: Sendable {
    /// The creation endpoint (`POST` target).
    public var endpoint: String
    /// Names the endpoint (a digest: the endpoint may hold a secret); stored with the upload.
    public var endpointKey: String
    /// Configured headers (values may be secrets), for the endpoint's origin.
    public var headers: [(name: String, value: String)]
    /// Origins an upload URL may be on and still get ``headers`` (the endpoint's and `send_headers_to`).
    public var trustedOrigins: Set<HTTPOrigin>
    /// `Upload-Metadata` pairs, `filename` and `filetype` first (values are base64-encoded on the
    /// wire); asked for only when an upload is created.
    public var metadata: @Sendable () async throws -> [(key: String, value: String)]
    /// The file, opened safely: every request body is read through its descriptor and checked
    /// against its version.
    public var source: SourceFile
    /// The most sent in one request; `nil`: the whole remainder.
    public var chunkSize: Int64?
    /// The upload from an earlier attempt, if any.
    public var known: ResumableUpload?
    /// The job's key: an attempt's first creation is sent with it (``CreationKey``).
    public var idempotencyKey: String
    /// The checksum algorithm preferred when the server offers it (`sha256`, `sha512`); else sha1.
    public var preferredChecksum: String?
    /// Whether a creation may carry the file (``TusUploadMachine/Settings/uploadsDuringCreation``).
    public var uploadsDuringCreation = true

    public init(
        endpoint: String, endpointKey: String, headers: [(name: String, value: String)], trustedOrigins: Set<HTTPOrigin>,
        metadata: @escaping @Sendable () async throws -> [(key: String, value: String)], source: SourceFile,
        chunkSize: Int64?, known: ResumableUpload?, idempotencyKey: String
    ) {
        self.endpoint = endpoint
        self.endpointKey = endpointKey
        self.headers = headers
        self.trustedOrigins = trustedOrigins
        self.metadata = metadata
        self.source = source
        self.chunkSize = chunkSize
        self.known = known
        self.idempotencyKey = idempotencyKey
    }

    public var length: Int64 { source.status.size }

    /// The configured headers for a request to `url`: none if it is on an origin not trusted with them.
    func headers(for url: String) -> [(name: String, value: String)] {
        HTTPOrigin.headers(headers, for: url, trusted: trustedOrigins)
    }
}

/// A tus 1.0 client (tus.io/protocols/resumable-upload): core protocol plus the creation,
/// creation-with-upload, checksum (sha1), expiration and termination extensions, on an ``Uploader``'s
/// connection pool. It is the I/O shell around ``TusUploadMachine``, which decides every step: this
/// type makes the requests the machine asks for, hands every new upload state to `record` (which
/// must make it durable) before the next request, and logs the machine's notices.
public final class TusClient: Sendable {
    public static let version = "1.0.0"

    let uploader: Uploader
    private let discovered = Mutex<[String: (Task<Result<TusCapabilities, TusDiscoveryFailure>, Never>, ContinuousClock.Instant)]>([:])

    public init(uploader: Uploader) { self.uploader = uploader }

    /// Sends what the server does not have yet. If `record` throws, the transfer stops and the error
    /// is rethrown. `progress` gets the file position reached (confirmed offset plus bytes in flight).
    public func send(
        _ transfer: TusTransfer, logger: Logger,
        record: @escaping @Sendable (ResumableUpload) async throws -> Void,
        progress: @escaping @Sendable (Int64) -> Void
    ) async throws -> ResumableTransferResult {
        var machine = TusUploadMachine(
            settings: .init(endpoint: transfer.endpoint, length: transfer.length, chunkSize: transfer.chunkSize,
                            endpointKey: transfer.endpointKey, preferredChecksum: transfer.preferredChecksum,
                            uploadsDuringCreation: transfer.uploadsDuringCreation),
            known: transfer.known, now: Date())
        var action = machine.start()
        var warnedOrigin: String?
        while true {
            if Task.isCancelled, !action.isFinish { action = machine.cancel() }
            switch action {
            case .finish(let report):
                return ResumableTransferResult(report: report, bytesSent: machine.bytesSent, upload: machine.upload, progressed: machine.progressed)
            case .discover:
                action = machine.discovered(await discover(transfer.endpoint, headers: transfer.headers, digest: transfer.preferredChecksum, logger: logger))
            case .create(let bodyLength, let checksum, let sendsKey):
                action = machine.created(await create(transfer, bodyLength: bodyLength, checksum: checksum ? machine.checksumAlgorithm : nil, sendsKey: sendsKey,
                                                      logger: logger, progress: progress))
            case .askOffset(let url):
                var headers = protocolHeaders(transfer, url: url)
                headers.append(("Cache-Control", "no-store"))
                action = machine.offsetAsked(RequestOutcome(await uploader.send(.bodiless(url: url, method: "HEAD", headers: headers), logger: logger)))
                if let upload = machine.upload { progress(upload.offset) }
            case .append(let url, let offset, let length, let checksum):
                action = machine.appended(await append(transfer, url: url, range: offset..<(offset + length), checksum: checksum ? machine.checksumAlgorithm : nil,
                                                       logger: logger, progress: progress))
            case .record(let upload):
                try await record(upload)
                if !transfer.headers.isEmpty, transfer.headers(for: upload.url).isEmpty, warnedOrigin != upload.url {
                    warnedOrigin = upload.url
                    logger.notice("the upload is on another origin; the configured headers are not sent there (send_headers_to allows it)",
                                  metadata: ["origin": "\(HTTPOrigin(url: upload.url).map(String.init(describing:)) ?? "-")"])
                }
                action = machine.recorded()
            case .terminate(let url):
                await terminate(url, headers: transfer.headers(for: url), logger: logger)
                action = machine.terminated()
            }
            for notice in machine.takeNotices() { Self.log(notice, to: logger) }
        }
    }

    /// `POST` a new upload, carrying the first `bodyLength` bytes when not 0.
    private func create(
        _ transfer: TusTransfer, bodyLength: Int64, checksum: String?, sendsKey: Bool, logger: Logger,
        progress: @escaping @Sendable (Int64) -> Void
    ) async -> TusUploadMachine.Response {
        let metadata: [(key: String, value: String)]
        do {
            metadata = try await transfer.metadata()
        } catch {
            return Task.isCancelled ? .cancelled(bytesSent: 0) : .failed("cannot read the file for its metadata: \(error)", bytesSent: 0)
        }
        var headers = protocolHeaders(transfer)
        headers.append(("Upload-Length", String(transfer.length)))
        headers.append(("Upload-Metadata", Self.encodeMetadata(metadata)))
        if let checksum {
            switch await Self.checksum(checksum, transfer.source, 0..<bodyLength) {
            case .success(let digest): headers.append(("Upload-Checksum", checksum + " " + digest))
            case .failure(let failure): return failure.response
            }
        }
        let key = sendsKey ? CreationKey.value(jobKey: transfer.idempotencyKey, bytes: bodyLength) : nil
        let request = bodyLength > 0
            ? UploadRequest(
                url: transfer.endpoint, method: "POST", headers: headers, bodyPath: transfer.source.procPath, bodyOffset: 0,
                contentLength: bodyLength, contentType: "application/offset+octet-stream", idempotencyKey: key,
                expectedSource: transfer.source.status)
            : UploadRequest(
                url: transfer.endpoint, method: "POST", headers: headers, bodyPath: nil, contentLength: 0, contentType: nil,
                idempotencyKey: key)
        return RequestOutcome(await uploader.send(request, logger: logger, progress: progress))
    }

    /// `PATCH` a range of the file at its offset.
    private func append(
        _ transfer: TusTransfer, url: String, range: Range<Int64>, checksum: String?, logger: Logger,
        progress: @escaping @Sendable (Int64) -> Void
    ) async -> TusUploadMachine.Response {
        var headers = protocolHeaders(transfer, url: url)
        headers.append(("Upload-Offset", String(range.lowerBound)))
        if let checksum {
            switch await Self.checksum(checksum, transfer.source, range) {
            case .success(let digest): headers.append(("Upload-Checksum", checksum + " " + digest))
            case .failure(let failure): return failure.response
            }
        }
        let request = UploadRequest(
            url: url, method: "PATCH", headers: headers, bodyPath: transfer.source.procPath, bodyOffset: range.lowerBound,
            contentLength: Int64(range.count), contentType: "application/offset+octet-stream", idempotencyKey: nil,
            expectedSource: transfer.source.status)
        return RequestOutcome(await uploader.send(request, logger: logger, progress: { progress(range.lowerBound + $0) }))
    }

    /// Why a checksum could not be had, as the machine takes it.
    private struct ChecksumFailure: Error {
        var response: TusUploadMachine.Response
    }

    /// The base64 digest (`sha1`, `sha256` or `sha512`) of a range of the file, computed off the
    /// concurrency pool.
    private static func checksum(_ algorithm: String, _ source: SourceFile, _ range: Range<Int64>) async -> Result<String, ChecksumFailure> {
        do {
            return .success(try await NIOThreadPool.singleton.runIfActive {
                guard source.isUnchanged else { throw SourceReadError.changed }
                let digest: [UInt8] = switch algorithm {
                case "sha256": Array(try source.digest(SHA256.self, of: range))
                case "sha512": Array(try source.digest(SHA512.self, of: range))
                default: Array(try source.digest(Insecure.SHA1.self, of: range))
                }
                return Data(digest).base64EncodedString()
            })
        } catch SourceReadError.changed {
            return .failure(ChecksumFailure(response: .sourceChanged(bytesSent: 0)))
        } catch {
            return .failure(ChecksumFailure(response: .failed("cannot read the file for its checksum: \(error)", bytesSent: 0)))
        }
    }

    static func log(_ notice: TusUploadMachine.Notice, to logger: Logger) {
        switch notice {
        case .expired: logger.info("the server's upload has expired; starting a new one")
        case .lost(let status): logger.notice("the server no longer has the upload; starting a new one", metadata: ["status": "\(status)"])
        case .mismatch(let offset, let length):
            logger.warning("the server's upload does not match the file; starting a new one",
                           metadata: ["offset": "\(offset)", "length": "\(length.map(String.init) ?? "-")"])
        case .checksumMismatch: logger.warning("the server found a checksum mismatch (460); sending the piece again")
        case .created(let offset): logger.debug("tus upload created", metadata: ["offset": "\(offset)"])
        case .resumed(let offset): logger.debug("tus upload resumed", metadata: ["offset": "\(offset)"])
        }
    }

    /// Asks the server to forget an upload (termination extension), best-effort: an upload that is
    /// cancelled, or superseded by a new version of its file.
    public func terminate(_ url: String, headers: [(name: String, value: String)], logger: Logger) async {
        var all = headers
        all.append(("Tus-Resumable", Self.version))
        switch await uploader.send(.bodiless(url: url, method: "DELETE", headers: all), logger: logger) {
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

    /// The server's capabilities, from `OPTIONS` (kept for ten minutes per endpoint; uploads that
    /// start together share one request). A server that answers `OPTIONS` with a 4xx is taken to
    /// support the creation extension only; a 5xx or no answer fails the attempt.
    /// With `digest` (the spool's, as tus names it) that the server does not offer, a warning says
    /// so once per discovery: the spool asked for a check this server will not make.
    func discover(
        _ endpoint: String, headers: [(name: String, value: String)], digest: String? = nil, logger: Logger
    ) async -> Result<TusCapabilities, TusDiscoveryFailure> {
        let now = ContinuousClock.now
        let task = discovered.withLock { known -> Task<Result<TusCapabilities, TusDiscoveryFailure>, Never> in
            if let (task, at) = known[endpoint], now - at < .seconds(600) { return task }
            let task = Task { await self.askCapabilities(endpoint, headers: headers, digest: digest, logger: logger) }
            known[endpoint] = (task, now)
            return task
        }
        // A waiter that is cancelled (its job held, say) leaves the others their answer.
        let result = await SharedTaskWait.value(of: task, ifCancelled: .failure(TusDiscoveryFailure(message: "cancelled")))
        if case .failure = result, !Task.isCancelled {
            // Not remembered: the next upload asks again.
            discovered.withLock { known in
                if let (current, _) = known[endpoint], current == task { known[endpoint] = nil }
            }
        }
        return result
    }

    private func askCapabilities(
        _ endpoint: String, headers: [(name: String, value: String)], digest: String?, logger: Logger
    ) async -> Result<TusCapabilities, TusDiscoveryFailure> {
        var all = headers
        all.append(("Tus-Resumable", Self.version))
        var capabilities = TusCapabilities()
        switch await uploader.send(.bodiless(url: endpoint, method: "OPTIONS", headers: all), logger: logger) {
        case .response(let status, let headers, _, _):
            if (200..<300).contains(status) {
                capabilities = TusCapabilities(headers: headers)
            } else if status >= 500 {
                // A proxy's passing trouble, not the server's answer: do not remember it.
                return .failure(TusDiscoveryFailure(message: "the server answered OPTIONS with \(status)"))
            }
            logger.debug("tus server capabilities", metadata: [
                "status": "\(status)", "extensions": "\(capabilities.extensions.sorted().joined(separator: ","))",
                "max_size": "\(capabilities.maxSize.map(String.init) ?? "-")",
                "checksums": "\(capabilities.checksumAlgorithms.sorted().joined(separator: ","))",
            ])
            if let digest, capabilities.checksumAlgorithm(preferring: digest) != digest {
                let instead = capabilities.checksumAlgorithm(preferring: nil).map { "each piece carries a \($0) checksum instead" }
                    ?? "no piece carries a checksum"
                logger.warning("""
                    the tus server does not offer \(digest) checksums (its checksum extension and Tus-Checksum-Algorithm), \
                    so it does not check the spool's digest: \(instead)
                    """, metadata: ["status": "\(status)"])
            }
            return .success(capabilities)
        case .failed(let failure, _):
            return .failure(TusDiscoveryFailure(message: failure.message, unreachable: failure.isUnreachable))
        case .cancelled:
            return .failure(TusDiscoveryFailure(message: "cancelled"))
        }
    }

    /// The headers of a tus request to `url` (the endpoint's when not given).
    func protocolHeaders(_ transfer: TusTransfer, url: String? = nil) -> [(name: String, value: String)] {
        transfer.headers(for: url ?? transfer.endpoint) + [("Tus-Resumable", Self.version)]
    }

    /// `filename ZmlsZS50eHQ=,filetype dGV4dC9wbGFpbg==`; an empty value is sent as the key alone.
    public static func encodeMetadata(_ pairs: [(key: String, value: String)]) -> String {
        pairs.map { $0.value.isEmpty ? $0.key : "\($0.key) \(Data($0.value.utf8).base64EncodedString())" }.joined(separator: ",")
    }

}

extension TusUploadMachine.Action {
    var isFinish: Bool {
        if case .finish = self { return true }
        return false
    }
}

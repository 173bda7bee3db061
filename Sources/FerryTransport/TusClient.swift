import Crypto
import FerrySystem
import Foundation
import Logging
import NIOPosix
import Synchronization

#if canImport(Glibc)
import Glibc
#endif

/// What a tus server said it supports (`OPTIONS`, tus 1.0 §5.2).
public struct TusCapabilities: Sendable, Equatable {
    /// `Tus-Extension`, lowercased: `creation`, `creation-with-upload`, `checksum`, `termination`, `expiration`, …
    public var extensions: Set<String>
    /// `Tus-Max-Size`, when the server states one.
    public var maxSize: Int64?
    /// `Tus-Checksum-Algorithm`, lowercased.
    public var checksumAlgorithms: Set<String>

    public init(extensions: Set<String> = ["creation"], maxSize: Int64? = nil, checksumAlgorithms: Set<String> = []) {
        self.extensions = extensions
        self.maxSize = maxSize
        self.checksumAlgorithms = checksumAlgorithms
    }

    /// Whether `PATCH` requests carry `Upload-Checksum: sha1 …`.
    public var usesSHA1Checksums: Bool { extensions.contains("checksum") && checksumAlgorithms.contains("sha1") }
}

/// Where a tus upload stands: the server-side upload's URL, the offset the server confirmed, and
/// when the server will forget it.
public struct TusUploadState: Sendable, Equatable {
    public var url: String
    public var offset: Int64
    public var expires: Date?

    public init(url: String, offset: Int64, expires: Date?) {
        self.url = url
        self.offset = offset
        self.expires = expires
    }
}

/// One file to deliver with tus: where to create the upload, the file, and what is known already.
public struct TusTransfer: Sendable {
    /// The creation endpoint (`POST` target).
    public var endpoint: String
    /// Configured headers (values may be secrets).
    public var headers: [(name: String, value: String)]
    /// `Upload-Metadata` pairs, `filename` and `filetype` first (values are base64-encoded on the
    /// wire); asked for only when an upload is created.
    public var metadata: @Sendable () async throws -> [(key: String, value: String)]
    /// A path that opens the file (ferryd passes `/proc/self/fd/N` of the descriptor it opened
    /// safely); every open is checked against ``source``.
    public var path: String
    /// The version of the file being sent: a change aborts the transfer.
    public var source: FileStatus
    /// The most sent in one request; `nil`: the whole remainder.
    public var chunkSize: Int64?
    /// The upload from an earlier attempt, if any.
    public var state: TusUploadState?
    /// Sent as `Idempotency-Key` on the creation request.
    public var idempotencyKey: String

    public init(
        endpoint: String, headers: [(name: String, value: String)],
        metadata: @escaping @Sendable () async throws -> [(key: String, value: String)], path: String,
        source: FileStatus, chunkSize: Int64?, state: TusUploadState?, idempotencyKey: String
    ) {
        self.endpoint = endpoint
        self.headers = headers
        self.metadata = metadata
        self.path = path
        self.source = source
        self.chunkSize = chunkSize
        self.state = state
        self.idempotencyKey = idempotencyKey
    }

    public var length: Int64 { source.size }
}

/// How a tus transfer ended.
public enum TusOutcome: Sendable {
    /// The server holds every byte (`Upload-Offset` equals the length). `status` is the last answer's.
    case completed(status: Int, headers: [(name: String, value: String)], bytesSent: Int64)
    /// The server refused a step with this answer: judge it like any other response (`during` says
    /// which step, for messages).
    case response(status: Int, headers: [(name: String, value: String)], body: [UInt8], bytesSent: Int64, during: String)
    /// No usable answer: a connection failure, a timeout, or a protocol error worth retrying.
    case failed(TransportFailure, bytesSent: Int64)
    /// The file cannot be sent this way at all (larger than the server accepts).
    case rejected(String, bytesSent: Int64)
    /// Cancelled (shutdown, hold, cancel).
    case cancelled(bytesSent: Int64)
}

/// A tus 1.0 client (tus.io/protocols/resumable-upload): core protocol plus the creation,
/// creation-with-upload, checksum (sha1), expiration and termination extensions, on an ``Uploader``'s
/// connection pool.
///
/// A transfer creates the upload (or asks an existing one for its offset with `HEAD`), then sends the
/// rest with `PATCH`. Every change of upload URL or confirmed offset is handed to `record` — which
/// must make it durable — before the next request, so a crash or a cut connection resumes from the
/// bytes the server confirmed, not from zero.
public final class TusClient: Sendable {
    public static let version = "1.0.0"
    /// With creation-with-upload, the creation request carries at most this much of the file: its
    /// answer brings the upload's URL, and until then a cut connection loses what was sent.
    public static let creationBodyLimit: Int64 = 4 << 20

    let uploader: Uploader
    private let discovered = Mutex<[String: (Task<Result<TusCapabilities, TransportFailure>, Never>, ContinuousClock.Instant)]>([:])

    public init(uploader: Uploader) { self.uploader = uploader }

    /// Sends what the server does not have yet. `record` is called with every new upload state
    /// (`nil`: the old upload is gone); if it throws, the transfer stops and the error is rethrown.
    /// `progress` gets the file position reached (confirmed offset plus bytes in flight).
    public func send(
        _ transfer: TusTransfer, logger: Logger,
        record: @escaping @Sendable (TusUploadState?) async throws -> Void,
        progress: @escaping @Sendable (Int64) -> Void
    ) async throws -> TusOutcome {
        var sent: Int64 = 0
        var state = transfer.state
        // Every byte confirmed already (a crash came between the last answer and the done record):
        // nothing to ask, whatever the server has done with the upload since.
        if let state, state.offset >= transfer.length {
            return .completed(status: 204, headers: [], bytesSent: 0)
        }
        let capabilities: TusCapabilities
        switch await discover(transfer.endpoint, headers: transfer.headers, logger: logger) {
        case .success(let found): capabilities = found
        case .failure(let failure):
            return Task.isCancelled ? .cancelled(bytesSent: 0) : .failed(failure, bytesSent: 0)
        }
        if let max = capabilities.maxSize, transfer.length > max {
            return .rejected("the file (\(transfer.length) bytes) is larger than the server accepts (Tus-Max-Size \(max))", bytesSent: 0)
        }
        if let expires = state?.expires, expires <= Date() {
            logger.info("the server's upload has expired; starting a new one")
            state = nil
        }
        // Whether `state.offset` came from the server during this transfer (else ask with HEAD).
        var current = false
        var creations = 0, checksumFailures = 0, idleAnswers = 0
        // The offset a PATCH answered 409 at: if HEAD then reports the same offset, the server is
        // busy with the upload (an earlier request still holds it), not at another offset.
        var conflictAt: Int64?

        while true {
            if Task.isCancelled { return .cancelled(bytesSent: sent) }
            guard let upload = state else {
                // Create the upload. The old one, if any, stays on record until a new one exists.
                creations += 1
                if creations > 3 {
                    return .failed(TransportFailure(kind: .other, message: "the server kept losing the upload right after creating it"), bytesSent: sent)
                }
                var withBody: Int64 = 0
                if capabilities.extensions.contains("creation-with-upload") {
                    // The chosen request size when there is one (some servers require it), else at
                    // most 4 MiB: a cut before the answer loses what was sent without a URL.
                    withBody = min(transfer.length, transfer.chunkSize ?? Self.creationBodyLimit)
                }
                let metadata: [(key: String, value: String)]
                do {
                    metadata = try await transfer.metadata()
                } catch {
                    return Task.isCancelled ? .cancelled(bytesSent: sent)
                        : .failed(TransportFailure(kind: .io, message: "cannot read the file for its metadata: \(error)"), bytesSent: sent)
                }
                var headers = protocolHeaders(transfer)
                headers.append(("Upload-Length", String(transfer.length)))
                headers.append(("Upload-Metadata", Self.encodeMetadata(metadata)))
                let request: UploadRequest
                if withBody > 0 {
                    if capabilities.usesSHA1Checksums {
                        switch await checksum(transfer, 0..<withBody) {
                        case .success(let digest): headers.append(("Upload-Checksum", "sha1 " + digest))
                        case .failure(let failure): return .failed(failure, bytesSent: sent)
                        }
                    }
                    request = UploadRequest(
                        url: transfer.endpoint, method: "POST", headers: headers, bodyPath: transfer.path, bodyOffset: 0,
                        contentLength: withBody, contentType: "application/offset+octet-stream",
                        idempotencyKey: creations == 1 && transfer.state == nil ? transfer.idempotencyKey : nil,
                        expectedSource: transfer.source)
                } else {
                    request = UploadRequest(
                        url: transfer.endpoint, method: "POST", headers: headers, bodyPath: nil, contentLength: 0,
                        contentType: nil, idempotencyKey: creations == 1 && transfer.state == nil ? transfer.idempotencyKey : nil)
                }
                switch await uploader.send(request, logger: logger, progress: progress) {
                case .response(let status, let headers, let body, let bytes):
                    sent += bytes
                    guard (200..<300).contains(status) else {
                        return .response(status: status, headers: headers, body: body, bytesSent: sent, during: "creating the upload")
                    }
                    guard let location = Self.header("Location", in: headers),
                          let url = Self.resolve(location, against: transfer.endpoint) else {
                        return .failed(TransportFailure(kind: .other, message: "the server created the upload but sent no usable Location (\(status))"), bytesSent: sent)
                    }
                    if transfer.endpoint.lowercased().hasPrefix("https:"), url.lowercased().hasPrefix("http:") {
                        return .rejected("""
                            the server created the upload at an http:// URL although the endpoint is https:// (a tus \
                            server behind a TLS proxy that does not know it: tusd needs -behind-proxy and the proxy \
                            X-Forwarded-Proto); Ferry does not send the file unencrypted
                            """, bytesSent: sent)
                    }
                    let confirmed = Self.header("Upload-Offset", in: headers).flatMap { Int64($0) }
                    state = TusUploadState(url: url, offset: min(confirmed ?? 0, transfer.length), expires: Self.expiry(headers))
                    current = confirmed != nil || withBody == 0
                    try await record(state)
                    logger.debug("tus upload created", metadata: ["offset": "\(confirmed ?? 0)"])
                case .failed(let failure, let bytes):
                    return .failed(failure, bytesSent: sent + bytes)
                case .cancelled(let bytes):
                    return .cancelled(bytesSent: sent + bytes)
                }
                continue
            }

            if !current {
                // Ask the server how much it has.
                var headers = protocolHeaders(transfer)
                headers.append(("Cache-Control", "no-store"))
                switch await uploader.send(.bodiless(url: upload.url, method: "HEAD", headers: headers), logger: logger) {
                case .response(let status, let headers, let body, _):
                    if [403, 404, 410].contains(status) {
                        logger.notice("the server no longer has the upload; starting a new one", metadata: ["status": "\(status)"])
                        state = nil
                        continue
                    }
                    guard (200..<300).contains(status) else {
                        return .response(status: status, headers: headers, body: body, bytesSent: sent, during: "asking for the upload's offset")
                    }
                    guard let offset = Self.header("Upload-Offset", in: headers).flatMap({ Int64($0) }), offset >= 0 else {
                        return .failed(TransportFailure(kind: .other, message: "the server's answer to HEAD had no Upload-Offset"), bytesSent: sent)
                    }
                    let length = Self.header("Upload-Length", in: headers).flatMap { Int64($0) }
                    if offset > transfer.length || (length != nil && length != transfer.length) {
                        logger.warning("the server's upload does not match the file; starting a new one",
                                       metadata: ["offset": "\(offset)", "length": "\(length.map(String.init) ?? "-")"])
                        await terminate(upload.url, headers: transfer.headers, logger: logger)
                        state = nil
                        continue
                    }
                    if let at = conflictAt, offset == at {
                        return .failed(TransportFailure(kind: .other, message: """
                            the server reports the upload busy (409 at the offset it confirms): an earlier request \
                            may still hold it
                            """), bytesSent: sent)
                    }
                    conflictAt = nil
                    let updated = TusUploadState(url: upload.url, offset: offset, expires: Self.expiry(headers) ?? upload.expires)
                    if updated != upload { try await record(updated) }
                    state = updated
                    current = true
                    progress(offset)
                    logger.debug("tus upload resumed", metadata: ["offset": "\(offset)"])
                case .failed(let failure, _):
                    return .failed(failure, bytesSent: sent)
                case .cancelled:
                    return .cancelled(bytesSent: sent)
                }
                continue
            }

            if upload.offset >= transfer.length {
                return .completed(status: 204, headers: [], bytesSent: sent)
            }

            // Send the next piece.
            let remaining = transfer.length - upload.offset
            let length = min(remaining, transfer.chunkSize ?? remaining)
            var headers = protocolHeaders(transfer)
            headers.append(("Upload-Offset", String(upload.offset)))
            if capabilities.usesSHA1Checksums {
                switch await checksum(transfer, upload.offset..<(upload.offset + length)) {
                case .success(let digest): headers.append(("Upload-Checksum", "sha1 " + digest))
                case .failure(let failure): return .failed(failure, bytesSent: sent)
                }
            }
            let request = UploadRequest(
                url: upload.url, method: "PATCH", headers: headers, bodyPath: transfer.path, bodyOffset: upload.offset,
                contentLength: length, contentType: "application/offset+octet-stream", idempotencyKey: nil,
                expectedSource: transfer.source)
            let base = upload.offset
            switch await uploader.send(request, logger: logger, progress: { progress(base + $0) }) {
            case .response(let status, let headers, let body, let bytes):
                sent += bytes
                switch status {
                case 200..<300:
                    let offset = Self.header("Upload-Offset", in: headers).flatMap { Int64($0) }
                    guard let offset, offset > base, offset <= base + length else {
                        // No offset, or one that did not move: ask rather than assume, a few times.
                        idleAnswers += 1
                        if idleAnswers > 2 {
                            return .failed(TransportFailure(kind: .other, message: """
                                the server answered \(status) to PATCH without taking the bytes (Upload-Offset \
                                \(offset.map(String.init) ?? "missing"), expected more than \(base))
                                """), bytesSent: sent)
                        }
                        current = false
                        continue
                    }
                    idleAnswers = 0
                    checksumFailures = 0
                    let updated = TusUploadState(url: upload.url, offset: offset, expires: Self.expiry(headers) ?? upload.expires)
                    try await record(updated)
                    state = updated
                    if offset >= transfer.length {
                        return .completed(status: status, headers: headers, bytesSent: sent)
                    }
                case 409:
                    // Our offset is not the server's, or the server is busy with the upload: ask.
                    conflictAt = base
                    current = false
                case 423:
                    return .response(status: status, headers: headers, body: body, bytesSent: sent, during: "sending (the upload is locked)")
                case 460:
                    checksumFailures += 1
                    logger.warning("the server found a checksum mismatch (460); sending the piece again")
                    if checksumFailures > 2 {
                        return .failed(TransportFailure(kind: .other, message: "the server reported a checksum mismatch (460) three times in a row"), bytesSent: sent)
                    }
                    current = false
                case 404, 410:
                    logger.notice("the server no longer has the upload; starting a new one", metadata: ["status": "\(status)"])
                    state = nil
                default:
                    return .response(status: status, headers: headers, body: body, bytesSent: sent, during: "sending")
                }
            case .failed(let failure, let bytes):
                return .failed(failure, bytesSent: sent + bytes)
            case .cancelled(let bytes):
                return .cancelled(bytesSent: sent + bytes)
            }
        }
    }

    /// The base64 SHA-1 of a range of the file, computed off the concurrency pool.
    private func checksum(_ transfer: TusTransfer, _ range: Range<Int64>) async -> Result<String, TransportFailure> {
        do {
            return .success(try await NIOThreadPool.singleton.runIfActive {
                try Self.sha1(transfer.path, source: transfer.source, range: range)
            })
        } catch {
            return .failure(TransportFailure(kind: error is SourceChanged ? .sourceChanged : .io, message: "cannot read the file for its checksum: \(error)"))
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
    func discover(_ endpoint: String, headers: [(name: String, value: String)], logger: Logger) async -> Result<TusCapabilities, TransportFailure> {
        let now = ContinuousClock.now
        let task = discovered.withLock { known -> Task<Result<TusCapabilities, TransportFailure>, Never> in
            if let (task, at) = known[endpoint], now - at < .seconds(600) { return task }
            let task = Task { await self.askCapabilities(endpoint, headers: headers, logger: logger) }
            known[endpoint] = (task, now)
            return task
        }
        let result = await withTaskCancellationHandler { await task.value } onCancel: { task.cancel() }
        if case .failure = result {
            // Not remembered: the next upload asks again.
            discovered.withLock { known in
                if let (current, _) = known[endpoint], current == task { known[endpoint] = nil }
            }
        }
        return result
    }

    private func askCapabilities(_ endpoint: String, headers: [(name: String, value: String)], logger: Logger) async -> Result<TusCapabilities, TransportFailure> {
        var all = headers
        all.append(("Tus-Resumable", Self.version))
        var capabilities = TusCapabilities()
        switch await uploader.send(.bodiless(url: endpoint, method: "OPTIONS", headers: all), logger: logger) {
        case .response(let status, let headers, _, _):
            if (200..<300).contains(status) {
                capabilities = Self.capabilities(from: headers)
            } else if status >= 500 {
                // A proxy's passing trouble, not the server's answer: do not remember it.
                return .failure(TransportFailure(kind: .other, message: "the server answered OPTIONS with \(status)"))
            }
            logger.debug("tus server capabilities", metadata: [
                "status": "\(status)", "extensions": "\(capabilities.extensions.sorted().joined(separator: ","))",
                "max_size": "\(capabilities.maxSize.map(String.init) ?? "-")",
                "checksums": "\(capabilities.checksumAlgorithms.sorted().joined(separator: ","))",
            ])
            return .success(capabilities)
        case .failed(let failure, _):
            return .failure(failure)
        case .cancelled:
            return .failure(TransportFailure(kind: .other, message: "cancelled"))
        }
    }

    func protocolHeaders(_ transfer: TusTransfer) -> [(name: String, value: String)] {
        transfer.headers + [("Tus-Resumable", Self.version)]
    }

    // MARK: Wire formats

    static func capabilities(from headers: [(name: String, value: String)]) -> TusCapabilities {
        func list(_ name: String) -> Set<String> {
            Set((header(name, in: headers) ?? "").split(separator: ",").map { $0.trimmingCharacters(in: .whitespaces).lowercased() }.filter { !$0.isEmpty })
        }
        let extensions = list("Tus-Extension")
        return TusCapabilities(
            extensions: extensions.isEmpty ? ["creation"] : extensions,
            maxSize: header("Tus-Max-Size", in: headers).flatMap { Int64($0.trimmingCharacters(in: .whitespaces)) },
            checksumAlgorithms: list("Tus-Checksum-Algorithm"))
    }

    /// `filename ZmlsZS50eHQ=,filetype dGV4dC9wbGFpbg==`; an empty value is sent as the key alone.
    public static func encodeMetadata(_ pairs: [(key: String, value: String)]) -> String {
        pairs.map { $0.value.isEmpty ? $0.key : "\($0.key) \(Data($0.value.utf8).base64EncodedString())" }.joined(separator: ",")
    }

    /// Whether `key` may be an `Upload-Metadata` key: ASCII, no spaces or commas, not empty.
    public static func isValidMetadataKey(_ key: String) -> Bool {
        !key.isEmpty && key.unicodeScalars.allSatisfy { $0.isASCII && $0.value > 0x20 && $0.value < 0x7F && $0 != "," }
    }

    static func header(_ name: String, in headers: [(name: String, value: String)]) -> String? {
        headers.first { $0.name.caseInsensitiveCompare(name) == .orderedSame }?.value.trimmingCharacters(in: .whitespaces)
    }

    static func expiry(_ headers: [(name: String, value: String)]) -> Date? {
        header("Upload-Expires", in: headers).flatMap(RetryRules.parseHTTPDate)
    }

    /// `Location` made absolute against the endpoint (it may be relative, RFC 9110 §10.2.2).
    static func resolve(_ location: String, against endpoint: String) -> String? {
        guard let base = URL(string: endpoint), let url = URL(string: location, relativeTo: base)?.absoluteURL,
              let scheme = url.scheme?.lowercased(), scheme == "http" || scheme == "https" else { return nil }
        return url.absoluteString
    }

    /// The base64 SHA-1 of `range` of the file, which must still be `source`.
    static func sha1(_ path: String, source: FileStatus, range: Range<Int64>) throws -> String {
        let descriptor = open(path, O_RDONLY | O_CLOEXEC)
        guard descriptor >= 0 else { throw SystemError.current("open", path) }
        defer { close(descriptor) }
        var st = stat()
        guard fstat(descriptor, &st) == 0 else { throw SystemError.current("stat", path) }
        guard FileStatus(st).isSameVersion(as: source) else { throw SourceChanged() }
        var hasher = Insecure.SHA1()
        var buffer = [UInt8](repeating: 0, count: 1 << 20)
        var offset = range.lowerBound
        while offset < range.upperBound {
            let want = Int(min(Int64(buffer.count), range.upperBound - offset))
            let count = buffer.withUnsafeMutableBytes { pread(descriptor, $0.baseAddress, want, off_t(offset)) }
            if count < 0 {
                if errno == EINTR { continue }
                throw SystemError.current("read", path)
            }
            if count == 0 { throw SourceChanged() }
            buffer.withUnsafeBytes { hasher.update(bufferPointer: UnsafeRawBufferPointer(rebasing: $0[0..<count])) }
            offset += Int64(count)
        }
        return Data(hasher.finalize()).base64EncodedString()
    }
}

import Crypto
import FerryDelivery
import FerryQueue
import FerryS3
import FerrySystem
import Foundation
import Logging
import NIOPosix

/// An S3 client for one object at a time: PutObject, and multipart uploads (Create, UploadPart,
/// ListParts, Complete, Abort), signed with SigV4 and sent on an ``Uploader``'s connections (part
/// bodies straight from the spool file: `sendfile(2)` over plain HTTP, 64 KiB chunks over TLS).
/// It is the I/O shell around ``S3UploadMachine``: it makes the requests the machine asks for,
/// parses S3's answers for it, and hands every state to record to `record` (which must make it
/// durable) before the next request.
public final class S3Client: Sendable {
    let uploader: Uploader

    public init(uploader: Uploader) { self.uploader = uploader }

    public func send(
        _ transfer: S3Transfer, logger: Logger,
        record: @escaping @Sendable (S3UploadMachine.Record) async throws -> Void,
        progress: @escaping @Sendable (Int64) -> Void
    ) async throws -> S3TransferResult {
        try await withThrowingTaskGroup(of: Void.self) { parts in
            var machine = S3UploadMachine(settings: transfer.settings, known: transfer.known, parts: transfer.knownParts)
            let inFlight = S3PartsInFlight(confirmed: machine.confirmedBytes, report: progress)
            let checksums = PartChecksums<PartChecksum, ChecksumFailure>(confirmed: transfer.knownParts.map(\.number))
            defer { inFlight.finish() }
            var events = inFlight.events.makeAsyncIterator()
            var action = machine.start()
            var bytesSent: Int64 = 0
            var versionID: String?
            while true {
                if Task.isCancelled, !action.isFinish { action = machine.cancel() }
                switch action {
                case .finish(let report):
                    // Parts still in flight are cancelled; what they sent counts.
                    parts.cancelAll()
                    try? await parts.waitForAll()
                    return S3TransferResult(
                        report: report, bytesSent: bytesSent + inFlight.bytesSent, upload: machine.upload, progressed: machine.progressed,
                        etag: machine.objectETag, versionID: versionID)
                case .putObject:
                    let (response, sent, version) = await putObject(transfer, logger: logger, progress: progress)
                    bytesSent += sent
                    versionID = version
                    action = machine.stored(response)
                case .create:
                    action = machine.created(await create(transfer, logger: logger))
                case .abandonUnrecorded:
                    action = machine.abandoned(
                        await abandonUploads(of: transfer.object, signer: transfer.signer, clock: transfer.clock, logger: logger))
                case .listParts(let url, let marker):
                    action = machine.listed(await listParts(transfer, url: url, marker: marker, logger: logger))
                case .uploadPart(let url, let number, let offset, let length):
                    let request = inFlight.start(number)
                    // Over plain HTTP the body goes by sendfile(2), and a count of its bytes is of
                    // bytes the kernel took; over TLS it is of bytes handed to the encryption, and a
                    // part is never reported written whole (the next waits for its answer).
                    let whole = Uploader.sendsFilesFromTheKernel(url) ? length : nil
                    parts.addTask {
                        // The next part's checksum is read while this part is on the wire.
                        async let ahead: Void = self.checksumAhead(transfer, part: number + 1, into: checksums)
                        let (response, sent) = await self.uploadPart(
                            transfer, url: url, number: number, range: offset..<(offset + length), checksums: checksums, logger: logger,
                            progress: { inFlight.progressed(request, count: $0, whole: whole) })
                        inFlight.answered(request, response: response, bytesSent: sent)
                        await ahead
                    }
                    action = machine.partStarted()
                case .awaitPart:
                    switch await events.next() {
                    case .written(let number)?:
                        action = machine.partWritten(number)
                    case .answered(let number, let response)?:
                        action = machine.storedPart(number, response)
                    case nil:
                        action = machine.cancel()
                    }
                case .complete(let url, let parts):
                    let (response, version) = await complete(transfer, url: url, parts: parts, logger: logger)
                    versionID = version
                    action = machine.completed(response)
                case .headObject:
                    action = machine.headed(await head(transfer, logger: logger))
                case .digest(let offset, let length, let withChecksum):
                    action = machine.digested(await Self.digest(transfer.source, offset..<(offset + length), withChecksum ? transfer.checksum : nil))
                case .record(let change):
                    try await record(change)
                    inFlight.confirmed(machine.confirmedBytes)
                    action = machine.recorded()
                }
                for notice in machine.takeNotices() { Self.log(notice, to: logger) }
            }
        }
    }

    // MARK: Requests

    private func putObject(
        _ transfer: S3Transfer, logger: Logger, progress: @escaping @Sendable (Int64) -> Void
    ) async -> (S3UploadMachine.Response, Int64, String?) {
        var headers: [(name: String, value: String)]
        do {
            headers = try await transfer.objectHeaders()
        } catch {
            return (Task.isCancelled ? .cancelled : .failed("cannot read the file for its metadata: \(error)"), 0, nil)
        }
        let length = transfer.source.status.size
        var payloadHash = SigV4Signer.unsignedPayload
        if length <= UploadRequest.inMemoryLimit {
            // Read once: the checksum is of the bytes sent, and the body goes in one write.
            let small: SmallBody
            switch await Self.smallBody(transfer.source, transfer.checksum) {
            case .success(let body): small = body
            case .failure(let failure): return (failure.response, 0, nil)
            }
            if let algorithm = transfer.checksum, let checksum = small.checksum { headers.append((algorithm.headerName, checksum)) }
            headers.append(("Content-Type", transfer.contentType))
            let result = await send(
                transfer, method: "PUT", url: transfer.object.url, headers: headers, payloadHash: small.sha256Hex ?? payloadHash,
                bytes: small.bytes, logger: logger, progress: progress)
            let version = result.headers.flatMap { HTTPHeaders.value("x-amz-version-id", in: $0) }
            return (Self.stored(result, checksum: transfer.checksum), result.bytesSent, version)
        }
        if let algorithm = transfer.checksum {
            switch await checksum(transfer.source, 0..<length, algorithm) {
            case .success(let value):
                headers.append((algorithm.headerName, value.checksum))
                if let sha256 = value.sha256Hex { payloadHash = sha256 }
            case .failure(let failure): return (failure.response, 0, nil)
            }
        }
        headers.append(("Content-Type", transfer.contentType))
        let result = await send(
            transfer, method: "PUT", url: transfer.object.url, headers: headers, payloadHash: payloadHash,
            body: (0..<length), logger: logger, progress: progress)
        let version = result.headers.flatMap { HTTPHeaders.value("x-amz-version-id", in: $0) }
        return (Self.stored(result, checksum: transfer.checksum), result.bytesSent, version)
    }

    private func create(_ transfer: S3Transfer, logger: Logger) async -> S3UploadMachine.Response {
        var headers: [(name: String, value: String)]
        do {
            headers = try await transfer.objectHeaders()
        } catch {
            return Task.isCancelled ? .cancelled : .failed("cannot read the file for its metadata: \(error)")
        }
        if let algorithm = transfer.checksum { headers.append(("x-amz-checksum-algorithm", algorithm.algorithmName)) }
        headers.append(("Content-Type", transfer.contentType))
        let result = await send(transfer, method: "POST", url: transfer.object.url(query: "uploads"), headers: headers, logger: logger)
        guard case .answer(let status, _, let body) = result.outcome, (200..<300).contains(status) else { return Self.other(result) }
        guard let document = S3Document(body), document.error == nil, let id = document.uploadID else { return Self.other(result) }
        return .uploadCreated(url: transfer.object.uploadURL(uploadID: id))
    }

    private func listParts(_ transfer: S3Transfer, url: String, marker: Int?, logger: Logger) async -> S3UploadMachine.Response {
        var query = "max-parts=\(S3UploadMachine.listingPageSize)"
        if let marker { query += "&part-number-marker=\(marker)" }
        let result = await send(transfer, method: "GET", url: url + "&" + query, headers: transfer.uploadHeaders, logger: logger)
        guard case .answer(let status, _, let body) = result.outcome, (200..<300).contains(status),
              let document = S3Document(body), document.error == nil,
              let (listed, next) = document.listedParts(checksum: transfer.checksum) else { return Self.other(result) }
        return .partsListed(listed.map { UploadPart(number: $0.number, size: $0.size, etag: $0.etag, checksum: $0.checksum) }, next: next)
    }

    private func uploadPart(
        _ transfer: S3Transfer, url: String, number: Int, range: Range<Int64>, checksums: PartChecksums<PartChecksum, ChecksumFailure>, logger: Logger,
        progress: @escaping @Sendable (Int64) -> Void
    ) async -> (S3UploadMachine.Response, Int64) {
        var headers = transfer.uploadHeaders
        var payloadHash = SigV4Signer.unsignedPayload
        var sent: String?
        if let algorithm = transfer.checksum {
            switch await checksums.checksum(ofPart: number, compute: { await checksum(transfer.source, range, algorithm) }) {
            case .success(let value):
                headers.append((algorithm.headerName, value.checksum))
                sent = value.checksum
                if let sha256 = value.sha256Hex { payloadHash = sha256 }
            case .failure(let failure): return (failure.response, 0)
            }
        }
        let result = await send(
            transfer, method: "PUT", url: url + "&partNumber=\(number)", headers: headers, payloadHash: payloadHash, body: range,
            logger: logger, progress: progress)
        var response = Self.stored(result, checksum: transfer.checksum)
        if case .stored(let etag, nil) = response, let sent {
            // Most servers do not echo the checksum they verified: it is the one sent with the part.
            response = .stored(etag: etag, checksum: sent)
        }
        return (response, result.bytesSent)
    }

    /// Computes part `number`'s checksum ahead (if there is such a part and a checksum to send).
    private func checksumAhead(_ transfer: S3Transfer, part number: Int, into checksums: PartChecksums<PartChecksum, ChecksumFailure>) async {
        guard let algorithm = transfer.checksum, number <= transfer.settings.partCount else { return }
        let range = transfer.settings.range(ofPart: number)
        await checksums.computeAhead(ofPart: number) { await checksum(transfer.source, range, algorithm) }
    }

    private func complete(_ transfer: S3Transfer, url: String, parts: [UploadPart], logger: Logger) async -> (S3UploadMachine.Response, String?) {
        let body = S3Document.completion(parts.map { ($0.number, $0.etag, $0.checksum) }, checksum: transfer.checksum)
        let result = await send(
            transfer, method: "POST", url: url, headers: [("Content-Type", "application/xml")] + transfer.uploadHeaders, bytes: body,
            answerMayTrickle: true, logger: logger)
        let version = result.headers.flatMap { HTTPHeaders.value("x-amz-version-id", in: $0) }
        guard case .answer(let status, _, let answer) = result.outcome, (200..<300).contains(status),
              let document = S3Document(answer), document.error == nil,
              let object = document.completedObject(checksum: transfer.checksum) else { return (Self.other(result), version) }
        return (.object(etag: object.etag, checksum: object.checksum), version)
    }

    private func head(_ transfer: S3Transfer, logger: Logger) async -> S3UploadMachine.Response {
        let result = await send(transfer, method: "HEAD", url: transfer.object.url, headers: transfer.uploadHeaders, logger: logger)
        switch result.outcome {
        case .answer(let status, let headers, _) where (200..<300).contains(status):
            // An object of another length is not ours, whatever its ETag: no read-back for it.
            if let length = HTTPHeaders.value("Content-Length", in: headers).flatMap(Int64.init), length != transfer.settings.length {
                return .object(etag: nil, checksum: nil)
            }
            return .object(etag: HTTPHeaders.value("ETag", in: headers), checksum: nil)
        case .answer(404, _, _):
            return .noObject
        default:
            return Self.other(result)
        }
    }

    // MARK: Sending and reading answers

    /// One request's outcome.
    struct Exchange {
        enum Outcome {
            case answer(status: Int, headers: [(name: String, value: String)], body: [UInt8])
            case failed(String)
            /// No connection could be made.
            case unreachable(String)
            case sourceChanged
            case cancelled
        }
        var outcome: Outcome
        var bytesSent: Int64

        var headers: [(name: String, value: String)]? {
            if case .answer(_, let headers, _) = outcome { return headers }
            return nil
        }
    }

    /// Signs and sends a request; the body is a range of the source file, or small bytes in memory
    /// (an XML document, a small file) whose `Content-Type` is among `headers`.
    private func send(
        _ transfer: S3Transfer, method: String, url: String, headers: [(name: String, value: String)],
        payloadHash: String? = nil, body: Range<Int64>? = nil, bytes: [UInt8]? = nil, answerMayTrickle: Bool = false, logger: Logger,
        progress: @escaping @Sendable (Int64) -> Void = { _ in }
    ) async -> Exchange {
        let hash = payloadHash ?? bytes.map { SHA256.hash(data: $0).hex } ?? SigV4Signer.emptyPayloadHash
        guard let signed = transfer.signer.signedHeaders(method: method, url: url, headers: headers, payloadHash: hash, at: transfer.clock()) else {
            return Exchange(outcome: .failed("not an S3 URL"), bytesSent: 0)
        }
        var request: UploadRequest
        if let body {
            let contentType = HTTPHeaders.value("Content-Type", in: signed)
            request = UploadRequest(
                url: url, method: method, headers: signed.filter { $0.name.lowercased() != "content-type" }, bodyPath: transfer.source.procPath,
                bodyOffset: body.lowerBound, contentLength: Int64(body.count), contentType: contentType ?? "application/octet-stream",
                idempotencyKey: nil, expectedSource: transfer.source.status)
        } else if let bytes {
            request = UploadRequest(url: url, method: method, headers: signed, body: bytes)
        } else {
            request = .bodiless(url: url, method: method, headers: signed)
        }
        request.answerMayTrickle = answerMayTrickle
        switch await uploader.send(request, logger: logger, progress: progress) {
        case .response(let status, let headers, let body, let sent):
            return Exchange(outcome: .answer(status: status, headers: headers, body: body), bytesSent: sent)
        case .failed(let failure, let sent) where failure.kind == .sourceChanged:
            return Exchange(outcome: .sourceChanged, bytesSent: sent)
        case .failed(let failure, let sent):
            return Exchange(outcome: failure.isUnreachable ? .unreachable(failure.message) : .failed(failure.message), bytesSent: sent)
        case .cancelled(let sent):
            return Exchange(outcome: .cancelled, bytesSent: sent)
        }
    }

    /// PutObject's or UploadPart's answer: the ETag (and the checksum the server verified).
    static func stored(_ exchange: Exchange, checksum: S3ChecksumAlgorithm?) -> S3UploadMachine.Response {
        guard case .answer(let status, let headers, let body) = exchange.outcome, (200..<300).contains(status),
              S3Document(body)?.error == nil, let etag = HTTPHeaders.value("ETag", in: headers) else { return other(exchange) }
        return .stored(etag: etag, checksum: checksum.flatMap { HTTPHeaders.value($0.headerName, in: headers) })
    }

    /// Any other answer: an error (with S3's code, also inside a 2xx), or no answer.
    static func other(_ exchange: Exchange) -> S3UploadMachine.Response {
        switch exchange.outcome {
        case .answer(let status, let headers, let body):
            let error = S3Document(body)?.error
            return .error(S3ErrorAnswer(
                status: status, code: error?.code ?? (status == 404 && body.isEmpty ? "NotFound" : nil), message: error?.message,
                body: body, contentType: HTTPHeaders.value("Content-Type", in: headers), retryAfter: HTTPHeaders.value("Retry-After", in: headers)))
        case .failed(let message): return .failed(message)
        case .unreachable(let message): return .unreachable(message)
        case .sourceChanged: return .sourceChanged
        case .cancelled: return .cancelled
        }
    }

    /// The log line for a notice of the machine.
    public static func log(_ notice: S3UploadMachine.Notice, to logger: Logger) {
        switch notice {
        case .created: logger.debug("multipart upload created")
        case .resumed(let confirmed, let total):
            logger.info("resuming the multipart upload", metadata: ["parts_recorded": "\(confirmed)", "parts_total": "\(total)"])
        case .lost: logger.notice("the server no longer has the multipart upload; starting a new one")
        case .partRejected(let number, let code):
            logger.warning("the server refused a part's checksum; sending it again", metadata: ["part": "\(number)", "code": "\(code)"])
        case .completedEarlier: logger.info("the object was completed by an earlier request whose answer was lost")
        case .objectUnreadable:
            logger.notice("the server no longer has the multipart upload and refused HEAD on the object (403: the key may not read it); storing the object again")
        case .readingBack(let part?):
            logger.info("reading a part back to compare with the one the server holds", metadata: ["part": "\(part)"])
        case .readingBack(nil):
            logger.info("reading the file back to compare with the object the server holds")
        case .partsRecognised(let count):
            logger.info("the server holds parts whose answers were lost; they are not sent again", metadata: ["parts": "\(count)"])
        case .checksumMismatch(let expected, let got):
            logger.error("the object's checksum does not match its parts'", metadata: ["expected": "\(expected)", "got": "\(got)"])
        case .abandoned(let count):
            logger.notice("aborted the multipart upload a crash left before its creation was recorded", metadata: ["uploads": "\(count)"])
        case .notAbandoned(let code):
            let advice = code == "SignatureDoesNotMatch"
                ? "the server refused the listing's signature (some servers mis-read a key with / in a query)"
                : "allow s3:ListBucketMultipartUploads"
            logger.warning("""
                could not list the multipart uploads to abort one a crash may have left; it stays until a lifecycle rule \
                removes it (\(advice))
                """, metadata: ["code": "\(code)"])
        case .partsNotListed(let code):
            logger.notice("""
                the server refused to list the upload's parts; the recorded parts are kept and any part whose answer \
                was lost is sent again (allow s3:ListMultipartUploadParts to resume without that)
                """, metadata: ["code": "\(code)"])
        }
    }
}

extension S3UploadMachine.Action {
    var isFinish: Bool {
        if case .finish = self { return true }
        return false
    }
}

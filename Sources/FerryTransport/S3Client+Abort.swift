import FerrySystem
import FerryDelivery
import FerryS3
import Foundation
import Logging

/// Ending multipart uploads: AbortMultipartUpload (cancelled, given up, superseded), and finding
/// the uploads a crash left unrecorded: CreateMultipartUpload was answered, and ferryd died before
/// the `UploadId` was durable. Only the creation marker recorded before the request says one may
/// exist; ListMultipartUploads of the key finds it, and each is aborted.
extension S3Client {
    /// Times an abort is tried when the server fails (a 5xx) or does not answer.
    static let abortTries = 3

    /// Aborts a multipart upload (best-effort): the server drops its parts, so none are billed. A
    /// 5xx or no answer is tried again (``abortTries`` in all, 0.25 s and 0.5 s apart: a part whose
    /// request was just cut may still be in the server's hands). Returns how it went:
    /// ``S3UploadMachine/Response/uploadsAbandoned(_:)`` (1) when the server dropped it or had no
    /// such upload, else its error, failure or cancellation.
    @discardableResult
    public func abort(uploadURL: String, signer: SigV4Signer, clock: @Sendable () -> Date, logger: Logger) async -> S3UploadMachine.Response {
        guard signer.signedHeaders(method: "DELETE", url: uploadURL, headers: [], payloadHash: SigV4Signer.emptyPayloadHash, at: clock()) != nil
        else { return .failed("not an S3 URL") }  // not worth a second try
        var outcome = S3UploadMachine.Response.failed("not tried")
        for attempt in 1...Self.abortTries {
            if attempt > 1 {
                do { try await EventLoopSleep.sleep(for: .milliseconds(125 << (attempt - 1))) } catch { return .cancelled }
            }
            outcome = await abortOnce(uploadURL: uploadURL, signer: signer, clock: clock, logger: logger, last: attempt == Self.abortTries)
            switch outcome {
            case .failed: continue
            case .error(let error) where error.status >= 500: continue
            default: return outcome
            }
        }
        return outcome
    }

    private func abortOnce(
        uploadURL: String, signer: SigV4Signer, clock: @Sendable () -> Date, logger: Logger, last: Bool
    ) async -> S3UploadMachine.Response {
        guard let headers = signer.signedHeaders(
            method: "DELETE", url: uploadURL, headers: [], payloadHash: SigV4Signer.emptyPayloadHash, at: clock()) else { return .failed("not an S3 URL") }
        switch await uploader.send(.bodiless(url: uploadURL, method: "DELETE", headers: headers), logger: logger) {
        case .response(let status, _, _, _) where (200..<300).contains(status) || status == 404:
            logger.info("the multipart upload was aborted; the server dropped its parts", metadata: ["status": "\(status)"])
            return .uploadsAbandoned(1)
        case .response(let status, let responseHeaders, let body, let sent) where status >= 500 && !last:
            logger.info("the server failed to abort the multipart upload; trying again", metadata: ["status": "\(status)"])
            return Self.other(Exchange(outcome: .answer(status: status, headers: responseHeaders, body: body), bytesSent: sent))
        case .failed(let failure, _) where !last:
            logger.info("could not abort the multipart upload; trying again", metadata: ["error": "\(failure)"])
            return .failed(failure.message)
        case .response(let status, let responseHeaders, let body, let sent):
            let code = S3Document(body)?.error?.code ?? "-"
            logger.warning("the server did not abort the multipart upload; its parts may remain until a lifecycle rule removes them",
                           metadata: ["status": "\(status)", "code": "\(code)"])
            return Self.other(Exchange(outcome: .answer(status: status, headers: responseHeaders, body: body), bytesSent: sent))
        case .failed(let failure, _):
            logger.warning("could not abort the multipart upload; its parts may remain until a lifecycle rule removes them",
                           metadata: ["error": "\(failure)"])
            return .failed(failure.message)
        case .cancelled:
            return .cancelled
        }
    }

    /// ListMultipartUploads page size: 20 uploads fit the 64 KiB of an answer that is kept (AWS
    /// gives an upload about 600 bytes besides its key, and a key may have 1,024), and the exact
    /// key, the prefix, sorts first (a crash leaves at most one upload of the key per attempt).
    static let uploadsPerPage = 20

    /// Lists the uploads of `object`'s key and aborts each. `.uploadsAbandoned(count)` when every
    /// one was aborted; else the first S3 error (the key may not be allowed to list or abort
    /// uploads), failure or cancellation, as the machine takes them.
    public func abandonUploads(of object: S3ObjectAddress, signer: SigV4Signer, clock: @Sendable () -> Date, logger: Logger) async
        -> S3UploadMachine.Response
    {
        guard let listing = object.uploadsListingURL, let key = object.key,
              case let url = listing + "&max-uploads=\(Self.uploadsPerPage)",
              let headers = signer.signedHeaders(method: "GET", url: url, headers: [], payloadHash: SigV4Signer.emptyPayloadHash, at: clock())
        else { return .failed("not an S3 URL") }
        switch await uploader.send(.bodiless(url: url, method: "GET", headers: headers), logger: logger) {
        case .response(let status, let responseHeaders, let body, let sent):
            let exchange = Exchange(outcome: .answer(status: status, headers: responseHeaders, body: body), bytesSent: sent)
            guard (200..<300).contains(status), let document = S3Document(body), document.error == nil,
                  let ids = document.listedUploads(ofKey: key) else { return Self.other(exchange) }
            for id in ids {
                if Task.isCancelled { return .cancelled }
                let aborted = await abort(uploadURL: object.uploadURL(uploadID: id), signer: signer, clock: clock, logger: logger)
                guard case .uploadsAbandoned = aborted else { return aborted }
            }
            return .uploadsAbandoned(ids.count)
        case .failed(let failure, _):
            return .failed(failure.message)
        case .cancelled:
            return .cancelled
        }
    }
}

import FerryDelivery
import FerryS3
import Foundation
import Logging

/// Finding the multipart uploads a crash left unrecorded: CreateMultipartUpload was answered, and
/// ferryd died before the `UploadId` was durable. Only the creation marker recorded before the
/// request says one may exist; ListMultipartUploads of the key finds it, and each is aborted.
extension S3Client {
    /// ListMultipartUploads page size: 100 uploads fit the 64 KiB of an answer that is kept (the
    /// exact key, the prefix, sorts first).
    static let uploadsPerPage = 100

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

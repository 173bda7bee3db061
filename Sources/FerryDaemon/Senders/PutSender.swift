import FerryConfig
import FerryDelivery
import FerryMultipart
import FerryQueue
import FerrySystem
import FerryTransport
import Logging

/// `protocol = "put"`: the file's own bytes are the whole body (`PUT` by default, or `POST`), with
/// `Content-Type` by extension; the URL may name the file (`{filename}`, `{relative_path}`, …,
/// percent-encoded). No copy is made: the transport reads the descriptor ferryd opened through
/// `/proc/self/fd/N`, checking at each open that it is still the queued version.
struct PutSender: Sender {
    let configuration: SpoolConfiguration
    let endpoint: Endpoint
    let uploader: Uploader

    func send(_ job: Job, from source: SourceFile, tracker: UploadTracker, logger: Logger) async throws -> SendResult {
        let request = UploadRequest(
            url: endpoint.url(for: job, template: configuration.url), method: configuration.method, headers: endpoint.headers, bodyPath: source.procPath,
            contentLength: source.status.size,
            contentType: configuration.fileContentType ?? MediaType.forFilename(job.baseName),
            idempotencyKey: job.id.rawValue, expectedSource: source.status)
        tracker.sending(total: source.status.size)
        return SendResult(await uploader.send(request, logger: logger, progress: { tracker.sent($0) }), source: source,
                          bodyLength: source.status.size)
    }
}

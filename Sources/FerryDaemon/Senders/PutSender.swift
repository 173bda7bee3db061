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
    let io: BlockingIO

    func send(_ job: Job, from source: SourceFile, tracker: UploadTracker, logger: Logger) async throws -> SendResult {
        var headers = endpoint.headers
        var digests: SentDigests?
        if let algorithm = configuration.digest {
            // One read of the file before it is sent: the digest goes in the request's header.
            do {
                digests = try await io.run { flag in try DigestReader.file(source, algorithm: algorithm, isCancelled: { flag.isCancelled }) }
            } catch {
                return SendResult(report: Self.report(for: error, source: source), requested: false)
            }
            headers += digests!.headers
        }
        let request = UploadRequest(
            url: endpoint.url(for: job, template: configuration.url), method: configuration.method, headers: headers, bodyPath: source.procPath,
            contentLength: source.status.size,
            contentType: configuration.fileContentType ?? MediaType.forFilename(job.baseName),
            idempotencyKey: job.id.rawValue, expectedSource: source.status)
        tracker.sending(total: source.status.size)
        var result = SendResult(await uploader.send(request, logger: logger, progress: { tracker.sent($0) }), source: source,
                                bodyLength: source.status.size)
        result.digests = digests
        return result
    }

    /// What a failed digest read says about the attempt.
    static func report(for error: any Error, source: SourceFile) -> AttemptReport {
        switch error as? SourceReadError {
        case .changed?: .sourceChanged(source.currentVersion)
        case .io(let failure)?: .localFailure("cannot read the file for its digest: \(failure)")
        case .cancelled?, nil: .stopped
        }
    }
}

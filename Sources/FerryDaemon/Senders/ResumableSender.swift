import Crypto
import FerryConfig
import FerryDelivery
import FerryMultipart
import FerryQueue
import FerrySystem
import FerryTransport
import Foundation
import Logging

/// `protocol = "resumable"`: the IETF draft "Resumable Uploads for HTTP". The upload's URL, the offset
/// the server confirmed and its expiry are the job's resumable state (`ResumableUpload`, stored in
/// the job's row), each change committed before the next request, so a cut connection or a restart
/// resumes from the server's offset. The protocol itself is ``ResumableUploadMachine`` (the
/// decisions) and ``ResumableClient`` (its I/O); this sender ties them to a job. The body is read from
/// the spool file itself, as with `put`, and the URL may name the file.
struct ResumableSender: Sender {
    let configuration: SpoolConfiguration
    let endpoint: Endpoint
    let client: ResumableClient
    let store: JobStore

    var interop: ResumableInteropVersion { configuration.resumableInterop ?? .latest }

    func send(_ job: Job, from source: SourceFile, tracker: UploadTracker, logger: Logger) async throws -> SendResult {
        let url = endpoint.url(for: job, template: configuration.url)
        let key = endpointKey(url)
        let known = job.upload.flatMap { $0.endpointKey == key ? $0 : nil }
        var transfer = ResumableTransfer(
            endpoint: url, method: configuration.method, endpointKey: key, headers: endpoint.headers, trustedOrigins: endpoint.trustedOrigins,
            contentType: configuration.fileContentType ?? MediaType.forFilename(job.baseName), source: source,
            chunkSize: configuration.chunkSize, interop: interop, known: known, idempotencyKey: job.id.rawValue)
        // After a failed attempt (a creation's answer may have been lost with the whole file it
        // carried), a server that offers resumption gets the upload's URL before any byte.
        if job.attempts > 0 { transfer.wholeBodyLimit = 0 }
        transfer.filename = job.baseName
        tracker.sending(total: job.identity.size, confirmed: known?.offset)
        let result = try await client.send(transfer, logger: logger, record: tracker.recordingUploads(in: store), progress: { tracker.sent($0) })
        return SendResult(result, source: source)
    }

    func endUpload(of job: Job, logger: Logger) async {
        guard let upload = job.upload, upload.endpointKey == endpointKey(endpoint.url(for: job, template: configuration.url)) else { return }
        await client.terminate(upload.url, headers: endpoint.headers(for: upload.url) + [("Upload-Draft-Interop-Version", interop.headerValue)], logger: logger)
    }


    /// Names the endpoint and draft version an upload was created with: a digest, as the URL may hold
    /// a secret. After either changes, an upload is not continued.
    func endpointKey(_ url: String) -> String {
        String(SHA256.hash(data: Data((interop.headerValue + " " + url).utf8)).hex.prefix(16))
    }
}

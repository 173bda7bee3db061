import Crypto
import FerryConfig
import FerryDelivery
import FerryMultipart
import FerryQueue
import FerrySystem
import FerryTransport
import Foundation
import Logging

/// `protocol = "tus"`: tus 1.0 resumable uploads. The upload's URL, the offset the server confirmed
/// and its expiry are the job's resumable state (`ResumableUpload`, stored in the job's row), each
/// change committed before the next request, so a cut connection or a restart resumes from the
/// server's offset. The protocol itself is ``TusUploadMachine`` (the decisions) and ``TusClient``
/// (its I/O); this sender ties them to a job.
struct TusSender: Sender {
    let configuration: SpoolConfiguration
    let endpoint: Endpoint
    let client: TusClient
    let store: JobStore
    let io: BlockingIO

    /// Names the endpoint an upload was created at: a digest, as the endpoint may hold a secret.
    /// After the spool's URL changes, an upload is not continued.
    var endpointKey: String { SHA256.hash(data: Data(endpoint.url.utf8)).prefix(8).map { $0 < 16 ? "0" + String($0, radix: 16) : String($0, radix: 16) }.joined() }

    func send(_ job: Job, from source: SourceFile, tracker: UploadTracker, logger: Logger) async throws -> SendResult {
        let key = endpointKey
        let known = job.upload.flatMap { $0.endpointKey == key ? $0 : nil }
        var transfer = TusTransfer(
            endpoint: endpoint.url, endpointKey: key, headers: endpoint.headers, trustedOrigins: endpoint.trustedOrigins, metadata: metadata(for: job, source: source),
            source: source, chunkSize: configuration.chunkSize, known: known, idempotencyKey: job.id.rawValue)
        transfer.preferredChecksum = configuration.digest.map { $0 == .sha256 ? "sha256" : "sha512" }
        // After a failed attempt (a creation's answer may have been lost with what it carried), a
        // new upload's URL comes before any byte.
        transfer.uploadsDuringCreation = job.attempts == 0
        tracker.sending(total: job.identity.size, confirmed: known?.offset)
        let result = try await client.send(transfer, logger: logger, record: tracker.recordingUploads(in: store), progress: { tracker.sent($0) })
        return SendResult(result, source: source)
    }

    func endUpload(of job: Job, logger: Logger) async {
        guard let upload = job.upload, upload.offset < job.identity.size else { return }
        await client.terminate(upload.url, headers: endpoint.headers(for: upload.url), logger: logger)
    }

    /// `filename` and `filetype`, then the configured fields with their placeholders filled in;
    /// asked for only when an upload is created. A `{sha256}` is computed off the concurrency pool.
    private func metadata(for job: Job, source: SourceFile) -> @Sendable () async throws -> [(key: String, value: String)] {
        let contentType = configuration.fileContentType ?? MediaType.forFilename(job.baseName)
        let fields = configuration.fields
        return { [io] in
            var pairs: [(key: String, value: String)] = [("filename", job.baseName), ("filetype", contentType)]
            guard !fields.isEmpty else { return pairs }
            let digest = Placeholders.needsDigest(fields.map(\.value))
                ? try await io.run { flag in try source.digest(SHA256.self, isCancelled: { flag.isCancelled }).hex } : ""
            let placeholders = Placeholders(
                job: job, size: source.status.size, modificationTime: source.status.modificationTime, sha256: digest)
            for field in fields { pairs.append((field.name, placeholders.render(field.value, for: .text))) }
            return pairs
        }
    }
}

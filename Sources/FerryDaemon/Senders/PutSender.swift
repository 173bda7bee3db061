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
        let url = endpoint.url(for: job, template: configuration.url)
        let request = UploadRequest(
            url: url, method: configuration.method, headers: headers, bodyPath: source.procPath,
            contentLength: source.status.size,
            contentType: configuration.fileContentType ?? MediaType.forFilename(job.baseName),
            idempotencyKey: job.id.rawValue, expectedSource: source.status)
        tracker.sending(total: source.status.size)
        var answer = await uploader.send(request, logger: logger, progress: { tracker.sent($0) })
        var sentBefore: Int64 = 0
        // A file in a subdirectory, to a WebDAV server without that collection: make it, and put again.
        var mkcolStopped = false
        if configuration.method == "PUT", case .response(let status, _, _, let sent) = answer, status == 409 || status == 404 {
            let collections = WebDAVCollections.parents(of: url, relativePath: job.relativePath)
            if let stopped = await makeCollections(collections, logger: logger) {
                if Self.decidesInstead(stopped, retryable: configuration.retry.retryStatuses) {
                    // The server is busy or down (Nextcloud's maintenance 503), or the link failed:
                    // that decides, not the 409, which would fail the file for good.
                    answer = stopped
                    sentBefore = sent
                    mkcolStopped = true
                }
            } else if !collections.isEmpty {
                tracker.sending(total: source.status.size)
                answer = await uploader.send(request, logger: logger, progress: { tracker.sent($0) })
                sentBefore = sent
            }
        }
        var result = SendResult(answer, source: source, bodyLength: source.status.size)
        result.bytesSent += sentBefore
        if mkcolStopped { result.answeredEarly = false }
        result.digests = digests
        return result
    }

    /// Whether the answer that stopped MKCOL, rather than the PUT's 409 or 404, decides the job:
    /// a status the spool retries, no answer, or a cancel.
    static func decidesInstead(_ stopped: UploadResult, retryable: Set<Int>) -> Bool {
        switch stopped {
        case .response(let status, _, _, _): retryable.contains(status)
        case .failed, .cancelled: true
        }
    }

    /// MKCOL of each collection, from the top: `nil` when all of them exist now, else the answer
    /// that stopped it. Nothing is made for a file at the spool's top, nor where the URL does not
    /// end with the file's relative path (`collections` empty).
    private func makeCollections(_ collections: [String], logger: Logger) async -> UploadResult? {
        guard !collections.isEmpty else { return nil }
        for (depth, collection) in collections.enumerated() {
            let answer = await uploader.send(.bodiless(url: collection, method: "MKCOL", headers: endpoint.headers), logger: logger)
            let said: String
            switch answer {
            case .response(let status, _, _, _) where WebDAVCollections.exists(afterMKCOL: status): continue
            case .response(let status, _, _, _): said = "\(status)"
            case .failed(let failure, _): said = failure.message
            case .cancelled: return answer
            }
            // The folder's depth, not its URL: a URL may hold a secret.
            logger.warning("the server has no folder for the file, and MKCOL could not make one", metadata: [
                "folder_depth": "\(depth + 1)", "answer": "\(said)",
            ])
            return answer
        }
        logger.info("made the file's folders on the server (MKCOL)", metadata: ["folders": "\(collections.count)"])
        return nil
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

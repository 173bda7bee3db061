import FerryDelivery
import FerryQueue
import FerryTransport
import FerrySystem
import Foundation
import Logging

/// Sends one job's file by one protocol (multipart, put, tus): the only part of the daemon that
/// knows the protocol. It reports facts (``SendResult``); ``AttemptDecider`` decides what they mean.
///
/// To add a protocol: write a sender, give its spool options a reader in FerryConfig, and name it in
/// ``SpoolRuntime/makeSender(_:uploader:parts:)``, the one place a protocol is chosen.
protocol Sender: Sendable {
    /// Sends `source` (opened without following symlinks and checked to be the job's version; the
    /// caller closes it). Throws only when the queue cannot record resumable state.
    func send(_ job: Job, from source: SourceFile, tracker: UploadTracker, logger: Logger) async throws -> SendResult

    /// Sends a bundle: all its files in one request (multipart only; the configuration refuses
    /// `bundles = true` for the others).
    func send(_ job: Job, bundle: BundleSource, tracker: UploadTracker, logger: Logger) async throws -> SendResult

    /// Asks the server to forget the job's unfinished upload, if the protocol keeps one (best-effort).
    func endUpload(of job: Job, logger: Logger) async

    /// Files up to this size are read whole in the same blocking call that opens them
    /// (``SourceFile/prefetched``), for a sender that sends them from memory; 0: never.
    var prefetchLimit: Int64 { get }
}

extension Sender {
    func endUpload(of job: Job, logger: Logger) async {}
    func send(_ job: Job, bundle: BundleSource, tracker: UploadTracker, logger: Logger) async throws -> SendResult {
        SendResult(report: .refused("this spool's protocol sends one file per request, not a bundle"), requested: false)
    }
    var prefetchLimit: Int64 { 0 }
}

/// What a sender reports about one attempt.
struct SendResult: Sendable {
    var report: AttemptReport
    /// Request body bytes handed to connections.
    var bytesSent: Int64 = 0
    /// Whether a request was made or tried.
    var requested = true
    /// Whether a resumable upload's confirmed offset moved forward.
    var progressed = false
    /// Whether the server answered before the whole body was handed over.
    var answeredEarly = false
    /// The resumable upload as it stands at the end, recorded with the attempt when
    /// ``recordsUpload`` (a protocol that keeps one; `nil` then forgets an earlier one).
    var upload: ResumableUpload?
    var recordsUpload = false
    /// The RFC 9530 digests sent with the request (the spool's `digest`), checked against the answer's.
    var digests: SentDigests?
}

/// A sender's view of one job's entry in ``ActiveJobs``: where it reports progress.
struct UploadTracker: Sendable {
    let activity: ActiveJobs
    let job: Job

    /// The request is about to be sent; `confirmed`: where a resumed upload's server copy ends.
    func sending(total: Int64, confirmed: Int64? = nil) { activity.sending(job, total: total, confirmed: confirmed) }

    /// `sent` bytes of the file in all have been handed to the connection.
    func sent(_ sent: Int64) { activity.progressed(job, sent: sent) }

    /// The server confirmed `offset` bytes.
    func confirmed(_ offset: Int64) { activity.confirmed(job, offset) }

    /// Makes each new state of a resumable upload durable in `store`, then shows its confirmed offset.
    func recordingUploads(in store: JobStore) -> @Sendable (ResumableUpload) async throws -> Void {
        { upload in
            try await store.recordUpload(job, upload, now: Date())
            confirmed(upload.offset)
        }
    }

    /// The server confirmed `confirmed` of the upload's `total` parts (s3).
    func parts(confirmed: Int, total: Int) { activity.parts(job, confirmed: confirmed, total: total) }
}

extension SendResult {
    /// The result of a transfer that keeps a resumable upload (tus, the resumable upload draft).
    init(_ result: ResumableTransferResult, source: SourceFile) {
        var report = result.report
        if case .sourceChanged(nil) = report { report = .sourceChanged(source.currentVersion) }
        self.init(report: report, bytesSent: result.bytesSent, progressed: result.progressed, upload: result.upload, recordsUpload: true)
        answeredEarly = result.answeredEarly
    }

    /// The result of one plain request (multipart, put) whose body was `bodyLength` bytes; `source`:
    /// the file it was made from (none for a bundle's).
    init(_ result: UploadResult, source: SourceFile?, bodyLength: Int64) {
        self.init(result, source: source)
        if case .response(_, _, _, let sent) = result, sent < bodyLength { answeredEarly = true }
    }

    private init(_ result: UploadResult, source: SourceFile?) {
        switch result {
        case .response(let status, let headers, let body, let bytesSent):
            self.init(report: .answered(ObjectStoreAnswer.reading(ServerAnswer(status: status, headers: headers, body: body))), bytesSent: bytesSent)
        case .failed(let failure, let bytesSent) where failure.kind == .sourceChanged:
            self.init(report: .sourceChanged(source?.currentVersion), bytesSent: bytesSent)
        case .failed(let failure, let bytesSent):
            self.init(report: failure.isUnreachable ? .unreachable(failure.message) : .noAnswer(failure.message), bytesSent: bytesSent)
        case .cancelled(let bytesSent):
            self.init(report: .stopped, bytesSent: bytesSent)
        }
    }
}

extension SourceFile {
    /// The file's version now, if it can be examined.
    var currentVersion: FileIdentity? { (try? currentStatus())?.version }
}

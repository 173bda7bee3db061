import FerryConfig
import FerryQueue
import FerrySpool
import FerrySystem
import Foundation
import Logging

#if canImport(Glibc)
import Glibc
#endif

/// Deals with a job's source file once the job is final, and records that it did.
///
/// - `done`: `after_upload` — delete, keep, or move to `sent_directory`.
/// - `failed`: move to `failed_directory` and write `<name>.error.json` beside it.
///
/// Files are deleted or moved only if they are still the version that was uploaded; a file that
/// changed meanwhile is left in place and queued again. Every step is idempotent, so a disposition
/// interrupted by a crash is simply repeated at the next start.
struct Disposer: Sendable {
    let store: JobStore
    /// Where the file work runs: deleting or moving a file blocks for a while (an `unlink` took
    /// 43–60 µs for a file already written back to disk, 6–11 µs for a fresh one, more under
    /// load: `bench/delete_cost.py`), which the Swift concurrency pool's two threads must not
    /// wait out.
    let io: BlockingIO
    let logger: Logger
    /// Called once a disposition is recorded for a spool with hooks or result files: what follows
    /// it (``HookRunner``) may run.
    var disposed: @Sendable () -> Void = {}
    /// The jobs being disposed of (or brought back by `retry`) now, shared by every copy.
    let inProgress = DispositionsInProgress()

    /// What happened to the file.
    struct Result {
        var disposition: Disposition
        /// Where the file went, as raw bytes.
        var finalPath: [UInt8]?
        /// For messages.
        var shownPath: String { finalPath.map(displayName) ?? "" }
    }

    /// Applies and records the disposition of a final job. Returns `nil` if it could not be applied
    /// now (it stays pending and is tried again later). With `deferRecord` (the pipeline's own
    /// disposition), the record is a deferred write: it commits with the queue's next durable write.
    @discardableResult
    func dispose(_ given: Job, spool: SpoolConfiguration, files: SpoolFiles, deferRecord: Bool = false) async -> Result? {
        precondition(given.state.isFinal)
        guard inProgress.begin(given.id) else { return nil }
        defer { inProgress.end(given.id) }
        let job: Job
        if deferRecord {
            job = given
        } else {
            // Not the pipeline's own (whose job is fresh): the record now, not when the job was read.
            // Another disposition may have finished since, or an operator's retry reopened the job.
            guard let sequence = given.sequence, let current = try? await store.job(sequence: sequence),
                  current.state.isFinal, current.disposedAt == nil else { return nil }
            job = current
        }
        var log = logger
        log[metadataKey: "job"] = "\(job.id)"
        log[metadataKey: "spool"] = "\(job.spool)"
        log[metadataKey: "file"] = "\(job.displayPath)"
        let expected = job.identity.status
        let sidecar = job.state == .done
            ? nil : FailureReport(job: job, spool: spool, attempts: (try? await store.attempts(of: job)) ?? []).encoded()
        let result: Result
        let fileLog = log
        do {
            result = try await io.runToCompletion {
                let result: Result
                if let sidecar {
                    let target = SpoolFiles.MoveTarget(directory: spool.failedDirectory, subdirectories: job.subdirectories, sidecar: sidecar)
                    result = Self.result(
                        of: try files.move(job.relativePath, ifSameVersionAs: expected, to: target, token: job.id.rawValue, bundle: job.kind == .bundle),
                        moved: .moved)
                } else {
                    result = try Self.applyAfterUpload(job, spool: spool, files: files, expected: expected, earlierClaims: !deferRecord, log: fileLog)
                }
                // The file's field sidecar goes where the file went (a bundle's is inside it). A file
                // found gone (deleted or moved before a crash, or by someone) takes its sidecar too:
                // left, it would give its fields to the next file of that name.
                if let fields = job.fieldsSidecar, job.kind == .file,
                   [.deleted, .moved, .missing].contains(result.disposition) {
                    if result.disposition == .deleted { FaultPoint.deletedBeforeFieldSidecar.reached() }
                    try files.disposeOfFieldSidecar(
                        of: job.relativePath, expected: fields, movedTo: result.disposition == .missing ? nil : result.finalPath)
                }
                return result
            }
        } catch {
            log.error("cannot dispose of the file; will try again", metadata: ["error": "\(error)"])
            return nil
        }
        do {
            try await store.markDisposed(job, disposition: result.disposition, finalPath: result.finalPath, now: Date(), deferred: deferRecord)
        } catch {
            log.error("cannot record the file's disposition; will try again", metadata: ["error": "\(error)"])
            return nil
        }
        if spool.hooks.onDelivered != nil || spool.hooks.onFailed != nil || spool.resultDirectory != nil { disposed() }
        switch result.disposition {
        case .moved where job.state == .failed:
            log.warning("moved to the failed directory", metadata: ["path": "\(result.shownPath)", "reason": "\(job.lastError ?? "")"])
        case .moved where job.state == .cancelled:
            log.notice("cancelled: moved to the failed directory", metadata: ["path": "\(result.shownPath)"])
        case .moved:
            log.info("moved to the sent directory", metadata: ["path": "\(result.shownPath)"])
        case .left where job.state == .done:
            log.notice("the file changed after it was uploaded; left in place and queued again")
        case .left:
            log.warning("the file was replaced before it could be moved aside; the new one is left in place and queued", metadata: ["reason": "\(job.lastError ?? "")"])
        case .missing where job.state == .failed:
            log.warning("upload failed and the file is no longer in the spool (deleted or renamed away)", metadata: ["reason": "\(job.lastError ?? "")"])
        default:
            break
        }
        return result
    }

    /// `earlierClaims`: the file may have been claimed before (not the pipeline's own first disposition).
    private static func applyAfterUpload(
        _ job: Job, spool: SpoolConfiguration, files: SpoolFiles, expected: FileStatus, earlierClaims: Bool, log: Logger
    ) throws(SystemError) -> Result {
        switch spool.afterUpload {
        case .keep:
            // Claimed by a delete or move that a stop cut, before `after_upload` became `keep`: back under its name.
            if earlierClaims, let kept = try files.releaseClaim(of: job.relativePath, expected: expected, token: job.id.rawValue) {
                log.warning("the delivered file stays under the name its interrupted delete or move gave it", metadata: [
                    "path": "\(displayName(kept))",
                    "reason": "\(job.kind == .bundle ? "a bundle's delete may have emptied it partly" : "its name holds another file now")",
                ])
            }
            // Left in place; a version written meanwhile is queued again.
            if let current = files.currentVersion(of: job.relativePath, bundle: job.kind == .bundle), current != expected.version {
                return Result(disposition: .left)
            }
            return Result(disposition: .kept)
        case .delete:
            return Self.result(
                of: try files.remove(job.relativePath, ifSameVersionAs: expected, token: job.id.rawValue, bundle: job.kind == .bundle),
                moved: .deleted)
        case .move:
            let target = SpoolFiles.MoveTarget(directory: spool.sentDirectory, subdirectories: job.subdirectories)
            return Self.result(
                of: try files.move(job.relativePath, ifSameVersionAs: expected, to: target, token: job.id.rawValue, bundle: job.kind == .bundle),
                moved: .moved)
        }
    }

    private static func result(of outcome: SpoolFiles.Outcome, moved: Disposition) -> Result {
        switch outcome {
        case .done(let finalPath): Result(disposition: moved, finalPath: finalPath)
        case .missing: Result(disposition: .missing)
        case .changed: Result(disposition: .left)
        }
    }
}

extension Job {
    /// The directories between the spool and the file (recursive spools), as raw names.
    var subdirectories: [[UInt8]] {
        relativePath.split(separator: UInt8(ascii: "/")).dropLast().map(Array.init)
    }
}

/// The `<name>.error.json` sidecar written next to a file moved to the failed directory. It holds
/// what a person needs to decide what to do, and never a secret (no header values, no URL query).
struct FailureReport: Encodable {
    struct AttemptEntry: Encodable {
        var number: Int
        var startedAt: String
        var durationMs: Int
        var status: Int?
        var error: String?
        var bytesSent: Int64
        var outcome: String

        enum CodingKeys: String, CodingKey {
            case number, status, error, outcome
            case startedAt = "started_at", durationMs = "duration_ms", bytesSent = "bytes_sent"
        }
    }

    /// The schema's version (fields are only ever added).
    var version = 1
    var job: String
    var spool: String
    var file: String
    var size: Int64
    var url: String
    /// `failed`, or `cancelled` by an operator.
    var outcome: String
    var failedAt: String
    var reason: String
    var status: Int?
    /// The final answer's headers the spool keeps, by lowercase name.
    var headers: [String: String]?
    var responseContentType: String?
    var responseExcerpt: String?
    var responseExcerptEncoding: String?
    /// The last ``attemptsListed`` attempts.
    var attempts: [AttemptEntry]
    /// How many attempts there were, when more than are listed.
    var attemptsTotal: Int?

    /// At most this many attempts are listed (a job retried for weeks at a short `max_delay` has
    /// hundreds of thousands; the sidecar stays small, and the job id in it, which a restart and
    /// `retry` look for, within ``SpoolFiles/sidecarReadLimit``).
    static let attemptsListed = 1000

    enum CodingKeys: String, CodingKey {
        case version, job, spool, file, size, url, outcome, reason, status, headers, attempts
        case attemptsTotal = "attempts_total"
        case failedAt = "failed_at", responseContentType = "response_content_type",
             responseExcerpt = "response_excerpt", responseExcerptEncoding = "response_excerpt_encoding"
    }

    init(job: Job, spool: SpoolConfiguration, attempts: [Attempt]) {
        self.job = job.id.rawValue
        self.spool = job.spool
        file = job.displayPath
        size = job.identity.size
        url = spool.url.redactedURL
        outcome = job.state == .cancelled ? "cancelled" : "failed"
        headers = job.responseHeaders.byName
        failedAt = ISO8601DateFormatter().string(from: job.finishedAt ?? Date())
        reason = job.lastError ?? "unknown"
        status = job.responseStatus
        responseContentType = job.responseContentType
        if let body = job.responseBody {
            if let text = String(validating: body, as: UTF8.self) {
                responseExcerpt = text
            } else {
                responseExcerpt = Data(body).base64EncodedString()
                responseExcerptEncoding = "base64"
            }
        }
        if attempts.count > Self.attemptsListed { attemptsTotal = attempts.count }
        self.attempts = attempts.suffix(Self.attemptsListed).map { attempt in
            AttemptEntry(
                number: attempt.number, startedAt: ResultDocument.timestamp(attempt.startedAt),
                durationMs: Int(attempt.duration * 1000), status: attempt.httpStatus, error: attempt.error,
                bytesSent: attempt.bytesSent, outcome: attempt.outcome.rawValue)
        }
    }

    /// The report as pretty-printed JSON (it contains the job id, which identifies it as this job's).
    func encoded() -> [UInt8] {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.prettyPrinted, .sortedKeys, .withoutEscapingSlashes]
        return [UInt8]((try? encoder.encode(self)) ?? Data("{\"job\":\"\(job)\"}".utf8)) + [0x0A]
    }
}

extension FileIdentity {
    /// A status carrying just this identity, for comparisons.
    var status: FileStatus {
        var st = stat()
        st.st_dev = UInt(device)
        st.st_ino = UInt(inode)
        st.st_size = Int(size)
        st.st_mtim = timespec(tv_sec: Int(modificationTime / 1_000_000_000), tv_nsec: Int(modificationTime % 1_000_000_000))
        st.st_mode = S_IFREG
        return FileStatus(st)
    }
}

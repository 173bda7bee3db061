import FerryControl
import FerryMultipart
import FerryQueue
import FerrySpool
import FerrySystem
import Foundation

#if canImport(Glibc)
import Glibc
#endif

/// `ferryctl retry` of a failed or cancelled job, and the finishing at start-up of a retry that a
/// stop (a crash, kill -9) cut between its two steps.
extension ControlService {
    /// Retries a failed or cancelled job: brings its file back from the failed directory into the
    /// spool under its own name, and queues the same job (same id, so the same `Idempotency-Key`)
    /// with a fresh allowance of attempts and `max_age`.
    func retryFinished(_ job: Job, reason: String) async throws -> JobState {
        guard let spool = runtime.spool(named: job.spool) else {
            throw ControlError(.conflict, "spool \"\(job.spool)\" is no longer configured")
        }
        // Its pipeline may still be moving the file aside after recording the failure.
        guard !activity.contains(job) else {
            throw ControlError(.conflict, "job \(job.id) has just ended and ferryd is still finishing it (moving its file aside, ending its upload on the server); try again in a moment")
        }
        // Not while its file is being moved aside (the chores finishing a pending disposition).
        let dispositions = followUps.disposer.inProgress
        guard dispositions.begin(job.id) else {
            throw ControlError(.conflict, "the file of job \(job.id) is being moved right now; try again in a moment")
        }
        defer { dispositions.end(job.id) }
        let reopened: Job
        do {
            reopened = try await store.reopen(job, now: Date())
        } catch JobStore.ReopenError.pathBusy {
            throw ControlError(.conflict, "another job for \(job.displayPath) is active; it carries the file now")
        } catch JobStore.ReopenError.notFailed(let state) {
            throw ControlError(.conflict, "job \(job.id) is \(state.rawValue), not failed")
        }
        FaultPoint.retryReopened.reached()
        return try await completeRetry(reopened, previous: job.state, in: spool, reason: reason)
    }

    /// Finishes the retries a stop cut after their first step (``JobStore/reopen(_:now:)``), which
    /// left each job `held` with its file in the failed directory or already back in the spool:
    /// the operator asked for them, so they are completed, not undone. A job whose spool is gone,
    /// or whose file cannot be brought back, returns to the state it was retried from. Runs at
    /// start-up, before the watchers' first scan.
    func finishInterruptedRetries() async {
        let interrupted: [(job: Job, previous: JobState)]
        do {
            interrupted = try await store.interruptedRetries()
        } catch {
            logger.warning("cannot look for retries a stop interrupted", metadata: ["error": "\(error)"])
            return
        }
        for (job, previous) in interrupted {
            let reason = "a retry interrupted by a stop of ferryd, finished at start-up"
            do {
                guard let spool = runtime.spool(named: job.spool) else {
                    try await store.abandonReopen(job, previous: previous, now: Date())
                    logger.warning("a retry interrupted by a stop is undone: its spool is no longer configured", metadata: [
                        "job": "\(job.id)", "spool": "\(job.spool)", "state": "\(previous.rawValue)",
                    ])
                    continue
                }
                let state = try await completeRetry(job, previous: previous, in: spool, reason: reason)
                logger.notice("a retry interrupted by a stop is finished", metadata: [
                    "job": "\(job.id)", "file": "\(job.displayPath)", "state": "\(state.rawValue)",
                ])
            } catch {
                logger.warning("a retry interrupted by a stop is undone", metadata: [
                    "job": "\(job.id)", "file": "\(job.displayPath)", "state": "\(previous.rawValue)", "error": "\(error)",
                ])
            }
        }
    }

    /// The second step of a retry: `reopened` is `held`; its file comes back into the spool, and
    /// the job is queued again, or, when the file is not the version that failed, the new content
    /// becomes a new job. When the file cannot be brought back, the job returns to `previous`.
    private func completeRetry(_ reopened: Job, previous: JobState, in spool: SpoolRuntime, reason: String) async throws -> JobState {
        let job = reopened
        let identity: FileIdentity
        var foundBack = false
        do {
            switch (reopened.disposition, reopened.finalPath) {
            case (.moved?, let movedPath?):
                (identity, foundBack) = try Self.bringBack(job, from: movedPath, in: spool)
            case (nil, _), (.left?, _):
                // The file never left the spool.
                guard let version = Self.version(of: job, in: spool) else {
                    throw SpoolFiles.ReturnError.missing(spool.configuration.directory + "/" + job.displayPath)
                }
                identity = version
            default:
                throw SpoolFiles.ReturnError.missing(reopened.finalPath.map(displayName) ?? job.displayPath)
            }
        } catch {
            try? await store.abandonReopen(reopened, previous: previous, now: Date())
            throw ControlError(.conflict, "cannot retry job \(job.id): \(error)")
        }
        FaultPoint.retryBroughtBack.reached()
        var failedDirectory = stat()
        let movedWithinDevice = stat(spool.configuration.failedDirectory, &failedDirectory) == 0
            && UInt64(failedDirectory.st_dev) == job.identity.device
        guard Self.isVersionThatFailed(identity, of: job, movedWithinDevice: movedWithinDevice) else {
            // Not the bytes that failed (replaced while aside): new content is a new job, with its own
            // Idempotency-Key, as a changed file in the spool is; the failed job keeps its history.
            try await store.abandonReopen(reopened, previous: previous, now: Date())
            let created = try await store.enqueue(
                [JobStore.DiscoveredFile(
                    spool: job.spool, relativePath: job.relativePath, identity: identity,
                    bundleFiles: job.kind == .bundle ? (try? spool.files.openBundle(job.relativePath))?.listing.bundleFiles ?? [] : nil)],
                now: Date(),
                makeBoundary: { MultipartBoundary.random().value })
            logger.notice("the file brought back is not the version that failed; it is queued as a new job", metadata: [
                "job": "\(job.id)", "new_job": "\(created.first?.id.rawValue ?? "-")", "file": "\(job.displayPath)",
            ])
            return .queued
        }
        if foundBack, let movedPath = job.finalPath {
            // Brought back before a stop cut the retry: its report in the failed directory goes now.
            spool.files.removeFailureReport(of: movedPath, token: job.id.rawValue)
        }
        do {
            return try await store.requeueReopened(reopened, identity: identity, now: Date(), reason: reason).state
        } catch JobStore.ReopenError.notFailed(let state) {
            throw ControlError(.conflict, "job \(job.id) became \(state.rawValue) while it was retried; its file is back in the spool")
        }
    }

    /// Brings `job`'s file back from `movedPath` into the spool, and returns its version there. A
    /// file gone from the failed directory and in the spool was brought back before a stop cut the
    /// retry, or by hand: it is taken as it is (`foundBack`; the caller checks which version it is).
    private static func bringBack(_ job: Job, from movedPath: [UInt8], in spool: SpoolRuntime) throws -> (version: FileIdentity, foundBack: Bool) {
        let result = Result { () throws(SpoolFiles.ReturnError) -> FileStatus in
            try spool.files.bringBack(from: movedPath, to: job.relativePath, token: job.id.rawValue, bundle: job.kind == .bundle)
        }
        switch result {
        case .success(let status):
            return (status.version, false)
        case .failure(let error):
            if case .missing = error, let version = version(of: job, in: spool) { return (version, true) }
            throw error
        }
    }

    /// The version of `job`'s file in the spool, if a file (a directory, for a bundle) is there.
    private static func version(of job: Job, in spool: SpoolRuntime) -> FileIdentity? {
        let bundle = job.kind == .bundle
        guard let status = spool.files.status(job.relativePath), status.kind == (bundle ? .directory : .regular) else { return nil }
        return spool.files.currentVersion(of: job.relativePath, bundle: bundle)
    }

    /// Whether `identity` (the file brought back for a retry) is the version `job` failed with: the
    /// same inode, size and mtime; or, when the failed directory is on another filesystem (the file
    /// was copied there and back), the same size and mtime.
    static func isVersionThatFailed(_ identity: FileIdentity, of job: Job, movedWithinDevice: Bool) -> Bool {
        if identity == job.identity { return true }
        return !movedWithinDevice && identity.size == job.identity.size && identity.modificationTime == job.identity.modificationTime
    }
}

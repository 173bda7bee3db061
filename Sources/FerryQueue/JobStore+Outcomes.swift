import Foundation
import GRDB

/// What an attempt did to its job, and what became of the file.
extension JobStore {
    /// How an attempt changes its job.
    public enum Transition: Sendable, Equatable {
        /// The server accepted the file; the source's disposition is still to be applied, unless
        /// `keepSource`: then the file is kept where it is, recorded as `kept` in the same write (a
        /// 2xx that came before the whole body was sent is not taken as proof of delivery).
        /// `headers`: the answer's headers the spool keeps; `digest`: the RFC 9530 digest Ferry sent
        /// (`sha-256=:…:`), if the spool computes one.
        case succeeded(
            status: Int, body: [UInt8], contentType: String?, headers: [ResponseHeader] = [], digest: String? = nil,
            keepSource: Bool = false)
        /// Retry no earlier than `at`.
        case retry(at: Date, error: String, status: Int?, body: [UInt8]?, contentType: String?, headers: [ResponseHeader] = [])
        /// Give up; the source goes to the failed directory.
        case failed(error: String, status: Int?, body: [UInt8]?, contentType: String?, headers: [ResponseHeader] = [])
        /// The attempt was cut short through no fault of the server (shutdown, source changed);
        /// queue again at `at` without counting it. `localTrouble` (a full disk, a failed read): the
        /// same trouble again for the same attempt stretches its one row instead of adding another.
        case interrupted(at: Date, reason: String, localTrouble: Bool = false)
        /// The job goes back to the queue, due at `at`, without having been sent: it waited for a
        /// slot while its spool was paused, out of its window, or held by its server (which could
        /// not be reached, or asked to wait), or the daemon stopped. No attempt row: nothing was
        /// attempted (a server down for days would otherwise add one for every job claimed ahead,
        /// every wait); the `requeued` event says why.
        case putBack(at: Date, reason: String)
        /// An operator held the job while it was uploading; the attempt does not count.
        case held(reason: String)
        /// An operator cancelled the job while it was uploading; the attempt does not count and the
        /// file's disposition (to the failed directory) is still to be applied.
        case cancelled(reason: String)
    }

    /// Records an attempt and its effect on the job in one durable transaction, and returns the updated job.
    /// `hooks`: what is to run after this outcome (``HookRun``), queued in the same transaction.
    @discardableResult
    public func finish(
        _ job: Job, startedAt: Date, now: Date, bytesSent: Int64, transition: Transition, hooks: [HookRun.Kind] = []
    ) async throws -> Job {
        var job = job
        let sequence = job.sequence!
        var attempt = Attempt(
            jobSequence: sequence, number: job.attempts + 1, startedAt: startedAt,
            duration: max(0, now.timeIntervalSince(startedAt)), httpStatus: nil, error: nil,
            bytesSent: bytesSent, outcome: .success)
        job.updatedAt = now
        let counts = Self.apply(transition, to: &job, attempt: &attempt, now: now)
        if counts { job.attempts += 1 }
        let updated = job
        let record = attempt
        let event: (JobEvent.Kind, String?) = switch transition {
        case .succeeded: (.done, nil)
        case .retry(_, let error, _, _, _, _): (.retry, error)
        case .failed(let error, _, _, _, _): (.failed, error)
        case .interrupted(_, let reason, _), .putBack(_, let reason): (.requeued, reason)
        case .held(let reason): (.held, reason)
        case .cancelled(let reason): (.cancelled, reason)
        }
        let repeatable: Bool = if case .interrupted(_, _, true) = transition { true } else { false }
        // A job put back unsent has nothing to record as an attempt.
        let attempted: Bool = if case .putBack = transition { false } else { true }
        try await write { db in
            if repeatable, try Self.extendRepeatedInterruption(db, like: record, now: now) {
                try updated.updateOutcome(db)
                return
            }
            if attempted { try record.insertRow(db) }
            try updated.updateOutcome(db)
            try JobEvent.record(
                db, updated, kind: event.0, at: now, attempt: attempted ? record.number : nil, status: record.httpStatus, message: event.1)
            try HookRun.schedule(db, jobSequence: sequence, kinds: hooks, now: now)
        }
        return updated
    }

    /// What `transition` does to the job and its attempt row; whether the attempt counts.
    private static func apply(_ transition: Transition, to job: inout Job, attempt: inout Attempt, now: Date) -> Bool {
        let counts: Bool
        switch transition {
        case .succeeded(let status, let body, let contentType, let headers, let digest, let keepSource):
            counts = true
            attempt.httpStatus = status
            job.state = .done
            job.finishedAt = now
            job.nextAttemptAt = nil
            job.keepResponse(status: status, body: body, contentType: contentType, headers: headers)
            job.contentDigest = digest
            job.lastError = nil
            if keepSource {
                job.disposition = .kept
                job.disposedAt = now
            }
        case .retry(let at, let error, let status, let body, let contentType, let headers):
            counts = true
            attempt.outcome = .retry
            attempt.httpStatus = status
            attempt.error = error
            job.state = .retrying
            job.nextAttemptAt = at
            job.lastError = error
            job.keepResponse(status: status, body: body, contentType: contentType, headers: headers)
        case .failed(let error, let status, let body, let contentType, let headers):
            counts = true
            attempt.outcome = .failure
            attempt.httpStatus = status
            attempt.error = error
            job.state = .failed
            job.finishedAt = now
            job.nextAttemptAt = nil
            job.lastError = error
            job.keepResponse(status: status, body: body, contentType: contentType, headers: headers)
        case .interrupted(let at, let reason, _):
            counts = false
            attempt.outcome = .interrupted
            attempt.error = reason
            job.state = .queued
            job.nextAttemptAt = at
        case .putBack(let at, _):
            counts = false
            job.state = .queued
            job.nextAttemptAt = at
        case .held(let reason):
            counts = false
            attempt.outcome = .interrupted
            attempt.error = reason
            job.state = .held
            job.heldAt = now
            job.nextAttemptAt = nil
        case .cancelled(let reason):
            counts = false
            attempt.outcome = .interrupted
            attempt.error = reason
            job.state = .cancelled
            job.finishedAt = now
            job.nextAttemptAt = nil
            job.lastError = reason
        }
        return counts
    }

    /// The same local trouble again (a full disk, retried every 15–30 s): the job's last attempt row, if
    /// it is that very interruption, is stretched to `now` instead of a row (and an event) per try.
    /// Returns whether it was.
    private static func extendRepeatedInterruption(_ db: Database, like record: Attempt, now: Date) throws -> Bool {
        guard let last = try Row.fetchOne(db, sql: """
            SELECT seq, number, outcome, error, started_at FROM attempt WHERE job_seq = ? ORDER BY seq DESC LIMIT 1
            """, arguments: [record.jobSequence]),
            last["number"] as Int == record.number, last["outcome"] as String == Attempt.Outcome.interrupted.rawValue,
            last["error"] as String? == record.error else { return false }
        try db.execute(sql: "UPDATE attempt SET duration = ? WHERE seq = ?",
                       arguments: [max(0, now.timeIntervalSince1970 - (last["started_at"] as Double)), last["seq"] as Int64])
        return true
    }

    /// Fails a job without an attempt (the source vanished or cannot be read, or it aged out while waiting).
    @discardableResult
    public func fail(_ job: Job, now: Date, error: String, hooks: [HookRun.Kind] = []) async throws -> Job {
        var job = job
        job.state = .failed
        job.finishedAt = now
        job.updatedAt = now
        job.nextAttemptAt = nil
        job.lastError = error
        let updated = job
        try await write { db in
            try updated.updateOutcome(db)
            try JobEvent.record(db, updated, kind: .failed, at: now, message: error)
            try HookRun.schedule(db, jobSequence: updated.sequence!, kinds: hooks, now: now)
        }
        return updated
    }

    /// Ends a job whose file changed before it was delivered, and queues the new version as a new
    /// job (due at `notBefore`, to let a writer finish), in one transaction. Returns the new job.
    /// The new job has its own id: the server sees new content under a new `Idempotency-Key`.
    @discardableResult
    public func supersede(
        _ job: Job, by identity: FileIdentity, now: Date, notBefore: Date, boundary: String, bundleFiles: [BundleFile] = []
    ) async throws -> Job {
        var old = job
        old.state = .superseded
        old.finishedAt = now
        old.updatedAt = now
        old.nextAttemptAt = nil
        var successor = Job(
            id: JobID.generate(milliseconds: UInt64(max(0, now.timeIntervalSince1970 * 1000))),
            spool: job.spool, relativePath: job.relativePath, identity: identity, boundary: boundary, now: now)
        successor.nextAttemptAt = notBefore
        successor.kind = job.kind
        // The max_age clock goes on: a file rewritten more often than an upload takes would otherwise
        // never give up ("the file kept changing for max_age"), sending part of it again each time.
        successor.ageBase = job.ageStart
        old.lastError = job.kind == .bundle
            ? "the bundle changed before it was delivered; its new version is job \(successor.id)"
            : "the file changed before it was delivered; its new version is job \(successor.id)"
        let ended = old
        let next = successor
        return try await write { db in
            try ended.update(db)
            try db.execute(
                sql: "UPDATE job SET disposition = ?, disposed_at = ? WHERE seq = ?",
                arguments: [Disposition.left.rawValue, now.timeIntervalSince1970, ended.sequence])
            try JobEvent.record(db, ended, kind: .superseded, at: now, message: ended.lastError)
            var inserted = next
            try inserted.insertRow(db)
            try Self.insertBundleMembers(db, of: inserted, bundleFiles)
            try JobEvent.record(db, inserted, kind: .queued, at: now)
            return inserted
        }
    }

    /// Records the job's resumable upload (tus): its URL, the offset the server confirmed, and when the
    /// server will forget it; `nil` values clear them (the upload is gone, start over). Durable on return.
    public func recordUpload(_ job: Job, _ upload: ResumableUpload?, now: Date) async throws {
        try await write { db in try Self.storeUpload(db, job, upload, now: now) }
    }

    static func storeUpload(_ db: Database, _ job: Job, _ upload: ResumableUpload?, now: Date) throws {
        try db.execute(
            sql: "UPDATE job SET upload_url = ?, upload_offset = ?, upload_expires = ?, upload_endpoint = ?, updated_at = ? WHERE seq = ?",
            arguments: [upload?.url, upload?.offset, upload?.expires?.timeIntervalSince1970, upload?.endpointKey,
                        now.timeIntervalSince1970, job.sequence])
    }

    /// Records that the source file has been dealt with; the first record stands (a disposition
    /// repeated by a chore that read the job before this record was committed changes nothing).
    ///
    /// With `deferred`, the caller does not wait for the commit: the record commits with the next
    /// durable write (the pipeline's next claim or outcome). Lost in a crash, the disposition is
    /// applied again at the next start and finds the file already gone or moved.
    public func markDisposed(_ job: Job, disposition: Disposition, finalPath: [UInt8]?, now: Date, deferred: Bool = false) async throws {
        try await write(deferred ? .deferred : .durable) { db in
            try db.cachedStatement(sql: "UPDATE job SET disposition = ?, disposed_at = ?, final_path = ?, updated_at = ? WHERE seq = ? AND disposed_at IS NULL AND \(JobPredicate.final)")
                .execute(arguments: [disposition.rawValue, now.timeIntervalSince1970, finalPath.map { Data($0) },
                                     now.timeIntervalSince1970, job.sequence])
            guard db.changesCount > 0 else { return }
            try JobEvent.record(db, job, kind: .disposed, at: now, message: disposition.rawValue)
        }
    }
}

extension Job {
    /// Keeps the server's answer (its first 64 KiB) with the job, when there was one.
    mutating func keepResponse(status: Int?, body: [UInt8]?, contentType: String?, headers: [ResponseHeader]) {
        guard let status else { return }
        responseStatus = status
        responseBody = body.map { Array($0.prefix(JobStore.responseExcerptLimit)) }
        responseContentType = contentType
        responseHeaders = headers
    }
}

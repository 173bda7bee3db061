import FerryConfig
import FerryQueue
import Foundation
import NIOHTTP1

/// The one place that decides a job's fate after an attempt: every rule of the README's "What Ferry
/// promises" that ends, retries or requeues a job lives here and nowhere else. Pure: no I/O, no clock
/// (``AttemptInput/now``), randomness only from the generator passed in.
///
///     answered 2xx ─────────────────────────────▶ done, then the disposition
///     answered 408 423 425 429 500 502 503 504 ─┐  (or the spool's [spool.retry] statuses)
///     no answer ────────────────────────────────┼▶ retry after full jitter (never before Retry-After),
///                                               │  or failed when out of max_attempts or max_age
///     answered otherwise, refused ──────────────┴▶ failed, file to failed_directory
///     file changed ─────────────────────────────▶ superseded + a new job (failed once max_age is out)
///     file gone ────────────────────────────────▶ failed, no attempt counted
///     local trouble ────────────────────────────▶ queued again in 15–30 s, not counted, until max_age
///     stopped ──────────────────────────────────▶ held / cancelled / queued (shutdown), not counted
public enum AttemptDecider {
    /// The longest `Retry-After` honoured: a server asking for more is retried after a day (or,
    /// past `max_age`, given up on at once).
    public static let retryAfterLimit = Duration.seconds(86_400)
    /// Local trouble is retried after a random time between half this and this (or `max_delay` if smaller).
    public static let localRetryCeiling = Duration.seconds(30)
    /// Answers whose `Retry-After` is about the server, not the request: the whole spool waits.
    public static let spoolWideStatuses: Set<Int> = [429, 503]
    /// A job whose spool left the configuration waits this long before it is looked at again.
    public static let missingSpoolWait: TimeInterval = 300

    public static func decide<Random: RandomNumberGenerator>(_ input: AttemptInput, random: inout Random) -> AttemptDecision {
        var decision = fate(input, random: &random)
        decision.hooks = afterOutcome(of: decision.record, input)
        return decision
    }

    /// What runs after the recorded outcome, of what the spool has: after a delivery its
    /// `on_delivered` hook and result file; after a failure or a cancel its `on_failed` hook.
    static func afterOutcome(of record: AttemptDecision.Record, _ input: AttemptInput) -> [HookRun.Kind] {
        let kinds: [HookRun.Kind] = switch record {
        case .attempt(.succeeded): [.result, .delivered]
        case .attempt(.failed), .attempt(.cancelled), .failure: [.failed]
        default: []
        }
        return kinds.filter(input.afterOutcome.contains)
    }

    private static func fate<Random: RandomNumberGenerator>(_ input: AttemptInput, random: inout Random) -> AttemptDecision {
        switch input.report {
        case .spoolMissing:
            let reason = "spool \"\(input.job.spool)\" is not in the configuration"
            return AttemptDecision(
                record: .attempt(.interrupted(at: input.now.addingTimeInterval(missingSpoolWait), reason: reason)),
                followUps: [], counted: nil,
                log: LogEntry(.warning, "the job's spool is no longer configured; it waits until the spool returns"))
        case .localFailure(let reason):
            return localFailure(reason, input, random: &random)
        case .sourceGone(let reason):
            return AttemptDecision(
                record: .failure(reason), followUps: [.clearLocalProblem, .dispose, .endServerUpload, .requeueIfLeft], counted: nil,
                log: LogEntry(.warning, "cannot upload the file", ["reason": reason]))
        case .sourceChanged(let identity):
            return changed(to: identity ?? input.job.identity, input)
        case .answered(let answer):
            return answered(answer, input, random: &random)
        case .noAnswer(let message), .unreachable(let message):
            return retryOrGiveUp(input, error: message, answer: nil, notBefore: nil, random: &random)
        case .refused(let reason):
            return giveUp(input, reason: reason, answer: nil)
        case .stopped:
            return stopped(input)
        }
    }

    /// Until when the whole spool waits after `report`: a 429 or 503 whose `Retry-After` (or rate
    /// limit reset) lies ahead, capped at ``retryAfterLimit``; until then no job of the spool
    /// starts, rather than each being sent whole into the same refusal. The pipeline asks this as
    /// soon as the answer is in, before the job's slot goes to the next one.
    public static func spoolWait(after report: AttemptReport, now: Date) -> Date? {
        guard case .answered(let answer) = report, spoolWideStatuses.contains(answer.status),
              let asked = answer.retryAfter.flatMap({ RetryRules.parseRetryAfter($0, now: now) }), asked > .zero else { return nil }
        return now.addingTimeInterval(min(asked, retryAfterLimit).timeInterval)
    }

    /// ``decide(_:random:)`` with the system's random numbers.
    public static func decide(_ input: AttemptInput) -> AttemptDecision {
        var random = SystemRandomNumberGenerator()
        return decide(input, random: &random)
    }

    // MARK: The rules

    private static func answered<Random: RandomNumberGenerator>(
        _ answer: ServerAnswer, _ input: AttemptInput, random: inout Random
    ) -> AttemptDecision {
        let kept = answer.headers(named: input.keptHeaders)
        if answer.isSuccess, let mismatch = input.sentDigests?.mismatch(in: answer.headers, answerBody: answer.body) {
            // The server got other bytes than Ferry sent (a proxy changed them): not a delivery.
            return retryOrGiveUp(input, error: describe(answer) + ", but " + mismatch, answer: answer, notBefore: nil, random: &random)
        }
        switch answer.verdict(now: input.now, retryable: input.policy.retryStatuses) {
        case .success where input.answeredEarly && !input.trustsEarlyAnswers:
            // The server cannot have read the whole file: its 2xx stands (no retry, which could not
            // tell the server more), but the file stays in the spool, recorded as kept.
            return AttemptDecision(
                record: .attempt(.succeeded(
                    status: answer.status, body: answer.body, contentType: answer.contentType, headers: kept,
                    digest: input.sentDigests?.reprDigestField, keepSource: true)),
                followUps: [.clearLocalProblem], counted: input.requested ? .delivered : nil,
                log: LogEntry(.warning, "the server answered 2xx before the whole body was sent; the file is kept (after_upload not applied)", [
                    "status": "\(answer.status)", "sent": "\(input.bytesSent)", "bytes": "\(input.job.identity.size)",
                ]))
        case .success:
            return AttemptDecision(
                record: .attempt(.succeeded(
                    status: answer.status, body: answer.body, contentType: answer.contentType, headers: kept,
                    digest: input.sentDigests?.reprDigestField)),
                followUps: [.clearLocalProblem, .dispose, .requeueIfLeft], counted: input.requested ? .delivered : nil,
                log: LogEntry(.info, "uploaded", [
                    "status": "\(answer.status)", "bytes": "\(input.job.identity.size)", "sent": "\(input.bytesSent)",
                    "duration_ms": milliseconds(from: input.startedAt, to: input.now), "attempt": "\(input.job.attempts + 1)",
                ]))
        case .retry(let notBefore):
            return retryOrGiveUp(
                input, error: describe(answer) + (answer.hint.map { " (\($0))" } ?? ""), answer: answer, notBefore: notBefore, random: &random)
        case .permanent:
            var metadata = ["status": "\(answer.status)"]
            if let during = answer.during { metadata["during"] = during }
            return AttemptDecision(
                record: .attempt(.failed(
                    error: describe(answer) + (answer.hint.map { " (\($0))" } ?? ""), status: answer.status, body: answer.body,
                    contentType: answer.contentType, headers: kept)),
                followUps: [.clearLocalProblem, .dispose, .endServerUpload, .requeueIfLeft], counted: input.requested ? .failed : nil,
                log: LogEntry(.error, "upload rejected; not retrying", metadata))
        }
    }

    /// Schedules the next attempt with full jitter, never before a `Retry-After`; or fails the job
    /// when it is out of attempts or `max_age`, or the server asks to wait past `max_age`.
    private static func retryOrGiveUp<Random: RandomNumberGenerator>(
        _ input: AttemptInput, error: String, answer: ServerAnswer?, notBefore: Duration?, random: inout Random
    ) -> AttemptDecision {
        let policy = input.policy
        // Progress on a resumable upload starts the count again.
        let attemptsBefore = input.progressed ? 0 : input.job.attemptsInRound
        let attemptsMade = attemptsBefore + 1
        let deadline = input.deadline
        if policy.maxAttempts > 0 && attemptsMade >= policy.maxAttempts {
            return giveUp(input, reason: "gave up after \(attemptsMade) attempts: \(error)", answer: answer)
        }
        if input.now >= deadline {
            return giveUp(input, reason: "gave up: not delivered within max_age (\(DurationParser.format(policy.maxAge))): \(error)", answer: answer)
        }
        var delay = Backoff(initialDelay: policy.initialDelay, maxDelay: policy.maxDelay).delay(forRetry: attemptsBefore, using: &random)
        if let notBefore {
            let asked = min(notBefore, retryAfterLimit)
            if input.now.addingTimeInterval(asked.timeInterval) > deadline {
                // The server asks us to wait past the file's max_age: give up now rather than early.
                return giveUp(input, reason: "gave up: the server asked to retry after \(DurationParser.format(asked)), past max_age: \(error)", answer: answer)
            }
            delay = max(delay, asked)
        }
        let next = min(input.now.addingTimeInterval(delay.timeInterval), deadline)
        return AttemptDecision(
            record: .attempt(.retry(
                at: next, error: error, status: answer?.status, body: answer?.body, contentType: answer?.contentType,
                headers: answer?.headers(named: input.keptHeaders) ?? [])),
            resetsRetryCount: input.progressed, followUps: [.clearLocalProblem], counted: input.requested ? .retry : nil,
            log: LogEntry(.warning, "upload attempt failed; will retry", [
                "error": error, "attempt": "\(attemptsMade)", "retry_in_ms": milliseconds(from: input.now, to: next),
            ]))
    }

    /// Fails the job for good and moves its file to the failed directory. The attempt that ended it
    /// is recorded when the attempt reached the server; otherwise the job fails without one.
    private static func giveUp(_ input: AttemptInput, reason: String, answer: ServerAnswer?) -> AttemptDecision {
        let record: AttemptDecision.Record = input.requested
            ? .attempt(.failed(
                error: reason, status: answer?.status, body: answer?.body, contentType: answer?.contentType,
                headers: answer?.headers(named: input.keptHeaders) ?? []))
            : .failure(reason)
        return AttemptDecision(
            record: record, followUps: [.clearLocalProblem, .dispose, .endServerUpload, .requeueIfLeft], counted: input.requested ? .failed : nil,
            log: LogEntry(.error, "giving up on the file", ["reason": reason]))
    }

    /// The file was written again since it was queued: the new content is a new upload, under a new
    /// job and so a new Idempotency-Key, once it has settled; a file that kept changing for
    /// `max_age` fails.
    private static func changed(to identity: FileIdentity, _ input: AttemptInput) -> AttemptDecision {
        if input.now >= input.deadline {
            var unsent = input
            unsent.requested = false
            return giveUp(unsent, reason: "gave up: the file kept changing for max_age (\(DurationParser.format(input.policy.maxAge)))", answer: nil)
        }
        return AttemptDecision(
            record: .supersede(by: identity, notBefore: input.now.addingTimeInterval(input.settle.timeInterval)),
            followUps: [.clearLocalProblem, .endServerUpload], counted: nil,
            log: LogEntry(.info, "the file changed before it was delivered; its new version is a new job"))
    }

    /// A local problem says nothing about the server: it does not use up an attempt. The job is
    /// queued again in 15–30 s (or `max_delay`, if smaller), never past `max_age`, when it fails.
    private static func localFailure<Random: RandomNumberGenerator>(
        _ reason: String, _ input: AttemptInput, random: inout Random
    ) -> AttemptDecision {
        if input.now >= input.deadline {
            var unsent = input
            unsent.requested = false
            return giveUp(unsent, reason: "gave up: not delivered within max_age (\(DurationParser.format(input.policy.maxAge))): \(reason)", answer: nil)
        }
        let ceiling = min(input.policy.maxDelay, localRetryCeiling).timeInterval
        let next = min(input.now.addingTimeInterval(ceiling / 2 * (1 + Backoff.unit(using: &random))), input.deadline)
        return AttemptDecision(
            record: .attempt(.interrupted(at: next, reason: reason, localTrouble: true)),
            followUps: [.reportLocalProblem(reason)], counted: nil,
            log: LogEntry(.warning, "cannot prepare the upload; will try again", [
                "error": reason, "retry_in_ms": milliseconds(from: input.now, to: next),
            ]))
    }

    /// The attempt was cut short: held or cancelled if an operator asked, otherwise (a shutdown)
    /// back in the queue. None of these counts as an attempt.
    private static func stopped(_ input: AttemptInput) -> AttemptDecision {
        let counted: AttemptOutcome? = input.requested ? .interrupted : nil
        switch input.intervention {
        case .requeue(let reason):
            return AttemptDecision(
                record: .attempt(requeued(input, reason: reason)), followUps: [.clearLocalProblem], counted: counted,
                log: input.requested
                    ? LogEntry(.notice, "upload paused; it goes on when its spool may upload again", ["reason": reason])
                    : LogEntry(.debug, "put back in the queue before sending", ["reason": reason]))
        case .hold(let reason):
            return AttemptDecision(
                record: .attempt(.held(reason: reason)), followUps: [.clearLocalProblem], counted: counted,
                log: LogEntry(.notice, "upload stopped: the job is on hold", ["reason": reason]))
        case .cancel(let reason):
            return AttemptDecision(
                record: .attempt(.cancelled(reason: reason)), followUps: [.clearLocalProblem, .dispose, .endServerUpload, .requeueIfLeft], counted: counted,
                log: LogEntry(.notice, "upload stopped: the job is cancelled", ["reason": reason]))
        case nil:
            return AttemptDecision(
                record: .attempt(requeued(input, reason: "interrupted by shutdown")), followUps: [.clearLocalProblem],
                counted: counted,
                log: LogEntry(input.bytesSent > 0 ? .notice : .debug,
                              input.bytesSent > 0 ? "upload interrupted by shutdown; it stays queued" : "stopped before sending; the job stays queued"))
        }
    }

    /// Back in the queue, due now: an interrupted attempt if it reached the transport, else put
    /// back unsent (no attempt row).
    private static func requeued(_ input: AttemptInput, reason: String) -> JobStore.Transition {
        input.requested ? .interrupted(at: input.now, reason: reason) : .putBack(at: input.now, reason: reason)
    }

    // MARK: Words

    /// "server answered 503 Service Unavailable while sending".
    static func describe(_ answer: ServerAnswer) -> String {
        "server answered \(answer.status) \(reasonPhrase(answer.status))" + (answer.during.map { " while \($0)" } ?? "")
    }

    /// The status's reason phrase; for a redirect, why Ferry does not follow it.
    public static func reasonPhrase(_ status: Int) -> String {
        if (300..<400).contains(status) {
            return "(redirect; Ferry does not follow redirects, configure the final URL)"
        }
        let phrase = HTTPResponseStatus(statusCode: status).reasonPhrase
        // Registered since NIO's table was written (RFC 8297, RFC 8470).
        return phrase.isEmpty ? [103: "Early Hints", 425: "Too Early"][status] ?? "" : phrase
    }

    private static func milliseconds(from start: Date, to end: Date) -> String {
        String(Int((end.timeIntervalSince(start) * 1000).rounded()))
    }
}

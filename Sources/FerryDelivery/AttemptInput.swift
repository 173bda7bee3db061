import FerryConfig
import FerryQueue
import Foundation

/// Everything ``AttemptDecider`` needs to decide a job's fate: the job as it was claimed, the spool's
/// rules, what the attempt came to, and the time. No clock is read and no file is looked at.
public struct AttemptInput: Sendable {
    public var job: Job
    /// When to retry and when to give up (the spool's `[retry]`).
    public var policy: RetryPolicy
    /// The spool's `settle`: a changed file's new version is due this long after the change was seen.
    public var settle: Duration
    public var report: AttemptReport
    /// Request body bytes handed to connections during the attempt.
    public var bytesSent: Int64
    /// Whether the attempt reached the transport (made or tried a request): only then is it counted
    /// in the metrics, and only then does a stopped one leave an attempt row (else it is put back).
    public var requested: Bool
    /// Whether a resumable upload's confirmed offset moved forward during the attempt.
    public var progressed: Bool
    /// What an operator asked while the attempt ran.
    public var intervention: Intervention?
    /// The server answered before ferryd had sent the whole body (a count ferryd keeps itself).
    public var answeredEarly = false
    /// The spool's `trust_early_answers`: apply `after_upload` even after such an answer.
    public var trustsEarlyAnswers = false
    public var startedAt: Date
    public var now: Date
    /// The answer headers the spool keeps (lowercased names; `result_headers`).
    public var keptHeaders: [String] = []
    /// What the spool runs after a final outcome: `.delivered`, `.failed` (its hooks), `.result`
    /// (its result file).
    public var afterOutcome: Set<HookRun.Kind> = []
    /// The RFC 9530 digests sent with the attempt's request, if the spool sends them.
    public var sentDigests: SentDigests?

    public init(
        job: Job, policy: RetryPolicy, settle: Duration, report: AttemptReport, bytesSent: Int64 = 0, requested: Bool = false,
        progressed: Bool = false, intervention: Intervention? = nil, answeredEarly: Bool = false, trustsEarlyAnswers: Bool = false,
        startedAt: Date, now: Date
    ) {
        self.answeredEarly = answeredEarly
        self.trustsEarlyAnswers = trustsEarlyAnswers
        self.job = job
        self.policy = policy
        self.settle = settle
        self.report = report
        self.bytesSent = bytesSent
        self.requested = requested
        self.progressed = progressed
        self.intervention = intervention
        self.startedAt = startedAt
        self.now = now
    }

    /// The input for an attempt at a job of `spool`: its rules as in the main initializer, and what it
    /// keeps of answers and runs after outcomes.
    public init(
        job: Job, policy: RetryPolicy, settle: Duration, report: AttemptReport, bytesSent: Int64, requested: Bool,
        progressed: Bool, intervention: Intervention?, answeredEarly: Bool, trustsEarlyAnswers: Bool, startedAt: Date, now: Date,
        spool: SpoolConfiguration?, sentDigests: SentDigests?
    ) {
        self.init(
            job: job, policy: policy, settle: settle, report: report, bytesSent: bytesSent, requested: requested, progressed: progressed,
            intervention: intervention, answeredEarly: answeredEarly, trustsEarlyAnswers: trustsEarlyAnswers, startedAt: startedAt, now: now)
        self.sentDigests = sentDigests
        guard let spool else { return }
        keptHeaders = spool.resultHeaders
        if spool.hooks.onDelivered != nil { afterOutcome.insert(.delivered) }
        if spool.hooks.onFailed != nil { afterOutcome.insert(.failed) }
        if spool.resultDirectory != nil { afterOutcome.insert(.result) }
    }

    /// When the job runs out of `max_age`. A job queued while this machine's clock said a time
    /// before ``earliestPlausibleTime`` (a box without a real-time clock boots at 1970 and collects
    /// files until NTP steps the clock) has no age that can be trusted: its `max_age` counts from
    /// now, rather than failing every such file on its first retryable answer.
    var deadline: Date {
        let start = job.ageStart < Self.earliestPlausibleTime && now >= Self.earliestPlausibleTime ? now : job.ageStart
        return start.addingTimeInterval(policy.maxAge.timeInterval)
    }

    /// No job was queued before this (2026-01-01T00:00:00Z, before this code was written): a time
    /// earlier is a clock that had not been set. The chores restart such jobs' age in the queue
    /// (`JobStore.restartUnknownAges`) within a minute; this covers the jobs in flight meanwhile.
    public static let earliestPlausibleTime = Date(timeIntervalSince1970: 1_767_225_600)
}

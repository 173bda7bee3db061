import FerryConfig
import FerryDelivery
import FerryQueue
import Foundation
import Testing

/// A random source that always gives the same 64 bits: 0 makes every jitter its lowest value,
/// ``highest`` its highest (just under the ceiling).
struct FixedRandom: RandomNumberGenerator {
    static let highest = UInt64.max
    let value: UInt64
    mutating func next() -> UInt64 { value }
}

/// One row of the decision table: a job, what its attempt came to, and the fate expected.
struct DecisionRow: CustomTestStringConvertible, Sendable {
    enum Fate: Sendable {
        case delivered
        /// A retry due within `seconds` of now, with an error starting with `error`.
        case retry(seconds: ClosedRange<Double>, error: String)
        /// Failed, with an attempt on record or without one, with an error containing `error`.
        case failed(attempt: Bool, error: String)
        case superseded(by: FileIdentity, seconds: Double)
        /// Back in the queue, due within `seconds` of now, not counted.
        case interrupted(seconds: ClosedRange<Double>, reason: String)
        /// Back in the queue without having been sent (no attempt row), due within `seconds`.
        case putBack(seconds: ClosedRange<Double>, reason: String)
        case held
        case cancelled
    }

    var name: String
    var report: AttemptReport
    var attempts = 0
    var attemptBase = 0
    /// How old the job is (its `max_age` clock), in seconds.
    var age: Double = 60
    var policy = RetryPolicy(initialDelay: .seconds(1), maxDelay: .seconds(300), maxAttempts: 0, maxAge: .seconds(86_400))
    var requested = true
    var progressed = false
    var intervention: Intervention?
    var answeredEarly = false
    var trustsEarly = false
    var bytesSent: Int64 = 1000
    var random: UInt64 = 0
    var fate: Fate
    var followUps: [AttemptDecision.FollowUp]?
    var counted: AttemptOutcome??
    var resets = false

    var testDescription: String { name }
}

let decisionNow = Date(timeIntervalSince1970: 1_800_000_000)
let queuedIdentity = FileIdentity(device: 1, inode: 2, size: 1000, modificationTime: 3)
let newIdentity = FileIdentity(device: 1, inode: 9, size: 2000, modificationTime: 4)

func answer(_ status: Int, retryAfter: String? = nil, during: String? = nil, hint: String? = nil) -> AttemptReport {
    .answered(ServerAnswer(status: status, body: Array("answer".utf8), contentType: "text/plain", retryAfter: retryAfter, during: during, hint: hint))
}

func httpDate(_ date: Date) -> String {
    let formatter = DateFormatter()
    formatter.locale = Locale(identifier: "en_US_POSIX")
    formatter.timeZone = TimeZone(identifier: "GMT")
    formatter.dateFormat = "EEE, dd MMM yyyy HH:mm:ss 'GMT'"
    return formatter.string(from: date)
}

/// A job that fails for good: its file goes aside and its server-side upload (tus, S3 parts) is ended.
let removes: [AttemptDecision.FollowUp] = [.clearLocalProblem, .dispose, .endServerUpload, .requeueIfLeft]
let fiveAttempts = RetryPolicy(initialDelay: .seconds(1), maxDelay: .seconds(300), maxAttempts: 3, maxAge: .seconds(86_400))

let decisionTable: [DecisionRow] = [
    // Delivered.
    DecisionRow(name: "200 delivers", report: answer(200), fate: .delivered,
                followUps: [.clearLocalProblem, .dispose, .requeueIfLeft], counted: .delivered),
    DecisionRow(name: "201 delivers", report: answer(201), fate: .delivered),
    DecisionRow(name: "299 delivers", report: answer(299), fate: .delivered),
    DecisionRow(name: "2xx after many attempts still delivers", report: answer(204), attempts: 40, age: 86_000, fate: .delivered),
    // Retryable statuses: full jitter from 0.
    DecisionRow(name: "408 retries", report: answer(408), fate: .retry(seconds: 0...0, error: "server answered 408 Request Timeout"),
                followUps: [.clearLocalProblem], counted: .retry),
    DecisionRow(name: "423 retries", report: answer(423), fate: .retry(seconds: 0...0, error: "server answered 423 Locked")),
    DecisionRow(name: "425 retries", report: answer(425), fate: .retry(seconds: 0...0, error: "server answered 425 Too Early")),
    DecisionRow(name: "429 retries", report: answer(429), fate: .retry(seconds: 0...0, error: "server answered 429 Too Many Requests")),
    DecisionRow(name: "500 retries", report: answer(500), fate: .retry(seconds: 0...0, error: "server answered 500 Internal Server Error")),
    DecisionRow(name: "502 retries", report: answer(502), fate: .retry(seconds: 0...0, error: "server answered 502 Bad Gateway")),
    DecisionRow(name: "503 retries", report: answer(503), fate: .retry(seconds: 0...0, error: "server answered 503 Service Unavailable")),
    DecisionRow(name: "504 retries", report: answer(504), fate: .retry(seconds: 0...0, error: "server answered 504 Gateway Timeout")),
    // Permanent statuses.
    DecisionRow(name: "400 fails", report: answer(400), fate: .failed(attempt: true, error: "server answered 400 Bad Request"),
                followUps: removes, counted: .failed),
    DecisionRow(name: "401 fails", report: answer(401), fate: .failed(attempt: true, error: "401 Unauthorized")),
    DecisionRow(name: "403 fails", report: answer(403), fate: .failed(attempt: true, error: "403 Forbidden")),
    DecisionRow(name: "404 fails", report: answer(404), fate: .failed(attempt: true, error: "404 Not Found")),
    DecisionRow(name: "409 fails, naming the step", report: answer(409, during: "creating the upload"),
                fate: .failed(attempt: true, error: "server answered 409 Conflict while creating the upload")),
    DecisionRow(name: "410 fails", report: answer(410), fate: .failed(attempt: true, error: "410 Gone")),
    DecisionRow(name: "413 fails with the sender's hint", report: answer(413, hint: "if a proxy limits request bodies, set chunk_size"),
                fate: .failed(attempt: true, error: "413 Payload Too Large (if a proxy limits request bodies, set chunk_size)")),
    DecisionRow(name: "422 fails", report: answer(422), fate: .failed(attempt: true, error: "422")),
    DecisionRow(name: "501 fails", report: answer(501), fate: .failed(attempt: true, error: "501 Not Implemented")),
    DecisionRow(name: "505 fails", report: answer(505), fate: .failed(attempt: true, error: "505")),
    DecisionRow(name: "301 fails: redirects are not followed", report: answer(301), fate: .failed(attempt: true, error: "Ferry does not follow redirects")),
    DecisionRow(name: "302 fails", report: answer(302), fate: .failed(attempt: true, error: "configure the final URL")),
    DecisionRow(name: "307 fails", report: answer(307), fate: .failed(attempt: true, error: "redirect")),
    DecisionRow(name: "308 fails", report: answer(308), fate: .failed(attempt: true, error: "redirect")),
    // Full jitter: random(0, min(max_delay, initial · 2ⁿ)).
    DecisionRow(name: "jitter ceiling is initial_delay before the first retry", report: answer(503), random: FixedRandom.highest,
                fate: .retry(seconds: 0.99...1, error: "server answered 503")),
    DecisionRow(name: "jitter ceiling doubles: 2⁵ s after 5 attempts", report: answer(503), attempts: 5, random: FixedRandom.highest,
                fate: .retry(seconds: 31.9...32, error: "server answered 503")),
    DecisionRow(name: "jitter ceiling stops at max_delay", report: answer(503), attempts: 30, random: FixedRandom.highest,
                fate: .retry(seconds: 299.9...300, error: "server answered 503")),
    DecisionRow(name: "jitter can be zero", report: answer(503), attempts: 30, random: 0, fate: .retry(seconds: 0...0, error: "server answered 503")),
    // Retry-After.
    DecisionRow(name: "Retry-After seconds is a floor", report: answer(503, retryAfter: "120"), fate: .retry(seconds: 120...120, error: "server answered 503")),
    DecisionRow(name: "Retry-After as an HTTP-date", report: answer(429, retryAfter: httpDate(decisionNow.addingTimeInterval(60))),
                fate: .retry(seconds: 60...60, error: "server answered 429")),
    DecisionRow(name: "Retry-After in the past leaves the jitter", report: answer(503, retryAfter: httpDate(decisionNow.addingTimeInterval(-60))),
                fate: .retry(seconds: 0...0, error: "server answered 503")),
    DecisionRow(name: "an unreadable Retry-After is ignored", report: answer(503, retryAfter: "soon"), fate: .retry(seconds: 0...0, error: "server answered 503")),
    DecisionRow(name: "a longer jitter wins over a short Retry-After", report: answer(503, retryAfter: "2"), attempts: 3, random: FixedRandom.highest,
                fate: .retry(seconds: 7.9...8, error: "server answered 503")),
    DecisionRow(name: "Retry-After is capped at a day", report: answer(503, retryAfter: "200000"),
                policy: RetryPolicy(maxAge: .seconds(5 * 86_400)), fate: .retry(seconds: 86_400...86_400, error: "server answered 503")),
    DecisionRow(name: "Retry-After past max_age ends the job now", report: answer(503, retryAfter: "90000"),
                fate: .failed(attempt: true, error: "gave up: the server asked to retry after 1d, past max_age: server answered 503"),
                followUps: removes, counted: .failed),
    // max_attempts and max_age.
    DecisionRow(name: "the last allowed attempt fails the job", report: answer(503), attempts: 2, policy: fiveAttempts,
                fate: .failed(attempt: true, error: "gave up after 3 attempts: server answered 503")),
    DecisionRow(name: "attempts left: retry", report: answer(503), attempts: 1, policy: fiveAttempts, fate: .retry(seconds: 0...0, error: "server answered 503")),
    DecisionRow(name: "an operator's retry starts the count again", report: answer(503), attempts: 6, attemptBase: 5, policy: fiveAttempts,
                fate: .retry(seconds: 0...0, error: "server answered 503")),
    DecisionRow(name: "progress on a resumable upload resets the count", report: .noAnswer("connection reset"), attempts: 2, policy: fiveAttempts,
                progressed: true, fate: .retry(seconds: 0...0, error: "connection reset"), resets: true),
    DecisionRow(name: "no progress: the count goes on", report: .noAnswer("connection reset"), attempts: 2, policy: fiveAttempts,
                fate: .failed(attempt: true, error: "gave up after 3 attempts: connection reset")),
    DecisionRow(name: "a job queued while the clock said 1970 (before NTP) has its max_age from now, not past it", report: answer(500),
                age: 1_800_000_000 - 1000, fate: .retry(seconds: 0...1, error: "server answered 500")),
    DecisionRow(name: "out of max_age fails", report: answer(500), age: 86_400,
                fate: .failed(attempt: true, error: "gave up: not delivered within max_age (1d): server answered 500")),
    DecisionRow(name: "a retry is never due after max_age", report: answer(500), attempts: 20, age: 86_390, random: FixedRandom.highest,
                fate: .retry(seconds: 10...10, error: "server answered 500")),
    // No answer, refused.
    DecisionRow(name: "no answer retries", report: .noAnswer("connect: Connection refused"), fate: .retry(seconds: 0...0, error: "connect: Connection refused"),
                counted: .retry),
    DecisionRow(name: "an unreachable server retries as no answer", report: .unreachable("cannot connect to h:1: No route to host"),
                attempts: 3, random: FixedRandom.highest, fate: .retry(seconds: 7.9...8, error: "cannot connect to h:1: No route to host"),
                counted: .retry),
    DecisionRow(name: "refused fails at once", report: .refused("the file is larger than the server accepts"),
                fate: .failed(attempt: true, error: "the file is larger than the server accepts"), followUps: removes, counted: .failed),
    // The file.
    DecisionRow(name: "a changed file is superseded after settle", report: .sourceChanged(newIdentity), requested: false,
                fate: .superseded(by: newIdentity, seconds: 2), followUps: [.clearLocalProblem, .endServerUpload], counted: .some(nil)),
    DecisionRow(name: "a file changed under a transfer, version unknown", report: .sourceChanged(nil), fate: .superseded(by: queuedIdentity, seconds: 2),
                counted: .some(nil)),
    DecisionRow(name: "a file that kept changing for max_age fails", report: .sourceChanged(newIdentity), age: 86_400,
                fate: .failed(attempt: false, error: "gave up: the file kept changing for max_age (1d)"), followUps: removes, counted: .some(nil)),
    DecisionRow(name: "a vanished file fails without an attempt", report: .sourceGone("the file disappeared before it was uploaded"), requested: false,
                fate: .failed(attempt: false, error: "the file disappeared"), followUps: removes, counted: .some(nil)),
    // Local trouble: not counted, 15–30 s, until max_age.
    DecisionRow(name: "local trouble waits 15–30 s", report: .localFailure("No space left on device"), requested: false,
                fate: .interrupted(seconds: 15...15, reason: "No space left on device"),
                followUps: [.reportLocalProblem("No space left on device")], counted: .some(nil)),
    DecisionRow(name: "local trouble waits at most 30 s", report: .localFailure("EIO"), requested: false, random: FixedRandom.highest,
                fate: .interrupted(seconds: 29.9...30, reason: "EIO")),
    DecisionRow(name: "local trouble waits at most max_delay", report: .localFailure("EIO"),
                policy: RetryPolicy(initialDelay: .seconds(1), maxDelay: .seconds(10)), requested: false, random: FixedRandom.highest, fate: .interrupted(seconds: 9.9...10, reason: "EIO")),
    DecisionRow(name: "local trouble does not use up attempts", report: .localFailure("EIO"), attempts: 2, policy: fiveAttempts, requested: false,
                fate: .interrupted(seconds: 15...15, reason: "EIO")),
    DecisionRow(name: "local trouble is never due after max_age", report: .localFailure("EIO"), age: 86_395, requested: false, random: FixedRandom.highest,
                fate: .interrupted(seconds: 5...5, reason: "EIO")),
    DecisionRow(name: "local trouble past max_age fails", report: .localFailure("No space left on device"), age: 86_400, requested: false,
                fate: .failed(attempt: false, error: "gave up: not delivered within max_age (1d): No space left on device"),
                followUps: removes, counted: .some(nil)),
    DecisionRow(name: "local trouble during a multipart send is still not counted", report: .localFailure("EIO"), requested: false,
                fate: .interrupted(seconds: 15...15, reason: "EIO"), counted: .some(nil)),
    DecisionRow(name: "a spool no longer configured waits 5 minutes", report: .spoolMissing, requested: false,
                fate: .interrupted(seconds: 300...300, reason: "spool \"media\" is not in the configuration"), followUps: [], counted: .some(nil)),
    // Stopped: shutdown, hold, cancel.
    DecisionRow(name: "shutdown puts it back, due now", report: .stopped, fate: .interrupted(seconds: 0...0, reason: "interrupted by shutdown"),
                followUps: [.clearLocalProblem], counted: .interrupted),
    DecisionRow(name: "shutdown before any request is not counted, and is no attempt", report: .stopped, requested: false,
                fate: .putBack(seconds: 0...0, reason: "interrupted by shutdown"), counted: .some(nil)),
    DecisionRow(name: "put back from its slot's queue (its server cannot be reached): no attempt", report: .stopped, requested: false,
                intervention: .requeue(reason: "server unreachable"), fate: .putBack(seconds: 0...0, reason: "server unreachable"),
                followUps: [.clearLocalProblem], counted: .some(nil)),
    DecisionRow(name: "paused in flight: an interrupted attempt", report: .stopped, intervention: .requeue(reason: "spool paused"),
                fate: .interrupted(seconds: 0...0, reason: "spool paused"), followUps: [.clearLocalProblem], counted: .interrupted),
    DecisionRow(name: "hold in flight", report: .stopped, intervention: .hold(reason: "held by alice"), fate: .held,
                followUps: [.clearLocalProblem], counted: .interrupted),
    DecisionRow(name: "cancel in flight ends the server's upload", report: .stopped, intervention: .cancel(reason: "cancelled by alice"), fate: .cancelled,
                followUps: [.clearLocalProblem, .dispose, .endServerUpload, .requeueIfLeft], counted: .interrupted),
    DecisionRow(name: "an intervention does not override a 2xx", report: answer(200), intervention: .cancel(reason: "too late"), fate: .delivered),
    // A 2xx before the whole body was sent.
    DecisionRow(name: "a 2xx before the whole body stands, but the file is kept", report: answer(200), answeredEarly: true, bytesSent: 400,
                fate: .delivered, followUps: [.clearLocalProblem], counted: .delivered),
    DecisionRow(name: "trust_early_answers applies after_upload all the same", report: answer(200), answeredEarly: true, trustsEarly: true,
                bytesSent: 400, fate: .delivered, followUps: [.clearLocalProblem, .dispose, .requeueIfLeft]),
]

@Suite("Attempt decision")
struct AttemptDeciderTests {
    @Test("the decision table has every rule", arguments: decisionTable)
    func decide(_ row: DecisionRow) throws {
        var job = Job(id: JobID(rawValue: "01JTESTJOB0000000000000000"), spool: "media", relativePath: Array("a/photo.jpg".utf8),
                      identity: queuedIdentity, boundary: "b", now: decisionNow.addingTimeInterval(-row.age))
        job.attempts = row.attempts
        job.attemptBase = row.attemptBase
        var random = FixedRandom(value: row.random)
        let decision = AttemptDecider.decide(AttemptInput(
            job: job, policy: row.policy, settle: .seconds(2), report: row.report, bytesSent: row.bytesSent, requested: row.requested,
            progressed: row.progressed, intervention: row.intervention, answeredEarly: row.answeredEarly,
            trustsEarlyAnswers: row.trustsEarly, startedAt: decisionNow.addingTimeInterval(-1), now: decisionNow),
            random: &random)
        func seconds(_ date: Date) -> Double { date.timeIntervalSince(decisionNow) }

        switch (row.fate, decision.record) {
        case (.delivered, .attempt(.succeeded(let status, let body, let contentType, _, _, let keepSource))):
            #expect(keepSource == (row.answeredEarly && !row.trustsEarly), "an early 2xx keeps the file unless trusted")
            #expect((200..<300).contains(status))
            #expect(body == Array("answer".utf8) && contentType == "text/plain", "the answer is kept")
        case (.retry(let range, let error), .attempt(.retry(let at, let message, _, _, _, _))):
            #expect(range.contains(seconds(at)), "due in \(seconds(at)) s")
            #expect(message.hasPrefix(error), "\(message)")
        case (.failed(true, let error), .attempt(.failed(let message, _, _, _, _))):
            #expect(message.contains(error), "\(message)")
        case (.failed(false, let error), .failure(let message)):
            #expect(message.contains(error), "\(message)")
        case (.superseded(let identity, let wait), .supersede(let by, let notBefore)):
            #expect(by == identity)
            #expect(seconds(notBefore) == wait)
        case (.interrupted(let range, let reason), .attempt(.interrupted(let at, let message, let localTrouble))):
            let isLocal: Bool = if case .localFailure = row.report { true } else { false }
            #expect(localTrouble == isLocal, "only local trouble is collapsed into one row per episode")
            #expect(range.contains(seconds(at)), "due in \(seconds(at)) s")
            #expect(message == reason)
        case (.putBack(let range, let reason), .attempt(.putBack(let at, let message))):
            #expect(range.contains(seconds(at)), "due in \(seconds(at)) s")
            #expect(message == reason)
        case (.held, .attempt(.held(let reason))):
            #expect(reason == "held by alice")
        case (.cancelled, .attempt(.cancelled(let reason))):
            #expect(reason == "cancelled by alice")
        default:
            Issue.record("expected \(row.fate), decided \(decision.record)")
        }
        if let followUps = row.followUps { #expect(decision.followUps == followUps) }
        if let counted = row.counted { #expect(decision.counted == counted) }
        #expect(decision.resetsRetryCount == row.resets)
        // Never due after max_age (counted from now for an age stamped by a clock not yet set).
        let ageStart = job.ageStart < Date(timeIntervalSince1970: 1_767_225_600) ? decisionNow : job.ageStart
        if case .supersede = decision.record {} else if let next = decision.nextAttemptAt {
            #expect(next <= ageStart.addingTimeInterval(row.policy.maxAge.timeInterval))
        }
    }

    @Test("every attempt that made a request is counted once, and only those")
    func counting() {
        for row in decisionTable {
            var job = Job(id: JobID(rawValue: "01JTESTJOB0000000000000001"), spool: "media", relativePath: [0x61], identity: queuedIdentity,
                          boundary: "b", now: decisionNow.addingTimeInterval(-row.age))
            job.attempts = row.attempts
            for requested in [false, true] {
                var random = FixedRandom(value: 0)
                let decision = AttemptDecider.decide(AttemptInput(
                    job: job, policy: row.policy, settle: .seconds(2), report: row.report, requested: requested,
                    startedAt: decisionNow, now: decisionNow), random: &random)
                switch (requested, row.report) {
                case (false, _):
                    #expect(decision.counted == nil, "\(row.name)")
                case (true, .answered), (true, .noAnswer), (true, .refused), (true, .stopped):
                    #expect(decision.counted != nil, "\(row.name)")
                default:
                    break
                }
            }
        }
    }

    @Test("the log line says what was decided")
    func logLines() {
        let job = Job(id: JobID(rawValue: "01JTESTJOB0000000000000002"), spool: "media", relativePath: [0x61], identity: queuedIdentity,
                      boundary: "b", now: decisionNow)
        let retry = AttemptDecider.decide(AttemptInput(job: job, policy: RetryPolicy(), settle: .seconds(2), report: answer(503),
                                                       requested: true, startedAt: decisionNow, now: decisionNow))
        #expect(retry.log.level == .warning && retry.log.metadata["attempt"] == "1" && retry.log.metadata["retry_in_ms"] != nil)
        let done = AttemptDecider.decide(AttemptInput(job: job, policy: RetryPolicy(), settle: .seconds(2), report: answer(201),
                                                      bytesSent: 77, requested: true, startedAt: decisionNow.addingTimeInterval(-2), now: decisionNow))
        #expect(done.log.message == "uploaded" && done.log.metadata["status"] == "201" && done.log.metadata["sent"] == "77")
        #expect(done.log.metadata["duration_ms"] == "2000")
    }

    @Test("a 429 or 503 with Retry-After holds the whole spool until then; other answers, and none, do not", arguments: [
        (answer(429, retryAfter: "120"), 120.0 as Double?),
        (answer(503, retryAfter: httpDate(decisionNow.addingTimeInterval(600))), 600),
        (answer(503, retryAfter: "999999"), 86_400),
        (answer(429, retryAfter: "0"), nil),
        (answer(429), nil),
        (answer(502, retryAfter: "120"), nil),
        (answer(500, retryAfter: "120"), nil),
        (answer(413, retryAfter: "120"), nil),
        (answer(201, retryAfter: "120"), nil),
        (.noAnswer("connection refused"), nil),
        (.unreachable("connection refused"), nil),
    ])
    func spoolWait(report: AttemptReport, seconds: Double?) {
        #expect(AttemptDecider.spoolWait(after: report, now: decisionNow).map { $0.timeIntervalSince(decisionNow) } == seconds)
    }

    @Test("the table covers every kind of report")
    func coverage() {
        #expect(decisionTable.count >= 40)
        let kinds = Set(decisionTable.map { row -> String in
            switch row.report {
            case .spoolMissing: "spoolMissing"
            case .localFailure: "localFailure"
            case .sourceGone: "sourceGone"
            case .sourceChanged: "sourceChanged"
            case .answered: "answered"
            case .noAnswer: "noAnswer"
            case .unreachable: "unreachable"
            case .refused: "refused"
            case .stopped: "stopped"
            }
        })
        #expect(kinds.count == 9)
    }
}

import Crypto
import FerryConfig
import FerryDelivery
import FerryQueue
import Foundation
import Testing

/// The pure parts of what follows an outcome: which hooks a decision queues, which headers it
/// keeps, how a digest in the answer is read, and how a hook run's end is decided.
@Suite("After the outcome: hooks, kept headers, digests (pure)")
struct AfterOutcomeTests {
    static let now = Date(timeIntervalSince1970: 1_800_000_000)

    static func job() -> Job {
        var job = Job(id: JobID(rawValue: "01JTEST0000000000000000000"), spool: "s", relativePath: Array("a.txt".utf8),
                      identity: FileIdentity(device: 1, inode: 2, size: 3, modificationTime: 4), boundary: "b", now: now)
        job.sequence = 1
        return job
    }

    static func input(_ report: AttemptReport, spool: SpoolConfiguration, digests: SentDigests? = nil, intervention: Intervention? = nil) -> AttemptInput {
        AttemptInput(job: job(), policy: spool.retry, settle: .zero, report: report, bytesSent: 3, requested: true, progressed: false,
                     intervention: intervention, answeredEarly: false, trustsEarlyAnswers: false, startedAt: now, now: now,
                     spool: spool, sentDigests: digests)
    }

    static func spool(delivered: Bool = true, failed: Bool = true, results: Bool = true) -> SpoolConfiguration {
        var spool = SpoolConfiguration(name: "s", directory: "/srv/s", url: .literal("http://127.0.0.1/x"))
        spool.hooks = HookSettings(onDelivered: delivered ? [.literal("/bin/true")] : nil, onFailed: failed ? [.literal("/bin/true")] : nil)
        spool.resultDirectory = results ? "/srv/results" : nil
        spool.resultHeaders += ["x-request-id"]
        return spool
    }

    static let answer = ServerAnswer(status: 201, headers: [
        ("Content-Type", "application/json"), ("Location", "/media/7"), ("Set-Cookie", "s=1"), ("X-Request-Id", "r7"),
    ], body: Array("{\"id\":7}".utf8))

    @Test("which runs an outcome queues, of what the spool has", arguments: [
        (AttemptReport.answered(answer), true, true, true, [HookRun.Kind.result, .delivered]),
        (.answered(answer), false, true, true, [.result]),
        (.answered(answer), true, true, false, [.delivered]),
        (.answered(ServerAnswer(status: 422)), true, true, true, [.failed]),
        (.answered(ServerAnswer(status: 422)), true, false, true, []),
        (.answered(ServerAnswer(status: 503)), true, true, true, []),
        (.sourceGone("gone"), true, true, true, [.failed]),
        (.refused("too large"), true, true, true, [.failed]),
        (.noAnswer("reset"), true, true, true, []),
        (.localFailure("disk full"), true, true, true, []),
        (.sourceChanged(nil), true, true, true, []),
    ])
    func hooksQueued(_ report: AttemptReport, _ delivered: Bool, _ failed: Bool, _ results: Bool, _ expected: [HookRun.Kind]) {
        var random = SystemRandomNumberGenerator()
        let decision = AttemptDecider.decide(Self.input(report, spool: Self.spool(delivered: delivered, failed: failed, results: results)), random: &random)
        #expect(decision.hooks == expected)
    }

    @Test("an operator's cancel runs on_failed; a hold runs nothing")
    func interventions() {
        var random = SystemRandomNumberGenerator()
        let cancel = AttemptDecider.decide(Self.input(.stopped, spool: Self.spool(), intervention: .cancel(reason: "no")), random: &random)
        #expect(cancel.hooks == [.failed])
        let hold = AttemptDecider.decide(Self.input(.stopped, spool: Self.spool(), intervention: .hold(reason: "wait")), random: &random)
        #expect(hold.hooks.isEmpty)
    }

    @Test("a delivery keeps the listed headers only, and the digest sent")
    func keptHeaders() throws {
        var random = SystemRandomNumberGenerator()
        let digests = SentDigests(algorithm: .sha256, representation: Array(repeating: 1, count: 32))
        let decision = AttemptDecider.decide(Self.input(.answered(Self.answer), spool: Self.spool(), digests: digests), random: &random)
        guard case .attempt(.succeeded(let status, _, _, let headers, let digest, _)) = decision.record else {
            Issue.record("not a delivery: \(decision.record)")
            return
        }
        #expect(status == 201)
        #expect(headers.map(\.name) == ["content-type", "location", "x-request-id"])
        #expect(headers.value("Location") == "/media/7")
        #expect(digest == digests.reprDigestField)
    }

    static let file = Array(repeating: UInt8(1), count: 32)
    static let body = Array(repeating: UInt8(2), count: 32)
    static func field(_ bytes: [UInt8], _ name: String = "sha-256") -> String { "\(name)=:\(Data(bytes).base64EncodedString()):" }

    /// One answer and what comparing its digests finds.
    struct DigestCase: Sendable, CustomStringConvertible {
        var name: String
        var value: String
        var answerBody: [UInt8] = []
        /// The field named in the mismatch, or `nil` for none.
        var mismatch: String?
        var description: String { "\(name): \(value)" }
    }

    static let other32 = Data(Array(repeating: UInt8(9), count: 32)).base64EncodedString()
    static let other64 = Data(Array(repeating: UInt8(9), count: 64)).base64EncodedString()
    static let digestCases: [DigestCase] = [
        DigestCase(name: "Repr-Digest", value: field(file)),
        DigestCase(name: "Repr-Digest", value: field(body)),  // a server digesting the whole form
        DigestCase(name: "Repr-Digest", value: "sha-256=:\(other32):", mismatch: "Repr-Digest"),
        DigestCase(name: "Repr-Digest", value: "sha-512=:\(other64):"),  // another algorithm
        DigestCase(name: "Repr-Digest", value: "sha-256=:not base64!:"),
        DigestCase(name: "Repr-Digest", value: "unixsum=3, sha-256=:\(other32):", mismatch: "Repr-Digest"),
        DigestCase(name: "Content-Digest", value: field(body)),
        DigestCase(name: "Content-Digest", value: field(file), mismatch: "Content-Digest"),
        DigestCase(name: "Content-Digest", value: field(file), answerBody: Array("{}".utf8)),  // the answer's own body
        // The digest of the answer's own empty content (RFC 9530 allows it), not an echo of the upload's.
        DigestCase(name: "Content-Digest", value: "sha-256=:47DEQpj8HBSa+/TImW+5JCeuQeRkm5NMpJWZG3hSuFU=:"),
        // A server that digests every response: the Repr-Digest of its own JSON answer.
        DigestCase(name: "Repr-Digest", value: "sha-256=:\(Data(SHA256.hash(data: Data(#"{"id":7}"#.utf8))).base64EncodedString()):",
                   answerBody: Array(#"{"id":7}"#.utf8)),
        DigestCase(name: "Repr-Digest", value: "sha-256=:\(other32):", answerBody: Array(#"{"id":7}"#.utf8), mismatch: "Repr-Digest"),
        DigestCase(name: "X-Other", value: "1"),
    ]

    @Test("a 2xx answer's digests, compared with what was sent", arguments: digestCases)
    func answerDigests(_ example: DigestCase) {
        let sent = SentDigests(algorithm: .sha256, representation: Self.file, content: Self.body)
        let found = sent.mismatch(in: [ResponseHeader(name: example.name, value: example.value)], answerBody: example.answerBody)
        if let mismatch = example.mismatch {
            #expect(found?.contains(mismatch) == true, "\(found ?? "nil")")
        } else {
            #expect(found == nil, "\(found ?? "")")
        }
    }

    @Test("a 2xx whose Repr-Digest differs is retried, not delivered")
    func mismatchRetried() {
        var random = SystemRandomNumberGenerator()
        let answer = ServerAnswer(status: 201, headers: [("Repr-Digest", Self.field(Array(repeating: 7, count: 32)))], body: [])
        let sent = SentDigests(algorithm: .sha256, representation: Self.file)
        let decision = AttemptDecider.decide(Self.input(.answered(answer), spool: Self.spool(), digests: sent), random: &random)
        guard case .attempt(.retry(_, let error, let status, _, _, _)) = decision.record else {
            Issue.record("not a retry: \(decision.record)")
            return
        }
        #expect(status == 201 && error.contains("does not match the file Ferry sent"))
        #expect(decision.hooks.isEmpty)
    }

    @Test("[spool.retry] statuses decide which answers are retried")
    func configuredStatuses() {
        var random = SystemRandomNumberGenerator()
        var spool = Self.spool()
        spool.retry.retryStatuses = [409]
        let conflict = AttemptDecider.decide(Self.input(.answered(ServerAnswer(status: 409)), spool: spool), random: &random)
        if case .attempt(.retry) = conflict.record {} else { Issue.record("409 listed, not retried: \(conflict.record)") }
        let unavailable = AttemptDecider.decide(Self.input(.answered(ServerAnswer(status: 503)), spool: spool), random: &random)
        if case .attempt(.failed) = unavailable.record {} else { Issue.record("503 not listed, not failed: \(unavailable.record)") }
    }

    @Test("a hook run's end: succeeded, due again after backoff, or given up", arguments: [
        (HookEnding.exited(0), 0, HookRun.State.succeeded, nil as String?),
        (.written, 0, .succeeded, nil),
        (.exited(1), 0, .pending, "exited with status 1"),
        (.exited(1), 4, .gaveUp, "exited with status 1"),
        (.signalled(9), 1, .pending, "killed by signal 9"),
        (.timedOut(.seconds(30)), 2, .pending, "timed out after 30s"),
        (.failed("cannot run /x: No such file or directory"), 4, .gaveUp, "No such file"),
    ])
    func hookRunEnds(_ ending: HookEnding, _ attemptsBefore: Int, _ state: HookRun.State, _ error: String?) {
        var random = SystemRandomNumberGenerator()
        let run = HookRun(jobSequence: 1, kind: .delivered, attempts: attemptsBefore, nextAt: Self.now, updatedAt: Self.now)
        let policy = RetryPolicy(initialDelay: .seconds(1), maxDelay: .seconds(60))
        let next = HookRunDecider.next(run, ended: ending, output: "out", policy: policy, maxAttempts: 5, now: Self.now, random: &random)
        #expect(next.state == state)
        #expect(next.attempts == attemptsBefore + 1)
        #expect(next.lastOutput == "out")
        if let error { #expect(next.lastError?.contains(error) == true, "\(next.lastError ?? "nil")") } else { #expect(next.lastError == nil) }
        if state == .pending {
            let delay = next.nextAt.timeIntervalSince(Self.now)
            #expect(delay >= 0 && delay <= min(60, pow(2, Double(attemptsBefore))), "full jitter: \(delay)")
        }
    }

    @Test("tus: the spool's digest algorithm for Upload-Checksum when the server offers it, else sha1")
    func tusChecksum() {
        let both = TusCapabilities(extensions: ["creation", "checksum"], checksumAlgorithms: ["sha1", "sha256"])
        #expect(both.checksumAlgorithm(preferring: "sha256") == "sha256")
        #expect(both.checksumAlgorithm(preferring: "sha512") == "sha1")
        #expect(both.checksumAlgorithm(preferring: nil) == "sha1")
        let sha256Only = TusCapabilities(extensions: ["checksum"], checksumAlgorithms: ["sha256"])
        #expect(sha256Only.checksumAlgorithm(preferring: nil) == nil)
        #expect(sha256Only.checksumAlgorithm(preferring: "sha256") == "sha256")
        let none = TusCapabilities(extensions: ["creation"], checksumAlgorithms: ["sha256"])
        #expect(none.checksumAlgorithm(preferring: "sha256") == nil)
    }
}

import Foundation
import FerryQueue

/// What one attempt at a job came to, as the pipeline and its sender saw it: facts, no decisions.
/// ``AttemptDecider`` turns a report into the job's fate.
public enum AttemptReport: Sendable, Equatable {
    /// The job's spool is no longer in the configuration.
    case spoolMissing
    /// A local problem that may pass (the state directory is full, a read failed): it says nothing
    /// about the server.
    case localFailure(String)
    /// The file cannot be uploaded at all: gone, replaced by a symlink or a special file, unreadable.
    case sourceGone(String)
    /// The file is now another version than the job's; `nil` when the new version is not known
    /// (it changed under a transfer and could not be examined).
    case sourceChanged(FileIdentity?)
    /// The server answered.
    case answered(ServerAnswer)
    /// No usable answer: a connection failure, a timeout, a protocol error worth retrying.
    case noAnswer(String)
    /// No connection could be made to the server (refused, no route, DNS, the connect timeout):
    /// retried as ``noAnswer(_:)``, and the whole spool waits (``UnreachableServer``) rather than
    /// every queued file trying the same dead server in turn.
    case unreachable(String)
    /// The file cannot be sent to this server at all (too large for it, an insecure upload URL).
    case refused(String)
    /// Stopped before an outcome: a shutdown, or an operator's hold or cancel.
    case stopped
}

/// A server's answer, reduced to what decides a job's fate and what is kept of it.
public struct ServerAnswer: Sendable, Equatable {
    public var status: Int
    /// The first 64 KiB of the response body.
    public var body: [UInt8]
    public var contentType: String?
    /// The raw `Retry-After` value, if any.
    public var retryAfter: String?
    /// Which step of a multi-request protocol was answered ("creating the upload"), for messages.
    public var during: String?
    /// Advice a sender adds to the message of a rejection.
    public var hint: String?
    /// The protocol's own reading of the answer, which overrides the status's (S3 answers
    /// `RequestTimeout` with a 400 and means "retry", and an `<Error>` in a 200 is no success).
    public var verdict: AttemptVerdict?
    /// The answer's headers; the spool keeps some of them (at most ``ResponseHeader/countLimit``).
    public var headers: [ResponseHeader]

    public init(
        status: Int, body: [UInt8] = [], contentType: String? = nil, retryAfter: String? = nil, during: String? = nil,
        hint: String? = nil, verdict: AttemptVerdict? = nil, headers: [ResponseHeader] = []
    ) {
        self.headers = headers
        self.verdict = verdict
        self.status = status
        self.body = body
        self.contentType = contentType
        self.retryAfter = retryAfter
        self.during = during
        self.hint = hint
    }

    /// An answer as a transport returns it: `Content-Type` and `Retry-After` are taken from `headers`
    /// (for a 429 without `Retry-After`, the rate limit's reset time: ``RateLimitReset``).
    public init(
        status: Int, headers: [(name: String, value: String)], body: [UInt8], during: String? = nil, hint: String? = nil,
        verdict: AttemptVerdict? = nil
    ) {
        self.init(
            status: status, body: body, contentType: HTTPHeaders.value("Content-Type", in: headers),
            retryAfter: HTTPHeaders.value("Retry-After", in: headers) ?? (status == 429 ? RateLimitReset.retryAfter(in: headers) : nil),
            during: during, hint: hint, verdict: verdict,
            headers: headers.map { ResponseHeader(name: $0.name, value: $0.value) })
    }

    /// The headers named in `names` (lowercased), in the answer's order: what a job keeps.
    public func headers(named names: [String]) -> [ResponseHeader] {
        headers.filter { names.contains($0.name) }
    }

    /// Whether the server accepted the request.
    public var isSuccess: Bool { verdict.map { $0 == .success } ?? (200..<300).contains(status) }

    /// What the answer means for the job: the protocol's ``verdict`` if it gave one, else the
    /// status's (``RetryRules``; `retryable`: the spool's `[spool.retry] statuses`).
    public func verdict(now: Date, retryable: Set<Int> = RetryRules.retryableStatuses) -> AttemptVerdict {
        switch verdict {
        case .retry(nil)?:
            return .retry(notBefore: retryAfter.flatMap { RetryRules.parseRetryAfter($0, now: now) })
        case let verdict?:
            return verdict
        case nil:
            return RetryRules.verdict(status: status, retryAfter: retryAfter, now: now, retryable: retryable)
        }
    }
}

/// Header look-ups on the `(name, value)` lists the transport uses.
public enum HTTPHeaders {
    /// The first value of header `name` (case-insensitive), trimmed of spaces.
    public static func value(_ name: String, in headers: [(name: String, value: String)]) -> String? {
        headers.first { sameName($0.name, name) }?.value.trimmingCharacters(in: .whitespaces)
    }

    /// Whether two field names are the same: field names are ASCII tokens (RFC 9110 §5.1), compared
    /// without regard to ASCII case, byte by byte (Foundation's `caseInsensitiveCompare` was 1 % of
    /// ferryd's CPU, looking up two headers in every answer).
    public static func sameName(_ one: String, _ other: String) -> Bool {
        var left = one.utf8.makeIterator(), right = other.utf8.makeIterator()
        while true {
            switch (left.next(), right.next()) {
            case (nil, nil): return true
            case let (a?, b?) where a == b || (a | 0x20 == b | 0x20 && (a | 0x20) >= 0x61 && (a | 0x20) <= 0x7A): continue
            default: return false
            }
        }
    }
}

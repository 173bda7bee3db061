/// When a failed attempt is retried, and when Ferry gives up.
public struct RetryPolicy: Sendable, Equatable {
    /// The backoff before the first retry; it doubles each attempt, with full jitter.
    public var initialDelay: Duration
    /// The largest backoff.
    public var maxDelay: Duration
    /// Attempts before giving up; 0 means no limit other than ``maxAge``.
    public var maxAttempts: Int
    /// A file still not delivered this long after it was queued is given up on.
    public var maxAge: Duration
    /// The statuses that mean "try again later" (`statuses`); any other 4xx or 5xx fails the job.
    public var retryStatuses: Set<Int>

    /// 408 Request Timeout, 423 Locked (a tus server busy with an earlier request), 425 Too Early,
    /// 429 Too Many Requests, 500 Internal Server Error, 502 Bad Gateway, 503 Service Unavailable,
    /// 504 Gateway Timeout, 507 Insufficient Storage (a full disk at the server), 509 Bandwidth
    /// Limit Exceeded, and the statuses a CDN in front of the server gives when it cannot reach it
    /// (Cloudflare's 520–524 and 529, and 530 when a tunnel's origin is down). 501 and 505 are not
    /// retried: the server lacks the method or the HTTP version, and will next time too.
    public static let defaultRetryStatuses: Set<Int> = [408, 423, 425, 429, 500, 502, 503, 504, 507, 509, 520, 521, 522, 523, 524, 529, 530]

    public init(
        initialDelay: Duration = .seconds(1), maxDelay: Duration = .seconds(300), maxAttempts: Int = 0,
        maxAge: Duration = .seconds(5 * 86_400), retryStatuses: Set<Int> = defaultRetryStatuses
    ) {
        self.retryStatuses = retryStatuses
        self.initialDelay = initialDelay
        self.maxDelay = maxDelay
        self.maxAttempts = maxAttempts
        self.maxAge = maxAge
    }
}

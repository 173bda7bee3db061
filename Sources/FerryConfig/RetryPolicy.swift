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

    public init(
        initialDelay: Duration = .seconds(1), maxDelay: Duration = .seconds(300), maxAttempts: Int = 0,
        maxAge: Duration = .seconds(5 * 86_400)
    ) {
        self.initialDelay = initialDelay
        self.maxDelay = maxDelay
        self.maxAttempts = maxAttempts
        self.maxAge = maxAge
    }
}

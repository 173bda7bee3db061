/// `wait`: until nothing is queued, uploading, retrying or settling in the spools.
public struct WaitArguments: Sendable, Codable {
    /// Give up after this many seconds (`timeout` error); absent means no limit.
    public var timeoutSeconds: Double?
    /// The longest `timeoutSeconds` ferryd takes: a year (beyond it, a number no clock can hold).
    public static let maximumTimeoutSeconds: Double = 31_536_000
    /// Only this spool.
    public var spool: String?

    enum CodingKeys: String, CodingKey {
        case timeoutSeconds = "timeout_seconds", spool
    }

    public init(timeoutSeconds: Double? = nil, spool: String? = nil) {
        self.timeoutSeconds = timeoutSeconds
        self.spool = spool
    }
}

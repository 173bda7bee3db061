/// One bandwidth limit in force, as `status` and `limit` report it.
public struct BandwidthState: Sendable, Codable, Hashable {
    /// `*` for the limit all spools share, else a spool's name.
    public var scope: String
    /// The limit as words: `4 MiB/s`, `off`.
    public var limit: String
    /// The limit in bytes per second; absent when off.
    public var bytesPerSecond: Int64?
    /// Where it comes from: `config` (`bandwidth_limit`), `schedule` (`bandwidth_schedule`) or
    /// `override` (`ferryctl limit`, until the next reload or restart).
    public var source: String

    enum CodingKeys: String, CodingKey {
        case scope, limit, source
        case bytesPerSecond = "bytes_per_second"
    }

    public init(scope: String, limit: String, bytesPerSecond: Int64?, source: String) {
        self.scope = scope
        self.limit = limit
        self.bytesPerSecond = bytesPerSecond
        self.source = source
    }
}

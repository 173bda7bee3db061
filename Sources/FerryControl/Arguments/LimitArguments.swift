/// `limit`: set a bandwidth limit now, until the next reload or restart. `spool` absent: the limit
/// all spools share. `rate`: `"4MiB/s"`, `"500kB/s"`, `"10Mbit/s"` or `"off"`.
public struct LimitArguments: Sendable, Codable {
    public var spool: String?
    public var rate: String

    public init(spool: String? = nil, rate: String) {
        self.spool = spool
        self.rate = rate
    }
}

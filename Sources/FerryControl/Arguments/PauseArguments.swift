/// `pause`, `resume`: one spool, or (no spool) all of them.
public struct PauseArguments: Sendable, Codable {
    public var spool: String?
    public init(spool: String? = nil) { self.spool = spool }
}

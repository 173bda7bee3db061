/// `reload`'s result.
public struct ReloadResult: Sendable, Codable {
    /// What changed and was applied.
    public var applied: [String]
    /// Changes that only take effect at the next start.
    public var restartRequired: [String]

    enum CodingKeys: String, CodingKey {
        case applied
        case restartRequired = "restart_required"
    }

    public init(applied: [String], restartRequired: [String]) {
        self.applied = applied
        self.restartRequired = restartRequired
    }
}

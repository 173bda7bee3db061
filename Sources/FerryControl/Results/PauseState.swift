/// `pause` / `resume`'s result.
public struct PauseState: Sendable, Codable {
    /// Every spool that is paused now.
    public var paused: [String]
    public init(paused: [String]) { self.paused = paused }
}

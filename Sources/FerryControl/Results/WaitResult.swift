/// `wait`'s result.
public struct WaitResult: Sendable, Codable {
    public var waitedSeconds: Double
    /// Jobs that failed or were cancelled while waiting.
    public var failed: [JobSummary]
    /// Jobs left on hold (they do not keep `wait` waiting).
    public var held: Int

    enum CodingKeys: String, CodingKey {
        case failed, held
        case waitedSeconds = "waited_seconds"
    }

    public init(waitedSeconds: Double, failed: [JobSummary], held: Int) {
        self.waitedSeconds = waitedSeconds
        self.failed = failed
        self.held = held
    }
}

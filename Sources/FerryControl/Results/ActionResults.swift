/// The result of `retry`, `hold`, `release`, `cancel` and `enqueue`: one outcome per job or file.
/// The request as a whole succeeds even when some items do not; check each `ok`.
public struct ActionResults: Sendable, Codable {
    public var results: [ActionOutcome]
    public init(results: [ActionOutcome]) { self.results = results }
}

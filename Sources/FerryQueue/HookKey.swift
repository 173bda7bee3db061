/// Identifies one hook run: a job and a kind.
public struct HookKey: Sendable, Hashable {
    public var jobSequence: Int64
    public var kind: HookRun.Kind

    public init(jobSequence: Int64, kind: HookRun.Kind) {
        self.jobSequence = jobSequence
        self.kind = kind
    }
}

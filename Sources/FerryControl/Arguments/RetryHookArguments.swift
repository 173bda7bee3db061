/// `retry-hook`: run a job's hooks that gave up again. `id` may be a full job id or an unambiguous
/// prefix; `hook` (`delivered`, `failed` or `result`) narrows it to one.
public struct RetryHookArguments: Sendable, Codable {
    public var id: String
    public var hook: String?

    public init(id: String, hook: String? = nil) {
        self.id = id
        self.hook = hook
    }
}

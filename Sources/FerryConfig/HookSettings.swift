/// `[spool.hooks]`: programs run once a job's outcome is durable and its file disposed of, at least
/// once each (recorded in the queue with the outcome, retried until `hook_max_attempts`).
public struct HookSettings: Sendable, Equatable {
    /// The argv run after a delivery (`on_delivered`); `nil`: none. Never a shell.
    public var onDelivered: [ValueTemplate]?
    /// The argv run after a job failed or was cancelled (`on_failed`); `nil`: none.
    public var onFailed: [ValueTemplate]?
    /// A run that takes longer is killed with its process group and counts as a failed attempt.
    public var timeout: Duration
    /// The hook's working directory.
    public var workingDirectory: String
    /// Runs of one hook before it gives up (`hook_max_attempts`, in the spool's table); `ferryctl
    /// retry-hook` runs one that gave up again.
    public var maxAttempts: Int

    public static let defaultTimeout = Duration.seconds(30)
    public static let defaultMaxAttempts = 5

    public init(
        onDelivered: [ValueTemplate]? = nil, onFailed: [ValueTemplate]? = nil, timeout: Duration = defaultTimeout,
        workingDirectory: String = "/", maxAttempts: Int = defaultMaxAttempts
    ) {
        self.onDelivered = onDelivered
        self.onFailed = onFailed
        self.timeout = timeout
        self.workingDirectory = workingDirectory
        self.maxAttempts = maxAttempts
    }
}

extension HookSettings {
    /// The keys of `[spool.hooks]`.
    static let keys: Set<String> = ["on_delivered", "on_failed", "timeout", "working_directory"]

    /// Reads `[spool.hooks]`; problems are reported to the reader's context.
    init(reading reader: TableReader, maxAttempts: Int) {
        self.init(maxAttempts: maxAttempts)
        reader.rejectUnknownKeys(Self.keys)
        onDelivered = Self.readCommand(reader, key: "on_delivered")
        onFailed = Self.readCommand(reader, key: "on_failed")
        timeout = reader.duration("timeout", minimum: .milliseconds(10)) ?? timeout
        if let directory = reader.path("working_directory") {
            workingDirectory = directory
        }
    }

    /// An argv array such as `["/usr/local/bin/notify", "--job", "{id}"]`: the program by absolute
    /// path, placeholders allowed, secrets not (a command line is visible to every user in `/proc`).
    private static func readCommand(_ reader: TableReader, key: String) -> [ValueTemplate]? {
        guard let value = reader.table[key] else { return nil }
        let path = reader.path.appending(key)
        let example = "[\"/usr/local/bin/notify\", \"--job\", \"{id}\"]"
        guard let array = value.array, !array.isEmpty else {
            reader.context.report(path, "expected a non-empty array of strings, the program and its arguments, such as \(example) (a hook is never run by a shell)")
            return nil
        }
        var argv: [ValueTemplate] = []
        for (index, element) in array.enumerated() {
            guard let text = element.string else {
                reader.context.report(path.appending(index: index), "expected a string, got \(LoadContext.article(element.type))")
                return nil
            }
            if text.utf8.contains(0) {
                reader.context.report(path.appending(index: index), "an argument cannot contain a NUL character")
                return nil
            }
            guard let template = reader.context.template(text, at: path.appending(index: index), allowPlaceholders: true) else { return nil }
            if template.containsSecret {
                reader.context.report(path.appending(index: index), "a secret cannot be passed on a hook's command line, which every user can read in /proc; let the hook read it itself")
                return nil
            }
            if template.placeholders.contains(.sha256) {
                reader.context.report(path.appending(index: index), "{sha256} cannot be used in a hook's arguments; the job's JSON on standard input has the digest when `digest` is set")
                return nil
            }
            argv.append(template)
        }
        if !argv[0].placeholders.isEmpty || !argv[0].text.hasPrefix("/") {
            reader.context.report(path.appending(index: 0), "the program must be an absolute path such as \"/usr/local/bin/notify\" (hooks do not search PATH)")
            return nil
        }
        return argv
    }
}

extension RetryPolicy {
    /// The keys of `[spool.retry]`.
    static let keys: Set<String> = ["initial_delay", "max_delay", "max_attempts", "max_age"]

    /// Reads `[spool.retry]` over the defaults; problems are reported to the reader's context.
    init(reading reader: TableReader) {
        self.init()
        reader.rejectUnknownKeys(Self.keys)
        initialDelay = reader.duration("initial_delay", minimum: .milliseconds(1)) ?? initialDelay
        maxDelay = reader.duration("max_delay", minimum: .milliseconds(1)) ?? maxDelay
        maxAttempts = reader.int("max_attempts", in: 0...1_000_000) ?? maxAttempts
        maxAge = reader.duration("max_age", minimum: .seconds(1)) ?? maxAge
        if maxDelay < initialDelay {
            reader.context.report(reader.path.appending("max_delay"), "max_delay (\(DurationParser.format(maxDelay))) is shorter than initial_delay (\(DurationParser.format(initialDelay)))")
        }
    }
}

import TOMLKit

extension RetryPolicy {
    /// The keys of `[spool.retry]`.
    static let keys: Set<String> = ["initial_delay", "max_delay", "max_attempts", "max_age", "statuses"]

    /// Reads `[spool.retry]` over the defaults; problems are reported to the reader's context.
    init(reading reader: TableReader) {
        self.init()
        reader.rejectUnknownKeys(Self.keys)
        initialDelay = reader.duration("initial_delay", minimum: .milliseconds(1)) ?? initialDelay
        maxDelay = reader.duration("max_delay", minimum: .milliseconds(1)) ?? maxDelay
        maxAttempts = reader.int("max_attempts", in: 0...1_000_000) ?? maxAttempts
        maxAge = reader.duration("max_age", minimum: .seconds(1)) ?? maxAge
        if let value = reader.table["statuses"] {
            retryStatuses = Self.readStatuses(value, at: reader.path.appending("statuses"), context: reader.context) ?? retryStatuses
        }
        if maxDelay < initialDelay {
            reader.context.report(reader.path.appending("max_delay"), "max_delay (\(DurationParser.format(maxDelay))) is shorter than initial_delay (\(DurationParser.format(initialDelay)))")
        }
    }

    /// `statuses = [408, 429, 503]`: each a status from 400 to 599 (a 2xx is a delivery, and other
    /// statuses are never retried).
    private static func readStatuses(_ value: TOMLValueConvertible, at path: KeyPath, context: LoadContext) -> Set<Int>? {
        guard let array = value.array else {
            context.report(path, "expected an array of HTTP statuses such as [429, 503]")
            return nil
        }
        var statuses: Set<Int> = []
        for (index, element) in array.enumerated() {
            guard let status = element.int else {
                context.report(path.appending(index: index), "expected a status number such as 503, got \(LoadContext.article(element.type))")
                return nil
            }
            guard (400...599).contains(status) else {
                let why = (200..<300).contains(status) ? "a 2xx is a delivery, not a failure" : "only 4xx and 5xx answers can be retried"
                context.report(path.appending(index: index), "\(status) cannot be retried: \(why); use statuses from 400 to 599")
                return nil
            }
            statuses.insert(status)
        }
        return statuses
    }
}

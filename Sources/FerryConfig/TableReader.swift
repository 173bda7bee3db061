import TOMLKit

/// Typed access to one TOML table, reporting wrong types and unknown keys to the context.
struct TableReader {
    let table: TOMLTable
    let path: KeyPath
    let context: LoadContext

    func rejectUnknownKeys(_ allowed: Set<String>) {
        for key in table.keys where !allowed.contains(key) {
            var message = "unknown key \"\(key)\""
            if let suggestion = Self.closest(to: key, in: allowed) {
                message += " (did you mean \"\(suggestion)\"?)"
            } else {
                message += "; the keys here are \(allowed.sorted().joined(separator: ", "))"
            }
            context.report(path.appending(key), message)
        }
    }

    private func value(_ key: String, expected: TOMLType, required: Bool) -> TOMLValueConvertible? {
        guard let value = table[key] else {
            if required { context.report(path.appending(key), "required key \"\(key)\" is missing") }
            return nil
        }
        guard value.type == expected else {
            context.report(path.appending(key), "expected \(LoadContext.article(expected)), got \(LoadContext.article(value.type))")
            return nil
        }
        return value
    }

    func string(_ key: String, required: Bool = false) -> String? {
        value(key, expected: .string, required: required)?.string
    }

    func bool(_ key: String) -> Bool? { value(key, expected: .bool, required: false)?.bool }

    func int(_ key: String, in range: ClosedRange<Int>) -> Int? {
        guard let number = value(key, expected: .int, required: false)?.int else { return nil }
        guard range.contains(number) else {
            context.report(path.appending(key), "\(number) is out of range; use \(range.lowerBound) to \(range.upperBound)")
            return nil
        }
        return number
    }

    func duration(_ key: String, minimum: Duration) -> Duration? {
        guard let text = string(key) else { return nil }
        guard let duration = DurationParser.parse(text) else {
            context.report(path.appending(key), "expected a duration such as \"500ms\", \"2s\", \"5m\", \"1h\" or \"5d\", got \"\(text)\"")
            return nil
        }
        guard duration >= minimum else {
            context.report(path.appending(key), "\"\(text)\" is too short; the least is \(DurationParser.format(minimum))")
            return nil
        }
        guard duration <= DurationParser.maximum else {
            context.report(path.appending(key), "\"\(text)\" is too long; the most is \(DurationParser.format(DurationParser.maximum))")
            return nil
        }
        return duration
    }

    /// A byte count: an integer, or a string such as `"512KiB"`, `"8MiB"`, `"1GiB"` (also KB, MB, GB
    /// as powers of 1000).
    func size(_ key: String, minimum: Int64) -> Int64? {
        let raw = table[key]
        var bytes: Int64?
        if let number = raw?.int {
            bytes = Int64(number)
        } else if let text = raw?.string {
            bytes = Self.parseSize(text)
            if bytes == nil {
                context.report(path.appending(key), "expected a size such as \"512KiB\", \"8MiB\" or \"1GiB\" (or a number of bytes), got \"\(text)\"")
                return nil
            }
        } else if let raw {
            context.report(path.appending(key), "expected a size such as \"8MiB\" or a number of bytes, got \(LoadContext.article(raw.type))")
            return nil
        }
        guard let bytes else { return nil }
        guard bytes >= minimum else {
            context.report(path.appending(key), "\(bytes) bytes is too small; the least is \(minimum) bytes (\(minimum / 1024) KiB)")
            return nil
        }
        return bytes
    }

    /// `"8MiB"` → 8388608; `nil` when it is not a size.
    static func parseSize(_ text: String) -> Int64? {
        let trimmed = text.trimmingCharacters(in: .whitespaces)
        let digits = trimmed.prefix { $0.isASCII && $0.isNumber }
        guard !digits.isEmpty, let number = Int64(digits) else { return nil }
        let unit = trimmed.dropFirst(digits.count).trimmingCharacters(in: .whitespaces).lowercased()
        let multipliers: [String: Int64] = [
            "": 1, "b": 1, "k": 1024, "kib": 1024, "m": 1 << 20, "mib": 1 << 20, "g": 1 << 30, "gib": 1 << 30,
            "kb": 1000, "mb": 1_000_000, "gb": 1_000_000_000,
        ]
        guard let multiplier = multipliers[unit] else { return nil }
        let (product, overflow) = number.multipliedReportingOverflow(by: multiplier)
        return overflow ? nil : product
    }

    /// A filesystem path, made absolute against the configuration file's directory.
    func path(_ key: String, required: Bool = false) -> String? {
        guard let text = string(key, required: required) else { return nil }
        guard !text.isEmpty else {
            context.report(path.appending(key), "the path must not be empty")
            return nil
        }
        return context.absolutePath(text)
    }

    func table(_ key: String) -> TOMLTable? { value(key, expected: .table, required: false)?.table }

    func arrayOfTables(_ key: String) -> [TOMLTable]? {
        guard let array = value(key, expected: .array, required: false)?.array else { return nil }
        var tables: [TOMLTable] = []
        for (index, element) in array.enumerated() {
            if let table = element.table {
                tables.append(table)
            } else {
                context.report(path.appending(key).appending(index: index), "expected a table ([[\(key)]]), got \(LoadContext.article(element.type))")
            }
        }
        return tables
    }

    func template(_ text: String, key: String, allowPlaceholders: Bool) -> ValueTemplate? {
        context.template(text, at: path.appending(key), allowPlaceholders: allowPlaceholders)
    }

    /// The allowed key nearest to a misspelt one, if it is close enough to be a typo.
    static func closest(to key: String, in allowed: Set<String>) -> String? {
        let candidates = allowed.map { ($0, editDistance(key.lowercased(), $0)) }.filter { $0.1 <= max(2, key.count / 4) }
        return candidates.min { ($0.1, $0.0) < ($1.1, $1.0) }?.0
    }

    static func editDistance(_ a: String, _ b: String) -> Int {
        let a = Array(a), b = Array(b)
        var previous = Array(0...b.count)
        for i in 1...max(a.count, 1) where !a.isEmpty {
            var current = [i] + Array(repeating: 0, count: b.count)
            for j in 1...max(b.count, 1) where !b.isEmpty {
                current[j] = min(previous[j] + 1, current[j - 1] + 1, previous[j - 1] + (a[i - 1] == b[j - 1] ? 0 : 1))
            }
            previous = current
        }
        return a.isEmpty ? b.count : b.isEmpty ? a.count : previous[b.count]
    }
}

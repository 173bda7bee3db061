/// Parses and prints the durations used in the configuration: `500ms`, `2s`, `5m`, `1h`, `5d`,
/// and sums of them such as `1h30m`.
public enum DurationParser {
    /// The units a duration may use, with their length in milliseconds.
    static let units: [(suffix: String, milliseconds: Int64)] = [
        ("ms", 1), ("s", 1_000), ("m", 60_000), ("h", 3_600_000), ("d", 86_400_000),
    ]

    /// The longest duration a setting accepts (365 days): longer ones are surely typos, and would
    /// overflow the nanosecond timers they end up in.
    public static let maximum = Duration.seconds(365 * 86_400)

    /// The duration `text` stands for, or `nil` if it is not a duration.
    public static func parse(_ text: String) -> Duration? {
        var rest = Substring(text.trimmingSpaces())
        guard !rest.isEmpty else { return nil }
        var total: Int64 = 0
        while !rest.isEmpty {
            let digits = rest.prefix(while: { $0.isASCII && $0.isNumber })
            guard !digits.isEmpty, let number = Int64(digits) else { return nil }
            rest = rest.dropFirst(digits.count)
            let letters = rest.prefix(while: { $0.isLetter })
            guard let unit = units.first(where: { $0.suffix == letters.lowercased() }) else { return nil }
            rest = rest.dropFirst(letters.count)
            let (product, overflow) = number.multipliedReportingOverflow(by: unit.milliseconds)
            guard !overflow else { return nil }
            let (sum, overflow2) = total.addingReportingOverflow(product)
            guard !overflow2 else { return nil }
            total = sum
        }
        return .milliseconds(total)
    }

    /// A short human form of `duration`, e.g. `1h30m`, `2s`, `250ms`.
    public static func format(_ duration: Duration) -> String {
        var ms = duration.components.seconds * 1000 + duration.components.attoseconds / 1_000_000_000_000_000
        if ms == 0 { return "0s" }
        var text = ""
        for unit in units.reversed() where ms >= unit.milliseconds {
            text += "\(ms / unit.milliseconds)\(unit.suffix)"
            ms %= unit.milliseconds
        }
        return text
    }
}

extension String {
    func trimmingSpaces() -> String {
        var s = Substring(self)
        while let first = s.first, first == " " || first == "\t" { s = s.dropFirst() }
        while let last = s.last, last == " " || last == "\t" { s = s.dropLast() }
        return String(s)
    }
}

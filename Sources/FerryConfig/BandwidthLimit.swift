import Foundation

/// A bandwidth limit as configured (`bandwidth_limit`): bytes per second, or none.
public enum BandwidthLimit: Sendable, Hashable, CustomStringConvertible {
    case off
    case bytesPerSecond(Int64)

    /// Bytes per second; `nil` when off.
    public var rate: Int64? {
        if case .bytesPerSecond(let rate) = self { rate } else { nil }
    }

    /// Units by their lowercase spelling: bytes per unit. `k`, `m`, `g` alone are rclone's binary
    /// KiB, MiB, GiB; `kB`, `MB`, `GB` decimal; `kbit`, `Mbit`, `Gbit` (and `kbps`, `Mbps`) decimal
    /// bits. `kb`, `Mb`, `Gb` (a lowercase b) are refused as ambiguous.
    static let units: [String: Double] = [
        "b": 1, "k": 1024, "m": 1_048_576, "g": 1_073_741_824,
        "kib": 1024, "mib": 1_048_576, "gib": 1_073_741_824,
        "kb": 1000, "mb": 1_000_000, "gb": 1_000_000_000,
        "kbit": 125, "mbit": 125_000, "gbit": 125_000_000,
        "kbps": 125, "mbps": 125_000, "gbps": 125_000_000,
    ]

    /// `"4MiB/s"`, `"500 kB/s"`, `"10Mbit/s"`, `"1.5M"` (rclone's MiB/s), `"off"`; `nil` for
    /// anything else (a number needs its unit: rclone reads a bare one as KiB/s, others as bytes).
    public static func parse(_ text: String) -> BandwidthLimit? {
        if text.trimmingCharacters(in: .whitespaces).lowercased() == "off" { return .off }
        let (digits, written) = split(text)
        guard !digits.isEmpty, let number = Double(digits), number.isFinite, number > 0 else { return nil }
        // "10Mb/s" is megabits to a network engineer and megabytes to others: neither is guessed
        // (MB, MiB or Mbit say which).
        if ambiguousUnit(in: text) != nil { return nil }
        var unit = written.hasSuffix("/s") ? String(written.dropLast(2)) : written
        // "MBps" (an uppercase B) is megabytes a second, "Mbps" megabits; a bare "b" could be either.
        if unit == "b" { return nil }
        if unit.count == 4, unit.hasSuffix("Bps") { unit = unit.prefix(1) + "B" }
        unit = unit.lowercased()
        guard !unit.isEmpty, let multiplier = units[unit] else { return nil }
        let bytes = (number * multiplier).rounded()
        guard bytes >= 1, bytes < 1e15 else { return nil }
        return .bytesPerSecond(Int64(bytes))
    }

    /// For a rate written with `kb`, `Mb` or `Gb` (a lowercase b), the two ways it could be meant.
    static func ambiguousUnit(in text: String) -> (bytes: String, bits: String)? {
        let (digits, written) = split(text)
        guard let first = written.first, "kKmMgG".contains(first), written.dropFirst().hasPrefix("b"),
              !written.dropFirst().hasPrefix("bit"), !written.dropFirst().hasPrefix("bps") else { return nil }
        let prefix = first == "k" || first == "K" ? "k" : first.uppercased()
        return ("\(digits)\(prefix)B/s", "\(digits)\(prefix)bit/s")
    }

    /// The number as written and the unit after it, spaces trimmed.
    private static func split(_ text: String) -> (digits: Substring, written: String) {
        let trimmed = text.trimmingCharacters(in: .whitespaces)
        let digits = trimmed.prefix { $0.isASCII && ($0.isNumber || $0 == ".") }
        return (digits, trimmed.dropFirst(digits.count).trimmingCharacters(in: .whitespaces))
    }

    /// `"4 MiB/s"`, `"off"`.
    public var description: String {
        guard let rate else { return "off" }
        for (unit, size) in [("GiB", Int64(1) << 30), ("MiB", Int64(1) << 20), ("KiB", Int64(1) << 10)] where rate >= size {
            let value = Double(rate) / Double(size)
            return value == value.rounded() ? "\(Int64(value)) \(unit)/s" : String(format: "%.2f \(unit)/s", value)
        }
        return "\(rate) B/s"
    }
}

extension TableReader {
    /// A `bandwidth_limit`-style key: a rate such as `"4MiB/s"`, or `"off"`.
    func bandwidth(_ key: String) -> BandwidthLimit? {
        guard let text = string(key) else { return nil }
        guard let limit = BandwidthLimit.parse(text) else {
            if let ambiguous = BandwidthLimit.ambiguousUnit(in: text) {
                context.report(path.appending(key), "\"\(text)\" is ambiguous: a lowercase b means bits to some and bytes to others; write \"\(ambiguous.bytes)\" for bytes or \"\(ambiguous.bits)\" for bits")
            } else {
                context.report(path.appending(key), "expected a rate such as \"4MiB/s\", \"500kB/s\" or \"10Mbit/s\", or \"off\"; got \"\(text)\"")
            }
            return nil
        }
        return limit
    }
}

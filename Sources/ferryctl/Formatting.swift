import Foundation

#if canImport(Glibc)
import Glibc
#endif

/// Human-readable renderings of sizes, rates, durations and times, shared by every command.
enum Format {
    /// A byte count in binary units: "512 B", "1.5 KiB", "12.0 MiB", "1.02 GiB".
    static func bytes(_ count: Int64) -> String {
        if count < 1024 && count > -1024 { return "\(count) B" }
        let units = ["KiB", "MiB", "GiB", "TiB", "PiB", "EiB"]
        var value = Double(count) / 1024
        var index = 0
        while abs(value) >= 1024 && index < units.count - 1 {
            value /= 1024
            index += 1
        }
        // Above a mebibyte the unit is large enough that a second decimal still means something.
        let digits = index >= 2 && abs(value) < 10 ? 2 : 1
        return decimal(value, digits: digits) + " " + units[index]
    }

    /// A transfer rate in decimal units, as network rates are usually given: "0 B/s", "850 B/s", "12.3 MB/s".
    static func rate(_ bytesPerSecond: Double) -> String {
        guard bytesPerSecond.isFinite, bytesPerSecond >= 1 else { return "0 B/s" }
        if bytesPerSecond < 1000 { return "\(Int(bytesPerSecond)) B/s" }
        let units = ["kB/s", "MB/s", "GB/s", "TB/s"]
        var value = bytesPerSecond / 1000
        var index = 0
        while value >= 1000 && index < units.count - 1 {
            value /= 1000
            index += 1
        }
        return decimal(value, digits: 1) + " " + units[index]
    }

    /// A duration in its two largest units: "45s", "3m 12s", "2h 5m", "3d 4h".
    /// - Parameter largestOnly: only the largest unit ("3m", "2h").
    static func duration(_ seconds: Double, largestOnly: Bool = false) -> String {
        guard seconds.isFinite else { return "?" }
        let total = Int64(max(0, seconds.rounded(.down)))
        let parts: [(Int64, String)] = [(total / 86_400, "d"), (total % 86_400 / 3600, "h"), (total % 3600 / 60, "m"), (total % 60, "s")]
        guard let first = parts.firstIndex(where: { $0.0 > 0 }) else { return "0s" }
        let (value, unit) = parts[first]
        if largestOnly || first == parts.count - 1 { return "\(value)\(unit)" }
        let (next, nextUnit) = parts[first + 1]
        return next == 0 ? "\(value)\(unit)" : "\(value)\(unit) \(next)\(nextUnit)"
    }

    /// A duration with tenths of a second below a minute ("0.4s", "3.2s"), else as ``duration(_:largestOnly:)``.
    static func preciseDuration(_ seconds: Double) -> String {
        guard seconds.isFinite else { return "?" }
        return seconds < 60 ? decimal(max(0, seconds), digits: 1) + "s" : duration(seconds)
    }

    /// A time relative to `now`: "just now", "5m ago", "in 2m".
    static func relative(_ date: Date, now: Date = Date()) -> String {
        let offset = date.timeIntervalSince(now)
        if abs(offset) < 5 { return "just now" }
        let text = duration(abs(offset), largestOnly: true)
        return offset < 0 ? text + " ago" : "in " + text
    }

    /// A local wall-clock time, "HH:MM:SS".
    static func clock(_ date: Date) -> String {
        let fields = localTime(date)
        return String(format: "%02d:%02d:%02d", fields.tm_hour, fields.tm_min, fields.tm_sec)
    }

    /// A local date and time, "2026-11-22 10:15:30".
    static func dateTime(_ date: Date) -> String {
        let fields = localTime(date)
        return String(format: "%04d-%02d-%02d ", fields.tm_year + 1900, fields.tm_mon + 1, fields.tm_mday) + clock(date)
    }

    /// A local date and time followed by its relative form: "2026-11-22 10:15:30 (5m ago)".
    static func timeWithRelative(_ date: Date, now: Date = Date()) -> String {
        "\(dateTime(date)) (\(relative(date, now: now)))"
    }

    /// A percentage of `part` in `total`, rounded down: "12%" (no total: "?").
    static func percent(_ part: Int64, of total: Int64) -> String {
        guard total > 0 else { return "?" }
        return "\(min(100, max(0, part * 100 / total)))%"
    }

    /// A progress bar of `width` cells: "[#####.....]".
    static func progressBar(_ part: Int64, of total: Int64, width: Int = 20) -> String {
        let fraction = total > 0 ? min(1, max(0, Double(part) / Double(total))) : 0
        let filled = Int((fraction * Double(width)).rounded(.down))
        return "[" + String(repeating: "#", count: filled) + String(repeating: ".", count: width - filled) + "]"
    }

    /// `text` from ferryd (a file name, a server's answer, an error) safe to print on a terminal:
    /// control characters (C0, DEL, C1), which could move the cursor, clear the screen or set the
    /// window title, and the bidirectional controls, which reorder what follows them on the line (a
    /// name ending `\u202Etxt.exe` reads as one ending `exe.txt`), are shown escaped as the log shows
    /// them (`\u001b`). `--json` output is exact instead.
    static func printable(_ text: String) -> String {
        guard text.unicodeScalars.contains(where: isControl) else { return text }
        var output = ""
        for scalar in text.unicodeScalars {
            if isControl(scalar) {
                let hex = String(scalar.value, radix: 16)
                output += "\\u" + String(repeating: "0", count: 4 - hex.count) + hex
            } else {
                output.unicodeScalars.append(scalar)
            }
        }
        return output
    }

    private static func isControl(_ scalar: Unicode.Scalar) -> Bool {
        scalar.value < 0x20 || (0x7F...0x9F).contains(scalar.value) || bidiControls.contains(scalar.value)
    }

    /// U+061C, U+200E–U+200F, U+202A–U+202E, U+2066–U+2069: the marks, embeddings, overrides and isolates.
    private static let bidiControls: Set<UInt32> = [0x061C, 0x200E, 0x200F, 0x202A, 0x202B, 0x202C, 0x202D, 0x202E, 0x2066, 0x2067, 0x2068, 0x2069]

    /// `text` cut to at most `limit` characters on one line, ending in "…" when cut, and printable.
    static func shortened(_ text: String, to limit: Int) -> String {
        let flat = printable(text.split(whereSeparator: \.isNewline).joined(separator: " "))
        guard flat.count > limit, limit > 1 else { return flat }
        return String(flat.prefix(limit - 1)) + "…"
    }

    /// `value` with `digits` decimals (only ever formats a number, never a string).
    static func decimal(_ value: Double, digits: Int) -> String {
        String(format: "%.\(digits)f", value)
    }

    /// "1 job" / "3 jobs".
    static func count(_ value: Int, _ singular: String, _ plural: String? = nil) -> String {
        "\(value) " + (value == 1 ? singular : plural ?? singular + "s")
    }

    private static func localTime(_ date: Date) -> tm {
        var seconds = time_t(date.timeIntervalSince1970.rounded(.down))
        var fields = tm()
        localtime_r(&seconds, &fields)
        return fields
    }
}

/// A text table: columns padded to their widest cell, two spaces apart, a header row in capitals.
/// The last column is not padded, so lines carry no trailing spaces.
struct TextTable {
    /// One column: its header and which side its cells line up on.
    struct Column {
        var title: String
        var rightAligned: Bool

        init(_ title: String, rightAligned: Bool = false) {
            self.title = title
            self.rightAligned = rightAligned
        }
    }

    var columns: [Column]
    private(set) var rows: [[String]] = []

    init(_ columns: [Column]) {
        self.columns = columns
    }

    /// Adds a row; missing cells are empty, extra cells are dropped.
    mutating func append(_ cells: [String]) {
        var row = cells.prefix(columns.count).map(Format.printable)
        row += Array(repeating: "", count: columns.count - row.count)
        rows.append(row)
    }

    /// The table as lines, header first, each ending in a newline.
    func render() -> String {
        let all = [columns.map { $0.title.uppercased() }] + rows
        var widths = columns.map { _ in 0 }
        for row in all {
            for (index, cell) in row.enumerated() { widths[index] = max(widths[index], cell.count) }
        }
        // Columns that are empty everywhere (including the header) take no room.
        let shown = columns.indices.filter { widths[$0] > 0 }
        var output = ""
        for row in all {
            var line = ""
            for (position, index) in shown.enumerated() {
                let cell = row[index]
                let padding = String(repeating: " ", count: widths[index] - cell.count)
                let isLast = position == shown.count - 1
                if position > 0 { line += "  " }
                if columns[index].rightAligned {
                    line += padding + cell
                } else {
                    line += isLast ? cell : cell + padding
                }
            }
            while line.last == " " { line.removeLast() }
            output += line + "\n"
        }
        return output
    }
}

/// A block of "key: value" lines with the values lined up.
struct KeyValueBlock {
    private var entries: [(String, String)] = []

    /// Adds a line; a `nil` value adds nothing.
    mutating func append(_ key: String, _ value: String?) {
        if let value { entries.append((key, Format.printable(value))) }
    }

    func render() -> String {
        let width = (entries.map { $0.0.count }.max() ?? 0) + 2
        return entries.map { key, value in
            let label = key + ":"
            return label + String(repeating: " ", count: max(1, width - label.count + 1)) + value + "\n"
        }.joined()
    }
}

import ArgumentParser
import FerryControl
import Foundation

/// Parses the values users type for durations, times and job states.
enum ArgumentValues {
    /// A duration such as "30s", "5m", "1h30m", "2d", "500ms", "1.5h", or (when `bareSeconds`) "90".
    static func duration(_ text: String, bareSeconds: Bool = false) -> Double? {
        let trimmed = text.trimmingCharacters(in: .whitespaces).lowercased()
        guard !trimmed.isEmpty else { return nil }
        if bareSeconds, let seconds = Double(trimmed) {
            return seconds.isFinite && seconds >= 0 ? seconds : nil
        }
        let units: [(String, Double)] = [("ms", 0.001), ("s", 1), ("m", 60), ("h", 3600), ("d", 86_400), ("w", 604_800)]
        var rest = Substring(trimmed)
        var total = 0.0
        while !rest.isEmpty {
            let number = rest.prefix(while: { $0.isNumber || $0 == "." })
            guard !number.isEmpty, let value = Double(number) else { return nil }
            rest = rest.dropFirst(number.count)
            // Longest unit name first, so "ms" is not read as "m" followed by garbage.
            guard let (unit, factor) = units.sorted(by: { $0.0.count > $1.0.count }).first(where: { rest.hasPrefix($0.0) }) else {
                return nil
            }
            rest = rest.dropFirst(unit.count)
            total += value * factor
        }
        return total.isFinite ? total : nil
    }

    /// A point in time: a duration ago ("10m", "2h", "1d") or an RFC 3339 time.
    static func time(_ text: String, now: Date = Date()) -> Date? {
        if let seconds = duration(text) { return now.addingTimeInterval(-seconds) }
        return Timestamp.parse(text)
    }

    /// Job states from repeated and/or comma-separated values, e.g. ["failed,retrying", "held"].
    /// - Throws: `ValidationError` naming the valid states when one is unknown.
    static func states(_ values: [String]) throws -> [JobStateName] {
        var states: [JobStateName] = []
        for item in values.flatMap({ $0.split(separator: ",") }) {
            let name = item.trimmingCharacters(in: .whitespaces).lowercased()
            guard !name.isEmpty else { continue }
            guard let state = JobStateName(rawValue: name) else {
                let valid = JobStateName.allCases.map(\.rawValue).joined(separator: ", ")
                throw ValidationError("unknown state \"\(name)\"; the states are \(valid)")
            }
            if !states.contains(state) { states.append(state) }
        }
        return states
    }
}

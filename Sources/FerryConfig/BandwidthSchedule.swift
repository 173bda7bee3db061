import Foundation

/// `bandwidth_schedule = ["Mon-Fri 08:00 1MiB/s", "Mon-Fri 19:00 off", "Sat-Sun 00:00 off"]`: the
/// limit changes at these local times, each week (rclone's `--bwlimit` timetable in TOML). An entry
/// without days applies every day. The limit in force is the latest entry at or before now, going
/// back around the week.
public struct BandwidthSchedule: Sendable, Hashable {
    /// One change: on `weekdays` (1 = Sunday … 7 = Saturday, as `Calendar` counts), at `minute`
    /// after local midnight, the limit becomes `limit`.
    public struct Entry: Sendable, Hashable {
        public var weekdays: Set<Int>
        public var minute: Int
        public var limit: BandwidthLimit
    }

    public var entries: [Entry]

    /// Weekday names, Monday first, as written.
    static let dayNames = ["mon": 2, "tue": 3, "wed": 4, "thu": 5, "fri": 6, "sat": 7, "sun": 1]
    static let week = [2, 3, 4, 5, 6, 7, 1]

    /// Parses the entries; the error says which entry and why.
    public static func parse(_ lines: [String]) -> Result<BandwidthSchedule, ScheduleError> {
        var entries: [Entry] = []
        var seen: [Int: Int] = [:]  // weekday * 1440 + minute → entry index
        for (index, line) in lines.enumerated() {
            let words = line.split(separator: " ", omittingEmptySubsequences: true).map(String.init)
            guard words.count == 2 || words.count == 3 else {
                return .failure(ScheduleError(index: index, message: "\"\(line)\" is not \"[DAYS] HH:MM RATE\", e.g. \"Mon-Fri 08:00 1MiB/s\""))
            }
            if words.count == 2, parseDays(words[0]) != nil {
                return .failure(ScheduleError(index: index, message: "\"\(line)\" has no rate; write \"[DAYS] HH:MM RATE\", e.g. \"Mon-Fri 08:00 1MiB/s\""))
            }
            var weekdays = Set(week)
            if words.count == 3 {
                guard let days = parseDays(words[0]) else {
                    return .failure(ScheduleError(index: index, message: "\"\(words[0])\" is not a day or a range of days such as \"Mon-Fri\", \"Sat,Sun\""))
                }
                weekdays = days
            }
            guard let minute = parseTime(words[words.count - 2]) else {
                return .failure(ScheduleError(index: index, message: "\"\(words[words.count - 2])\" is not a time HH:MM (00:00 to 23:59)"))
            }
            guard let limit = BandwidthLimit.parse(words[words.count - 1]) else {
                return .failure(ScheduleError(index: index, message: "\"\(words[words.count - 1])\" is not a rate such as \"1MiB/s\", or \"off\""))
            }
            for day in weekdays {
                if let other = seen[day * 1440 + minute] {
                    return .failure(ScheduleError(index: index, message: "\"\(line)\" overlaps entry \(other) (\"\(lines[other])\"): two limits at the same time"))
                }
                seen[day * 1440 + minute] = index
            }
            entries.append(Entry(weekdays: weekdays, minute: minute, limit: limit))
        }
        guard !entries.isEmpty else { return .failure(ScheduleError(index: nil, message: "the schedule is empty; remove it or add entries")) }
        return .success(BandwidthSchedule(entries: entries))
    }

    /// `Mon`, `Mon-Fri`, `Fri-Mon` (across the week's end), `Sat,Sun`, `Mon-Wed,Fri`.
    static func parseDays(_ text: String) -> Set<Int>? {
        var days: Set<Int> = []
        for part in text.lowercased().split(separator: ",") {
            let ends = part.split(separator: "-", omittingEmptySubsequences: false).map { String($0.prefix(3)) }
            guard (1...2).contains(ends.count), let first = dayNames[ends[0]], let last = dayNames[ends[ends.count - 1]] else { return nil }
            var position = week.firstIndex(of: first)!
            while true {
                days.insert(week[position])
                if week[position] == last { break }
                position = (position + 1) % 7
            }
        }
        return days.isEmpty ? nil : days
    }

    /// `08:00` → 480.
    static func parseTime(_ text: String) -> Int? {
        let parts = text.split(separator: ":", omittingEmptySubsequences: false)
        guard parts.count == 2, parts[1].count == 2, let hour = Int(parts[0]), let minute = Int(parts[1]),
              (0...23).contains(hour), (0...59).contains(minute) else { return nil }
        return hour * 60 + minute
    }

    /// The limit in force at `date` and when it next changes, in `calendar`'s time zone (the
    /// system's, in ferryd). Local times that a DST change skips happen at the first instant after.
    public func limit(at date: Date, calendar: Calendar) -> (limit: BandwidthLimit, nextChange: Date?) {
        var latest: (Date, BandwidthLimit)?
        var next: Date?
        let today = calendar.startOfDay(for: date)
        for offset in -7...8 {
            guard let day = calendar.date(byAdding: .day, value: offset, to: today) else { continue }
            let weekday = calendar.component(.weekday, from: day)
            for entry in entries where entry.weekdays.contains(weekday) {
                guard let instant = calendar.date(bySettingHour: entry.minute / 60, minute: entry.minute % 60, second: 0, of: day) else { continue }
                if instant <= date {
                    if latest == nil || instant >= latest!.0 { latest = (instant, entry.limit) }
                } else if next == nil || instant < next! {
                    next = instant
                }
            }
        }
        return (latest?.1 ?? .off, next)
    }
}

/// A schedule entry that cannot be read: which (counting from 0) and why.
public struct ScheduleError: Error, Sendable {
    public var index: Int?
    public var message: String
}

extension TableReader {
    /// A `bandwidth_schedule`-style key: an array of `"[DAYS] HH:MM RATE"`.
    func bandwidthSchedule(_ key: String) -> BandwidthSchedule? {
        guard let value = table[key] else { return nil }
        guard let array = value.array, array.allSatisfy({ $0.string != nil }) else {
            context.report(path.appending(key), "expected an array of entries such as [\"Mon-Fri 08:00 1MiB/s\", \"Mon-Fri 19:00 off\"]")
            return nil
        }
        switch BandwidthSchedule.parse(array.compactMap(\.string)) {
        case .success(let schedule):
            if table["bandwidth_limit"] != nil {
                context.report(path.appending(key), "set bandwidth_limit or bandwidth_schedule, not both (the schedule's entries say the limit at every time)")
                return nil
            }
            return schedule
        case .failure(let error):
            context.report(error.index.map { path.appending(key).appending(index: $0) } ?? path.appending(key), error.message)
            return nil
        }
    }
}

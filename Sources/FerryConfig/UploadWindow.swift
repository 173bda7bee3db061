import Foundation

/// `upload_window = ["22:00-06:00", "Sat-Sun 00:00-24:00"]`: when a spool's uploads may start,
/// in local time. Outside every window, files are queued (intake goes on) but not started. A window
/// that ends before it starts runs past midnight (its days are the days it starts on).
public struct UploadWindow: Sendable, Hashable {
    /// One window: on `weekdays` (1 = Sunday … 7 = Saturday) from `start` to `end` minutes after
    /// local midnight (`end` may be 1440, or less than `start`: past midnight).
    public struct Span: Sendable, Hashable {
        public var weekdays: Set<Int>
        public var start: Int
        public var end: Int
    }

    public var spans: [Span]

    /// Parses the entries; the error says which and why.
    public static func parse(_ lines: [String]) -> Result<UploadWindow, ScheduleError> {
        var spans: [Span] = []
        for (index, line) in lines.enumerated() {
            let words = line.split(separator: " ", omittingEmptySubsequences: true).map(String.init)
            guard words.count == 1 || words.count == 2 else {
                return .failure(ScheduleError(index: index, message: "\"\(line)\" is not \"[DAYS] HH:MM-HH:MM\", e.g. \"Mon-Fri 22:00-06:00\""))
            }
            var weekdays = Set(BandwidthSchedule.week)
            if words.count == 2 {
                guard let days = BandwidthSchedule.parseDays(words[0]) else {
                    return .failure(ScheduleError(index: index, message: "\"\(words[0])\" is not a day or a range of days such as \"Mon-Fri\""))
                }
                weekdays = days
            }
            let ends = words[words.count - 1].split(separator: "-", omittingEmptySubsequences: false).map(String.init)
            guard ends.count == 2, let start = BandwidthSchedule.parseTime(ends[0]),
                  let end = ends[1] == "24:00" ? 1440 : BandwidthSchedule.parseTime(ends[1]) else {
                return .failure(ScheduleError(index: index, message: "\"\(words[words.count - 1])\" is not a span of time HH:MM-HH:MM (24:00 for midnight at its end)"))
            }
            guard start != end else {
                return .failure(ScheduleError(index: index, message: "\"\(line)\" is empty: it starts where it ends"))
            }
            spans.append(Span(weekdays: weekdays, start: start, end: end))
        }
        guard !spans.isEmpty else { return .failure(ScheduleError(index: nil, message: "no window: remove upload_window to upload at any time")) }
        return .success(UploadWindow(spans: spans))
    }

    /// Whether uploads may start at `date`, and when that next changes, in `calendar`'s time zone.
    public func state(at date: Date, calendar: Calendar) -> (open: Bool, nextChange: Date?) {
        var intervals: [(Date, Date)] = []
        let today = calendar.startOfDay(for: date)
        for offset in -8...8 {
            guard let day = calendar.date(byAdding: .day, value: offset, to: today) else { continue }
            let weekday = calendar.component(.weekday, from: day)
            for span in spans where span.weekdays.contains(weekday) {
                guard let start = Self.instant(span.start, on: day, calendar),
                      let end = Self.instant(span.end, on: span.end > span.start ? day : calendar.date(byAdding: .day, value: 1, to: day)!, calendar),
                      end > start else { continue }
                intervals.append((start, end))
            }
        }
        let open = intervals.contains { $0.0 <= date && date < $0.1 }
        // The next change: the end of the open stretch (windows may touch), or the next start.
        var next: Date?
        if open {
            var end = date
            while let covering = intervals.filter({ $0.0 <= end && end < $0.1 }).map(\.1).max() { end = covering }
            next = end
        } else {
            next = intervals.map(\.0).filter { $0 > date }.min()
        }
        return (open, next)
    }

    private static func instant(_ minute: Int, on day: Date, _ calendar: Calendar) -> Date? {
        if minute == 1440 { return calendar.date(byAdding: .day, value: 1, to: day) }
        return calendar.date(bySettingHour: minute / 60, minute: minute % 60, second: 0, of: day)
    }
}

extension TableReader {
    /// An `upload_window`-style key: an array of `"[DAYS] HH:MM-HH:MM"`.
    func uploadWindow(_ key: String) -> UploadWindow? {
        guard let value = table[key] else { return nil }
        guard let array = value.array, array.allSatisfy({ $0.string != nil }) else {
            context.report(path.appending(key), "expected an array of windows such as [\"22:00-06:00\", \"Sat-Sun 00:00-24:00\"]")
            return nil
        }
        switch UploadWindow.parse(array.compactMap(\.string)) {
        case .success(let window): return window
        case .failure(let error):
            context.report(error.index.map { path.appending(key).appending(index: $0) } ?? path.appending(key), error.message)
            return nil
        }
    }
}

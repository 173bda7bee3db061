import FerryConfig
import Foundation
import Testing

/// `bandwidth_schedule`: reading it, and the limit it gives at a local time (injected zone and dates).
@Suite("Bandwidth schedules")
struct BandwidthScheduleTests {
    static let office = ["Mon-Fri 08:00 1MiB/s", "Mon-Fri 19:00 off", "Sat-Sun 00:00 off"]

    static func calendar(_ zone: String) -> Calendar {
        var calendar = Calendar(identifier: .gregorian)
        calendar.timeZone = TimeZone(identifier: zone)!
        return calendar
    }

    static func date(_ text: String, _ calendar: Calendar) -> Date {
        let formatter = DateFormatter()
        formatter.locale = Locale(identifier: "en_US_POSIX")
        formatter.timeZone = calendar.timeZone
        formatter.dateFormat = "yyyy-MM-dd HH:mm"
        return formatter.date(from: text)!
    }

    static func schedule(_ lines: [String]) throws -> BandwidthSchedule {
        try BandwidthSchedule.parse(lines).get()
    }

    @Test("the entry in force, going back around the week, and the next change", arguments: [
        // 2026-11-23 is a Monday.
        ("2026-11-23 07:59", BandwidthLimit.off, "2026-11-23 08:00"),
        ("2026-11-23 08:00", .bytesPerSecond(1 << 20), "2026-11-23 19:00"),
        ("2026-11-27 18:59", .bytesPerSecond(1 << 20), "2026-11-27 19:00"),
        ("2026-11-29 12:00", .off, "2026-11-30 08:00"),  // Sunday: Saturday's 00:00 entry; Monday next
    ])
    func evaluation(_ at: String, _ limit: BandwidthLimit, _ next: String) throws {
        let calendar = Self.calendar("Europe/Berlin")
        let (found, change) = try Self.schedule(Self.office).limit(at: Self.date(at, calendar), calendar: calendar)
        #expect(found == limit)
        #expect(change == Self.date(next, calendar))
    }

    @Test("one entry a week wraps around: before it in the week, the last one is in force")
    func wrapsAroundTheWeek() throws {
        let calendar = Self.calendar("UTC")
        let schedule = try Self.schedule(["Wed 12:00 2MiB/s", "Fri 12:00 off"])
        #expect(schedule.limit(at: Self.date("2026-11-23 09:00", calendar), calendar: calendar).limit == .off, "Monday: Friday's entry")
        #expect(schedule.limit(at: Self.date("2026-11-26 09:00", calendar), calendar: calendar).limit == .bytesPerSecond(2 << 20))
        let daily = try Self.schedule(["06:00 off", "22:00 8MiB/s"])
        #expect(daily.limit(at: Self.date("2026-11-24 03:00", calendar), calendar: calendar).limit == .bytesPerSecond(8 << 20))
    }

    @Test("across DST: a change at a skipped local time happens when the clock reaches it; at a repeated one, once")
    func daylightSaving() throws {
        let calendar = Self.calendar("Europe/Berlin")
        let schedule = try Self.schedule(["02:30 1MiB/s", "12:00 off"])
        // 2026-03-29: 02:00 CET becomes 03:00 CEST; 02:30 does not exist.
        let spring = schedule.limit(at: Self.date("2026-03-29 01:59", calendar), calendar: calendar)
        #expect(spring.limit == .off)
        let change = try #require(spring.nextChange)
        let utc = Self.calendar("UTC")
        #expect(change >= Self.date("2026-03-29 01:00", utc) && change <= Self.date("2026-03-29 01:30", utc),
                "the 02:30 entry takes effect at 03:00-03:30 CEST (01:00-01:30 UTC), not an hour late: \(change)")
        // 2026-10-25: 03:00 CEST becomes 02:00 CET; 02:30 happens twice. The limit holds either way.
        let autumn = schedule.limit(at: Self.date("2026-10-25 01:59", calendar), calendar: calendar)
        let first = try #require(autumn.nextChange)
        #expect(schedule.limit(at: first.addingTimeInterval(1), calendar: calendar).limit == .bytesPerSecond(1 << 20))
        #expect(schedule.limit(at: first.addingTimeInterval(3600), calendar: calendar).limit == .bytesPerSecond(1 << 20))
        #expect(schedule.limit(at: first, calendar: calendar).nextChange == Self.date("2026-10-25 12:00", calendar))
    }

    @Test("mistakes name the file, line and entry", arguments: [
        ("bandwidth_schedule = [\"Mon-Fri 08:00\"]", "bandwidth_schedule[0]: \"Mon-Fri 08:00\" has no rate"),
        ("bandwidth_schedule = [\"Mon-Fri 25:00 1MiB/s\"]", "is not a time HH:MM"),
        ("bandwidth_schedule = [\"Moon 08:00 1MiB/s\"]", "\"Moon\" is not a day"),
        ("bandwidth_schedule = [\"08:00 1MiB/s\", \"Mon 08:00 off\"]", "bandwidth_schedule[1]: \"Mon 08:00 off\" overlaps entry 0"),
        ("bandwidth_schedule = []", "the schedule is empty"),
        ("bandwidth_schedule = \"08:00 1MiB/s\"", "expected an array of entries"),
        ("bandwidth_limit = \"1MiB/s\"\nbandwidth_schedule = [\"08:00 off\"]", "set bandwidth_limit or bandwidth_schedule, not both"),
        ("bandwidth_limit = \"fast\"", "bandwidth_limit: expected a rate such as \"4MiB/s\""),
        ("bandwidth_limit = \"10Mb/s\"", "bandwidth_limit: \"10Mb/s\" is ambiguous: a lowercase b means bits to some and bytes to others; write \"10MB/s\" for bytes or \"10Mbit/s\" for bits"),
        ("bandwidth_limit = \"500 kb\"", "write \"500kB/s\" for bytes or \"500kbit/s\" for bits"),
    ])
    func mistakes(_ lines: String, _ message: String) {
        for text in [lines + "\n" + minimalSpool, minimalSpool + "\n" + lines] {
            expectOneIssue(text, message)
        }
    }

    static let dayCases: [(String, Set<Int>)] = [
        ("Mon-Fri", [2, 3, 4, 5, 6]), ("Sat,Sun", [7, 1]), ("Fri-Mon", [6, 7, 1, 2]), ("mon-wed,fri", [2, 3, 4, 6]), ("Sunday", [1]),
    ]

    @Test("day ranges, lists and wrap-around", arguments: dayCases)
    func days(_ text: String, _ weekdays: Set<Int>) throws {
        let schedule = try Self.schedule(["\(text) 10:00 off"])
        #expect(schedule.entries.first?.weekdays == weekdays)
    }
}

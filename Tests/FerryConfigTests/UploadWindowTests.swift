import FerryConfig
import Foundation
import Testing

/// `upload_window`: reading it, and whether it is open at a local time.
@Suite("Upload windows")
struct UploadWindowTests {
    static let utc: Calendar = {
        var calendar = Calendar(identifier: .gregorian)
        calendar.timeZone = TimeZone(identifier: "UTC")!
        return calendar
    }()

    static func date(_ text: String) -> Date { BandwidthScheduleTests.date(text, utc) }

    @Test("open or not, and the next change", arguments: [
        // 2026-11-23 is a Monday.
        (["22:00-06:00"], "2026-11-23 21:59", false, "2026-11-23 22:00"),
        (["22:00-06:00"], "2026-11-24 03:00", true, "2026-11-24 06:00"),
        (["Mon-Fri 22:00-06:00"], "2026-11-29 03:00", false, "2026-11-30 22:00"),  // Sunday: Friday's ended Saturday 06:00
        (["Mon-Fri 22:00-06:00"], "2026-11-28 05:00", true, "2026-11-28 06:00"),   // Friday's, into Saturday
        (["Sat-Sun 00:00-24:00", "Mon-Fri 20:00-24:00"], "2026-11-28 12:00", true, "2026-11-30 00:00"),  // windows that touch
        (["12:00-13:00"], "2026-11-24 13:00", false, "2026-11-25 12:00"),
    ])
    func state(_ lines: [String], _ at: String, _ open: Bool, _ next: String) throws {
        let window = try UploadWindow.parse(lines).get()
        let (isOpen, change) = window.state(at: Self.date(at), calendar: Self.utc)
        #expect(isOpen == open)
        #expect(change == Self.date(next))
    }

    @Test("mistakes name the file, line and entry", arguments: [
        ("upload_window = [\"22:00\"]", "spool[0].upload_window[0]: \"22:00\" is not a span of time HH:MM-HH:MM"),
        ("upload_window = [\"Someday 22:00-06:00\"]", "\"Someday\" is not a day"),
        ("upload_window = [\"10:00-10:00\"]", "is empty: it starts where it ends"),
        ("upload_window = []", "no window"),
        ("max_concurrent_uploads = 0", "spool[0].max_concurrent_uploads: 0 is out of range"),
        ("priority = 1000", "spool[0].priority: 1000 is out of range; use -100 to 100"),
    ])
    func mistakes(_ line: String, _ message: String) {
        expectOneIssue(minimalSpool + "\n" + line, message)
    }
}

import FerryDelivery
import Foundation
import Testing

@Suite("Clock jump detector (pure)")
struct ClockJumpDetectorTests {
    @Test("a step is the wall clock's move less the steady clock's, from two minutes either way")
    func steps() {
        let start = Date(timeIntervalSince1970: 1_000)
        // (wall seconds moved, steady seconds moved, the step reported)
        let table: [(Double, Int64, Duration?)] = [
            (60, 60, nil),
            (60.5, 60, nil),
            (119, 0, nil),
            (120, 0, .seconds(120)),
            (60 + 56 * 365 * 86_400, 60, .seconds(56 * 365 * 86_400)),
            (60 - 3600, 60, .seconds(-3600)),
            (-59, 60, nil),
            (-60, 60, .seconds(-120)),
        ]
        for (wall, steady, expected) in table {
            var detector = ClockJumpDetector()
            #expect(detector.look(wall: start, steady: .seconds(10)) == nil, "the first look has nothing to compare")
            let step = detector.look(wall: start.addingTimeInterval(wall), steady: .seconds(10 + steady))
            #expect(step?.amount == expected, "\(wall), \(steady)")
            if let step {
                // Any reading after the step: from the last one moved by the step, to this one.
                #expect(step.readAfter == start.addingTimeInterval(wall - Double(steady))...start.addingTimeInterval(wall), "\(wall), \(steady)")
            }
        }
        var detector = ClockJumpDetector()
        _ = detector.look(wall: start, steady: .zero)
        #expect(detector.look(wall: start.addingTimeInterval(3660), steady: .seconds(60))?.amount == .seconds(3600))
        #expect(detector.look(wall: start.addingTimeInterval(3720), steady: .seconds(120)) == nil, "a step is reported once")
    }
}

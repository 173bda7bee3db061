import Foundation

/// Notices the wall clock being stepped, forward or back, while ferryd runs: between two looks it
/// compares how far the wall clock moved with how far a clock nobody sets moved (the caller's
/// steady clock, such as `ContinuousClock`). A box without a real-time clock boots at a wrong time
/// and is set right by NTP once its link is up; without this, its queued jobs would look decades
/// old (and give up for `max_age`) or wait until the clock caught up.
public struct ClockJumpDetector: Sendable {
    /// Steps smaller than this are not jumps: NTP slews small offsets, and looks take time themselves.
    public static let threshold: Duration = .seconds(120)

    /// A step of the wall clock.
    public struct Step: Sendable, Equatable {
        /// How far the clock was set (positive: forward).
        public var amount: Duration
        /// Where any time read after the step lies: from the last look's reading moved by the step,
        /// to now. A time stamped outside it was stamped before the step (inside it, it may be
        /// either, for a step back: then it is taken as after).
        public var readAfter: ClosedRange<Date>
    }

    private var last: (wall: Date, steady: Duration)?

    public init() {}

    /// The step since the last look, or `nil` for none (or the first look).
    public mutating func look(wall: Date, steady: Duration) -> Step? {
        defer { last = (wall, steady) }
        guard let last else { return nil }
        let steadyMoved = steady - last.steady
        let wallMoved = Duration.milliseconds(Int64((wall.timeIntervalSince(last.wall) * 1000).rounded()))
        let step = wallMoved - steadyMoved
        guard step >= Self.threshold || step <= .zero - Self.threshold else { return nil }
        let from = last.wall.addingTimeInterval(step.timeInterval)
        return Step(amount: step, readAfter: min(from, wall)...wall)
    }
}

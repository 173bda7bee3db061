import Foundation

/// Notices the wall clock being stepped, forward or back, while ferryd runs: between two looks it
/// compares how far the wall clock moved with how far a clock nobody sets moved (the caller's
/// steady clock, such as `ContinuousClock`). A box without a real-time clock boots at a wrong time
/// and is set right by NTP once its link is up; without this, its queued jobs would look decades
/// old (and give up for `max_age`) or wait until the clock caught up.
public struct ClockJumpDetector: Sendable {
    /// Steps smaller than this are not jumps: NTP slews small offsets, and looks take time themselves.
    public static let threshold: Duration = .seconds(120)

    private var last: (wall: Date, steady: Duration)?

    public init() {}

    /// The step since the last look (positive: the clock was set forward), or `nil` for none (or
    /// the first look).
    public mutating func look(wall: Date, steady: Duration) -> Duration? {
        defer { last = (wall, steady) }
        guard let last else { return nil }
        let steadyMoved = steady - last.steady
        let wallMoved = Duration.milliseconds(Int64((wall.timeIntervalSince(last.wall) * 1000).rounded()))
        let step = wallMoved - steadyMoved
        return step >= Self.threshold || step <= .zero - Self.threshold ? step : nil
    }
}

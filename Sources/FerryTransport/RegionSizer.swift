/// How long the next `sendfile(2)` region of a plain-HTTP body is. The no-progress watchdog hears
/// of a region only once the kernel has taken all of it, so on a slow link a region must take well
/// under `no_progress_timeout`: regions start small, grow while they go fast, and shrink when one
/// takes more than an eighth of the timeout. With a 60 s timeout, a link of about 300 bytes a
/// second (16 KiB a minute) still counts as moving; 256 KiB regions alone stalled below 4.4 KB/s.
struct RegionSizer: Sendable {
    /// The smallest region.
    static let smallest: Int64 = 16 * 1024
    /// The first region: 32 KiB takes 32 s on a link of 1 KB/s.
    static let first: Int64 = 32 * 1024

    /// The largest region (256 KiB, or less under a bandwidth limit).
    let ceiling: Int64
    /// A region that takes longer than this is too long for the link.
    let slow: Duration
    /// The length of the next region.
    private(set) var length: Int64

    init(ceiling: Int64, noProgressTimeout: Duration) {
        self.ceiling = ceiling
        slow = noProgressTimeout / 8
        length = min(ceiling, Self.first)
    }

    /// A region of `written` bytes was taken in `duration`: the next one grows (twice as long, up
    /// to the ceiling) when this one was quick, shrinks (to half, down to the smallest) when slow.
    mutating func wrote(_ written: Int64, in duration: Duration) {
        if duration > slow {
            length = max(min(Self.smallest, ceiling), length / 2)
        } else if duration < slow / 8, written >= length {
            length = min(ceiling, length * 2)
        }
    }
}

/// The bandwidth limits an upload draws from: its spool's and the daemon's (``BandwidthBucket``).
/// Every body byte an ``Uploader`` sends with a throttle goes through it, whatever the protocol and
/// the path (file regions by `sendfile`, streamed chunks over TLS, a body in memory).
public struct Throttle: Sendable {
    public var buckets: [BandwidthBucket]

    public init(buckets: [BandwidthBucket]) {
        self.buckets = buckets
    }

    /// Whether any bucket limits now.
    public var isLimiting: Bool { buckets.contains { $0.rate != nil } }

    /// Takes `bytes` from every bucket; how long to wait before sending them.
    public func take(_ bytes: Int64) -> Duration {
        buckets.map { $0.take(bytes) }.max() ?? .zero
    }

    /// The longest a wait for tokens is slept at once before it is looked at again.
    public static let waitSlice = Duration.seconds(1)

    /// Each bucket's count of forgiven debts, to hand to ``stillOwed(_:after:since:)``.
    public var debtsForgiven: [UInt64] { buckets.map(\.debtsForgiven) }

    /// Of a wait slept out in slices: what is left of `left` after `slice`, and no more than the
    /// buckets owe now, so that a limit lifted or raised meanwhile (`ferryctl limit`, a schedule)
    /// ends it early: "at once, mid-upload", not after a wait worked out at the old rate. Unless a
    /// bucket forgave part of its debt since `forgiven` (a limit lowered, even if raised again):
    /// the wait then stays, the forgiven bytes being no upload's to take.
    public func stillOwed(_ left: Duration, after slice: Duration, since forgiven: [UInt64]) -> Duration {
        let rest = max(.zero, left - slice)
        return debtsForgiven == forgiven ? min(rest, take(0)) : rest
    }

    /// How many bytes to send at a time: about a tenth of a second's worth at the tightest limit
    /// (4 KiB to `ceiling`), so the limit is smooth rather than bursts and pauses.
    public func pieceLength(ceiling: Int64) -> Int64 {
        guard let tightest = buckets.compactMap(\.rate).min() else { return ceiling }
        return min(ceiling, max(4096, tightest / 10))
    }
}

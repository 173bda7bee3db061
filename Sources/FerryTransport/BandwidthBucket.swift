import Synchronization

/// A token bucket of bytes: the bandwidth limit shared by every upload it covers (the daemon's
/// `bandwidth_limit`, or one spool's). It fills at ``rate`` bytes per second and holds at most one
/// second's worth, so a burst after a quiet spell is at most about a second's bytes. A sender takes
/// what it is about to send and waits as long as it is told: the bucket goes into debt, and the
/// next takers wait until it is paid, so uploads sharing a bucket share its rate.
public final class BandwidthBucket: Sendable {
    private struct State {
        var rate: Int64?
        var tokens: Double
        var stamp: ContinuousClock.Instant
        var forgiven: UInt64 = 0
    }

    private let state: Mutex<State>
    private let now: @Sendable () -> ContinuousClock.Instant

    /// `rate`: bytes per second, `nil` for no limit; `now`: the clock (tests inject one).
    public init(rate: Int64?, now: @escaping @Sendable () -> ContinuousClock.Instant = { ContinuousClock.now }) {
        self.now = now
        state = Mutex(State(rate: rate, tokens: Double(rate ?? 0), stamp: now()))
    }

    /// Bytes per second; `nil`: no limit.
    public var rate: Int64? { state.withLock { $0.rate } }

    /// How many times a rate change forgave part of a debt (see ``setRate(_:)``): a waiter whose
    /// wait began before such a change keeps it, the forgiven bytes being no upload's to take.
    public var debtsForgiven: UInt64 { state.withLock { $0.forgiven } }

    /// Changes the rate at once (a schedule, an operator); what was saved is kept up to the new
    /// second's worth, and so is a debt. The same rate again changes nothing (a schedule sets its
    /// rate every minute: forgiving the debt each time would let uploads run over it).
    public func setRate(_ rate: Int64?) {
        let instant = now()
        state.withLock { state in
            guard rate != state.rate else { return }
            Self.refill(&state, at: instant)
            state.rate = rate
            // At most a second's worth either way: a limit lowered after heavy traffic does not make
            // the next uploads wait out the old rate's debt at the new rate (hours, at a few KiB/s).
            if let rate {
                if state.tokens < -Double(rate) { state.forgiven &+= 1 }
                state.tokens = max(-Double(rate), min(state.tokens, Double(rate)))
            }
        }
    }

    /// Takes `bytes` from the bucket; returns how long to wait before sending them (zero when the
    /// bucket held them, or there is no limit).
    public func take(_ bytes: Int64) -> Duration {
        let instant = now()
        return state.withLock { state in
            guard let rate = state.rate, rate > 0 else { return .zero }
            Self.refill(&state, at: instant)
            state.tokens -= Double(bytes)
            guard state.tokens < 0 else { return .zero }
            return .nanoseconds(Int64((-state.tokens / Double(rate) * 1e9).rounded(.up)))
        }
    }

    private static func refill(_ state: inout State, at instant: ContinuousClock.Instant) {
        defer { state.stamp = instant }
        guard let rate = state.rate, instant > state.stamp else { return }
        let elapsed = instant - state.stamp
        let seconds = Double(elapsed.components.seconds) + Double(elapsed.components.attoseconds) / 1e18
        state.tokens = min(Double(rate), state.tokens + seconds * Double(rate))
    }
}

import Foundation

/// Exponential backoff with full jitter: before retry *n* (0-based), wait a uniformly random time
/// in `0 ... min(maxDelay, initialDelay · 2ⁿ)`.
public struct Backoff: Sendable {
    public var initialDelay: Duration
    public var maxDelay: Duration

    public init(initialDelay: Duration, maxDelay: Duration) {
        self.initialDelay = initialDelay
        self.maxDelay = maxDelay
    }

    /// The ceiling of the delay before retry `retry` (0 for the first retry).
    public func ceiling(forRetry retry: Int) -> Duration {
        let initial = initialDelay / .milliseconds(1)
        let maximum = maxDelay / .milliseconds(1)
        let factor = pow(2.0, Double(min(max(retry, 0), 62)))
        return .milliseconds(Int64(min(maximum, initial * factor)))
    }

    /// A random delay before retry `retry`: `ceiling × unit`, with `unit` uniform in [0, 1) from the
    /// generator's top 53 bits (so a fixed generator gives a predictable delay).
    public func delay<G: RandomNumberGenerator>(forRetry retry: Int, using generator: inout G) -> Duration {
        let ceiling = ceiling(forRetry: retry) / .milliseconds(1)
        return .milliseconds(Int64((ceiling * Self.unit(using: &generator)).rounded()))
    }

    /// A uniform random number in [0, 1) from the generator's top 53 bits.
    public static func unit<G: RandomNumberGenerator>(using generator: inout G) -> Double {
        Double(generator.next() >> 11) * 0x1p-53
    }

    public func delay(forRetry retry: Int) -> Duration {
        var generator = SystemRandomNumberGenerator()
        return delay(forRetry: retry, using: &generator)
    }
}

import FerryConfig
import FerryTransport
import Foundation
import Synchronization
import Testing

/// The token bucket with an injected clock, and the rates a configuration may give.
@Suite("Bandwidth: token bucket and rates (pure)")
struct BandwidthBucketTests {
    final class FakeClock: Sendable {
        let instant = Mutex(ContinuousClock.now)
        func advance(_ duration: Duration) { instant.withLock { $0 += duration } }
        var now: @Sendable () -> ContinuousClock.Instant { { [self] in self.instant.withLock { $0 } } }
    }

    @Test("a full bucket lets a second's worth go at once, then each byte waits its turn; unused time refills up to one second")
    func tokens() {
        let clock = FakeClock()
        let bucket = BandwidthBucket(rate: 1000, now: clock.now)
        #expect(bucket.take(1000) == .zero, "the first second's worth is a burst")
        #expect(bucket.take(500) == .milliseconds(500))
        #expect(bucket.take(500) == .seconds(1), "the debt grows: the next taker waits for both")
        clock.advance(.seconds(1))
        #expect(bucket.take(0) == .zero && bucket.take(1) == .milliseconds(1))
        clock.advance(.seconds(60))
        #expect(bucket.take(1000) == .zero)
        #expect(bucket.take(1) == .milliseconds(1), "a quiet minute saves one second's worth, no more")
    }

    @Test("off takes nothing; a new rate applies at once and caps what was saved")
    func rateChanges() {
        let clock = FakeClock()
        let bucket = BandwidthBucket(rate: nil, now: clock.now)
        #expect(bucket.take(1 << 30) == .zero)
        bucket.setRate(100)
        clock.advance(.seconds(10))
        #expect(bucket.take(100) == .zero)
        #expect(bucket.take(50) == .milliseconds(500))
        bucket.setRate(1000)
        #expect(bucket.take(0) == .milliseconds(50), "the debt stays, repaid at the new rate")
        bucket.setRate(nil)
        #expect(bucket.take(1 << 20) == .zero)

        // A limit lowered after heavy traffic: at most a second's worth of the old debt is kept.
        let busy = BandwidthBucket(rate: 1 << 20, now: clock.now)
        #expect(busy.take(8 << 20) == .seconds(7), "8 MiB at 1 MiB/s, one second's worth in hand")
        busy.setRate(1000)
        #expect(busy.take(0) == .seconds(1), "not 7 MiB / 1000 B/s, two hours")

        // A schedule sets its rate again every minute: the same rate forgives no debt. Eight uploads
        // of 200 KiB bodies taken at once at 2 KiB/s owe 800 s; the ninth waits for all of them.
        let scheduled = BandwidthBucket(rate: 2048, now: clock.now)
        for _ in 0..<8 { _ = scheduled.take(204_800) }
        scheduled.setRate(2048)
        #expect(scheduled.take(204_800) == .seconds(899), "not about 101 s: the rate was not lowered")
    }

    @Test("a throttle waits for its tightest bucket and sends pieces of a tenth of a second at it")
    func throttle() {
        let clock = FakeClock()
        let spool = BandwidthBucket(rate: 8000, now: clock.now)
        let global = BandwidthBucket(rate: 10_000, now: clock.now)
        let throttle = Throttle(buckets: [spool, global])
        #expect(throttle.pieceLength(ceiling: 262_144) == 4096, "at least 4 KiB")
        #expect(Throttle(buckets: [BandwidthBucket(rate: 16 << 20)]).pieceLength(ceiling: 262_144) == 262_144, "at most the ceiling")
        #expect(Throttle(buckets: [BandwidthBucket(rate: 1 << 20)]).pieceLength(ceiling: 262_144) == 104_857, "a tenth of a second")
        #expect(Throttle(buckets: [BandwidthBucket(rate: nil)]).pieceLength(ceiling: 65_536) == 65_536)
        #expect(throttle.take(10_000) == .milliseconds(250), "the spool's 8000/s is the tighter")
    }

    @Test("a wait slept in slices ends early when the limit is raised or lifted meanwhile, never later")
    func waitsLookAgain() {
        let clock = FakeClock()
        let bucket = BandwidthBucket(rate: 1000, now: clock.now)
        let throttle = Throttle(buckets: [bucket])
        let forgiven = throttle.debtsForgiven
        let wait = throttle.take(9000)
        #expect(wait == .seconds(8))
        clock.advance(.seconds(1))
        #expect(throttle.stillOwed(wait, after: .seconds(1), since: forgiven) == .seconds(7), "unchanged: the rest of the wait")
        bucket.setRate(7000)
        clock.advance(.seconds(1))
        #expect(throttle.stillOwed(.seconds(7), after: .seconds(1), since: forgiven) == .zero, "raised to 7000/s: the debt is paid")
        let again = throttle.take(21_000)
        bucket.setRate(nil)
        #expect(throttle.stillOwed(again, after: .seconds(1), since: forgiven) == .zero, "lifted: nothing owed")

        // Lowered: the bucket forgives all but a second of its debt, but a waiter keeps its wait
        // (else every upload waiting would go within a second, a burst of the forgiven bytes).
        let lowering = BandwidthBucket(rate: 1000, now: clock.now)
        let slow = Throttle(buckets: [lowering])
        let before = slow.debtsForgiven
        let long = slow.take(9000)
        lowering.setRate(100)
        clock.advance(.seconds(1))
        #expect(slow.stillOwed(long, after: .seconds(1), since: before) == .seconds(7))
        lowering.setRate(1000)
        #expect(slow.stillOwed(.seconds(7), after: .seconds(1), since: before) == .seconds(6), "lowered, then raised back: still kept")
    }

    @Test("rates as written", arguments: [
        ("4MiB/s", BandwidthLimit.bytesPerSecond(4 << 20)), ("500kB/s", .bytesPerSecond(500_000)), ("500 KiB/s", .bytesPerSecond(512_000)),
        ("10Mbit/s", .bytesPerSecond(1_250_000)), ("1.5M", .bytesPerSecond(1_572_864)), ("2G", .bytesPerSecond(2 << 30)),
        ("100 MB/s", .bytesPerSecond(100_000_000)), ("off", .off), ("OFF", .off), ("8 Mbps", .bytesPerSecond(1_000_000)), ("8 mbps", .bytesPerSecond(1_000_000)), ("1 kbit/s", .bytesPerSecond(125)),
        ("10MBps", .bytesPerSecond(10_000_000)), ("500 kBps", .bytesPerSecond(500_000)), ("100 B/s", .bytesPerSecond(100)),
    ])
    func parse(_ text: String, _ expected: BandwidthLimit) {
        #expect(BandwidthLimit.parse(text) == expected)
    }

    @Test("not rates (a lowercase b is bits to some and bytes to others: refused)", arguments: ["", "fast", "100", "0MiB/s", "-1MiB/s", "4 MiB/h", "1e3kB/s", "MiB/s", "10Mb/s", "500kb/s", "1 Gb", "2mb/s", "100b/s", "100 b"])
    func notRates(_ text: String) {
        #expect(BandwidthLimit.parse(text) == nil, "\(text)")
    }
}

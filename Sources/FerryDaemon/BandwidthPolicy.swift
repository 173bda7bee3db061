import FerryConfig
import FerryControl
import FerrySystem
import FerryTransport
import Foundation
import Logging
import Synchronization

/// Keeps each bandwidth limit in force: the daemon's and every spool's, from `bandwidth_limit` or
/// the `bandwidth_schedule` entry of the moment (local time, the system's zone, DST included). It
/// sleeps until the next change in any schedule, or until a reload rings.
final class BandwidthPolicy: Sendable {
    let runtime: DaemonRuntime
    let global: BandwidthBucket
    let logger: Logger
    private let doorbell = Doorbell()
    /// `ferryctl limit`: by scope (`*` or a spool), until the next reload or restart.
    private let overrides = Mutex<[String: BandwidthLimit]>([:])
    /// The limits applied last, by scope, and where each came from.
    private let applied = Mutex<[String: (BandwidthLimit, String)]>([:])

    init(runtime: DaemonRuntime, global: BandwidthBucket, logger: Logger) {
        self.runtime = runtime
        self.global = global
        self.logger = logger
    }

    /// The time schedules are read at. Debug builds take `FERRY_TEST_CLOCK_OFFSET` (seconds added to
    /// the system clock), so tests can put a schedule's change a moment away.
    static func now() -> Date {
        #if DEBUG
        if let text = ProcessInfo.processInfo.environment["FERRY_TEST_CLOCK_OFFSET"], let offset = TimeInterval(text) {
            return Date().addingTimeInterval(offset)
        }
        #endif
        return Date()
    }

    /// The limit in force at `date`: the schedule's, else the fixed one.
    static func limit(_ fixed: BandwidthLimit, _ schedule: BandwidthSchedule?, at date: Date) -> BandwidthLimit {
        schedule?.limit(at: date, calendar: Calendar.current).limit ?? fixed
    }

    /// The configuration changed: overrides end, look again now.
    func reloaded() {
        overrides.withLock { $0.removeAll() }
        doorbell.ring()
    }

    /// Sets `limit` for `scope` (`*` or a spool) until the next reload or restart, at once.
    func override(_ scope: String, _ limit: BandwidthLimit) {
        overrides.withLock { $0[scope] = limit }
        let bucket = scope == "*" ? global : runtime.spool(named: scope)?.bandwidth
        bucket?.setRate(limit.rate)
        applied.withLock { $0[scope] = (limit, "override") }
        doorbell.ring()
    }

    /// The limits in force, the shared one first.
    func states() -> [BandwidthState] {
        let current = applied.withLock { $0 }
        let scopes = ["*"] + runtime.configuration.spools.map(\.name)
        return scopes.compactMap { scope in
            current[scope].map { BandwidthState(scope: scope, limit: $0.0.description, bytesPerSecond: $0.0.rate, source: $0.1) }
        }
    }

    /// Applies the limits at every change until cancelled.
    func run() async {
        var previous: [String: BandwidthLimit] = [:]
        while !Task.isCancelled {
            let configuration = runtime.configuration
            let now = Self.now()
            var next: Date?
            let overridden = overrides.withLock { $0 }
            var appliedNow: [String: (BandwidthLimit, String)] = [:]
            func apply(_ scope: String, _ fixed: BandwidthLimit, _ schedule: BandwidthSchedule?, to bucket: BandwidthBucket) {
                var limit = fixed
                var source = "config"
                let name = scope == "*" ? "all spools" : "spool \(scope)"
                if let schedule {
                    source = "schedule"
                    let (scheduled, change) = schedule.limit(at: now, calendar: Calendar.current)
                    limit = scheduled
                    if let change, next == nil || change < next! { next = change }
                }
                if let override = overridden[scope] {
                    limit = override
                    source = "override"
                }
                bucket.setRate(limit.rate)
                appliedNow[scope] = (limit, source)
                if let before = previous[name], before != limit {
                    logger.notice("bandwidth limit changed", metadata: ["limit": "\(limit)", "scope": "\(name)"])
                }
                previous[name] = limit
            }
            apply("*", configuration.bandwidthLimit, configuration.bandwidthSchedule, to: global)
            for spool in configuration.spools {
                guard let bucket = runtime.spool(named: spool.name)?.bandwidth else { continue }
                apply(spool.name, spool.bandwidthLimit, spool.bandwidthSchedule, to: bucket)
            }
            applied.withLock { $0 = appliedNow }
            // Sleeps until the next change (real time runs as fast as the offset clock), or a ring;
            // with a schedule, a minute at most, so that a wall clock stepped meanwhile (NTP at
            // boot) is seen soon. Without one, nothing depends on the time.
            let change = next.map { ContinuousClock.now + .milliseconds(Int64(min(60, max(0, $0.timeIntervalSince(now))) * 1000) + 1) }
            await doorbell.wait(until: change)
        }
    }
}

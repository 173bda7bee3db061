import FerryQueue

/// Which spools may start uploads now and in what order, from their settings and what is in
/// flight: pure, so the rules read as a table. Spools outside their `upload_window` or paused start
/// nothing; a spool at its own `max_concurrent_uploads` waits for one of its uploads to end; the
/// rest form groups by `priority`, highest first, and within a group take turns (the queue's
/// ``JobStore/claimDue(now:limit:groups:rotation:)``).
public enum UploadSlots {
    /// One configured spool, as the scheduler sees it at a turn.
    public struct Spool: Sendable, Equatable {
        public var name: String
        public var priority: Int
        /// Its own `max_concurrent_uploads`, if any.
        public var cap: Int?
        public var inFlight: Int
        /// Paused, or outside its upload window.
        public var held: Bool

        public init(name: String, priority: Int = 0, cap: Int? = nil, inFlight: Int = 0, held: Bool = false) {
            self.name = name
            self.priority = priority
            self.cap = cap
            self.inFlight = inFlight
            self.held = held
        }
    }

    /// The groups to claim from, highest priority first, each in configuration order.
    public static func groups(_ spools: [Spool]) -> [[JobStore.SpoolSlots]] {
        let eligible = spools.filter { !$0.held && ($0.cap.map { $0 > 0 } ?? true) }.compactMap { spool -> (Int, JobStore.SpoolSlots)? in
            let available = spool.cap.map { $0 - spool.inFlight } ?? Int.max
            return available > 0 ? (spool.priority, JobStore.SpoolSlots(spool: spool.name, available: available)) : nil
        }
        let priorities = Set(eligible.map(\.0)).sorted(by: >)
        return priorities.map { priority in eligible.filter { $0.0 == priority }.map(\.1) }
    }

    /// The spools that start nothing now (held, or at their own limit): the scheduler does not wait
    /// for their due jobs.
    public static func waiting(_ spools: [Spool]) -> Set<String> {
        Set(spools.filter { spool in spool.held || spool.cap.map { spool.inFlight >= $0 } ?? false }.map(\.name))
    }
}

import FerryQueue
import Foundation
import Synchronization

/// Keeps the service manager informed from the scheduler's loop: a `WATCHDOG=1` at half the
/// watchdog period, and the one-line `STATUS=` (`3 queued, 1 uploading, 0 retrying, 2 failed`),
/// re-read from the queue at most every ``refreshInterval`` and sent only when it changed.
final class StatusReporter: Sendable {
    let notifier: SystemdNotifier
    let store: JobStore
    private struct Seen {
        var nextRefresh = ContinuousClock.now
        /// The newest job event and the paused spools when the line was last counted: a queue with
        /// no new event since then has the same counts, so an idle daemon does not recount.
        var eventID: Int64?
        var paused: Set<String>?
    }
    private let seen = Mutex(Seen())

    /// How often the status line is brought up to date.
    static let refreshInterval: Duration = .seconds(5)

    init(notifier: SystemdNotifier, store: JobStore) {
        self.notifier = notifier
        self.store = store
    }

    /// The longest the scheduler may sleep between turns so that the watchdog is fed in time and
    /// the status line stays current.
    var maximumSleep: Duration {
        guard notifier.isEnabled else { return .seconds(60) }
        return min(Self.refreshInterval, notifier.watchdogInterval ?? .seconds(60))
    }

    /// One scheduler turn: feed the watchdog; bring the status line up to date when due.
    func turn() async {
        notifier.watchdogIfDue()
        guard notifier.isEnabled else { return }
        let due = seen.withLock { seen -> Bool in
            guard ContinuousClock.now >= seen.nextRefresh else { return false }
            seen.nextRefresh = .now + Self.refreshInterval
            return true
        }
        guard due, let newest = try? await store.eventBounds().newest, let paused = try? await store.pausedSpools() else { return }
        let changed = seen.withLock { seen -> Bool in
            defer { (seen.eventID, seen.paused) = (newest, paused) }
            return seen.eventID != newest || seen.paused != paused
        }
        if changed, let line = await summary() { notifier.status(line) }
    }

    /// The queue in one line, or nil when the database cannot be read.
    func summary() async -> String? {
        guard let counts = try? await store.counts(), let paused = try? await store.pausedSpools() else { return nil }
        return Self.summary(counts: counts, paused: paused)
    }

    static func summary(counts: [String: [JobState: Int]], paused: Set<String>) -> String {
        var total: [JobState: Int] = [:]
        for byState in counts.values {
            for (state, count) in byState { total[state, default: 0] += count }
        }
        var line = [JobState.queued, .uploading, .retrying, .failed].map { "\(total[$0] ?? 0) \($0.rawValue)" }.joined(separator: ", ")
        if let held = total[.held], held > 0 { line += ", \(held) held" }
        if paused.contains("*") {
            line += "; paused"
        } else if !paused.isEmpty {
            line += "; paused: " + paused.sorted().joined(separator: ",")
        }
        return line
    }
}

import FerrySystem
import FerryQueue
import Foundation

/// Keeps the one-line `STATUS=` systemd shows (`3 queued, 1 uploading, 0 retrying, 2 failed`)
/// current: recounted after queue changes, at most every ``refreshInterval``, sent only when it
/// changed. It runs in its own task, so counting never delays the scheduler (whose loop feeds the
/// watchdog), and an idle queue costs nothing.
final class StatusReporter: Sendable {
    let notifier: SystemdNotifier
    let store: JobStore

    /// The shortest time between two recounts.
    static let refreshInterval: Duration = .seconds(5)

    init(notifier: SystemdNotifier, store: JobStore) {
        self.notifier = notifier
        self.store = store
    }

    /// Follows the queue until the task is cancelled.
    func run() async {
        guard notifier.isEnabled else { return }
        // The stream holds one pending change while a recount or the pause runs: nothing is missed.
        for await _ in store.changes.subscribe() {
            if let line = await summary() { notifier.status(line) }
            try? await EventLoopSleep.sleep(for: Self.refreshInterval)
        }
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

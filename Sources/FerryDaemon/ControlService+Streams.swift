import FerryControl
import FerryQueue
import FerrySystem
import Foundation
import Synchronization

/// The long-running commands: `wait` (until the queue drains) and `watch` (a stream of events).
extension ControlService {
    /// Returns when nothing is queued, uploading, retrying or settling in the spools (one spool, if
    /// given), with the jobs that failed in the current busy period: since the queue was last idle
    /// (so a file that failed before `wait` was called, in the batch it waits for, is reported), or
    /// since ferryd started. Files renamed into a spool before the request are counted: each watcher
    /// is synced first.
    func wait(_ arguments: WaitArguments, session: ControlSession) async throws -> WaitResult {
        if let spool = arguments.spool { try await checkSpoolKnown(spool) }
        if let timeout = arguments.timeoutSeconds, !(timeout >= 0 && timeout <= WaitArguments.maximumTimeoutSeconds) {
            throw ControlError(.invalidArgument, "timeout_seconds must be between 0 and \(Int(WaitArguments.maximumTimeoutSeconds))")
        }
        let started = ContinuousClock.now
        let startedAt = Date()
        let deadline = arguments.timeoutSeconds.map { started + .milliseconds(Int64($0 * 1000)) }
        let (firstEvent, _) = try await store.eventBounds()
        return try await withWakeUps(session: session) { wake, gone in
            while true {
                var settling = 0
                let names = arguments.spool.map { [$0] } ?? runtime.configuration.spools.map(\.name)
                for name in names {
                    if let watcher = runtime.watcher(named: name) { settling += await watcher.sync() }
                }
                let pending = try await store.count(inStates: JobState.pending, spool: arguments.spool)
                if pending == 0 && settling == 0 { break }
                if gone.isSet { throw ControlError(.unavailable, "the client went away") }
                if Task.isCancelled { throw ControlError(.unavailable, "ferryd is shutting down") }
                if let deadline, ContinuousClock.now >= deadline {
                    throw ControlError(.timeout, "timed out after \(DurationText.format(.now - started)): \(pending) job\(pending == 1 ? "" : "s") pending, \(settling) file\(settling == 1 ? "" : "s") settling")
                }
                // Settling files produce no queue change until they settle: look again at least every 250 ms.
                var next = ContinuousClock.now + .milliseconds(250)
                if let deadline { next = min(next, deadline) }
                await wake.wait(until: next)
            }
            let failed = try await failures(after: min(firstEvent, scheduler.busyPeriodStart), spool: arguments.spool)
            let held = try await store.count(inStates: [.held], spool: arguments.spool)
            return WaitResult(waitedSeconds: Date().timeIntervalSince(startedAt), failed: failed, held: held)
        }
    }

    /// Jobs that failed or were cancelled in events after `eventID` (and are still failed or cancelled).
    private func failures(after eventID: Int64, spool: String?) async throws -> [JobSummary] {
        var cursor = eventID
        var seen = Set<String>()
        var failed: [JobSummary] = []
        while true {
            let events = try await store.events(after: cursor, limit: 1000)
            guard let last = events.last else { break }
            cursor = last.id
            for event in events where (event.kind == .failed || event.kind == .cancelled) && (spool == nil || event.spool == spool) {
                guard seen.insert(event.jobID.rawValue).inserted, let job = try await store.job(id: event.jobID),
                      job.state == .failed || job.state == .cancelled else { continue }
                failed.append(job.summary)
            }
        }
        return failed
    }

    /// Streams events: first a ``WatchStart`` reply, then every durable job event after `since`
    /// (or from now), and progress samples, until the client goes away or the daemon stops.
    func watch(_ arguments: WatchArguments, id: JSONValue?, session: ControlSession) async throws {
        if let asked = arguments.progressInterval, !(asked >= 0 && asked <= 3600) {
            // A number past Int64's milliseconds would stop the process when converted.
            throw ControlError(.invalidArgument, "progress_interval must be between 0.2 and 3600 seconds")
        }
        let interval = max(0.2, arguments.progressInterval ?? 1)
        let withProgress = arguments.progress ?? true
        let (newest, oldest) = try await store.eventBounds()
        var cursor = newest
        var missed: EventGap?
        if let since = arguments.since {
            guard since >= 0 else { throw ControlError(.invalidArgument, "since must be an event id (≥ 0)") }
            if since > newest {
                // An id from another queue database (or the future): nothing can be replayed.
                missed = EventGap(from: newest + 1, to: since)
            } else {
                cursor = since
                let firstKept = oldest ?? newest + 1
                if since + 1 < firstKept { missed = EventGap(from: since + 1, to: firstKept - 1) }
            }
        }
        try await session.writer.send(ControlReply(id: id, result: ControlJSON.value(WatchStart(lastEventId: newest, missed: missed))))

        try await withWakeUps(session: session) { wake, gone in
            var nextProgress = ContinuousClock.now + .milliseconds(Int64(interval * 1000))
            var lastProgressWasEmpty = true
            while !gone.isSet && !Task.isCancelled {
                let events = try await store.events(after: cursor, limit: 500)
                for event in events {
                    try await session.writer.send(ControlReply(id: id, event: ControlJSON.value(event.watchEvent(showingAnswers: session.peer.access == .control))))
                    cursor = event.id
                }
                if events.count == 500 { continue }
                if withProgress && ContinuousClock.now >= nextProgress {
                    nextProgress = .now + .milliseconds(Int64(interval * 1000))
                    let uploads = activity.snapshot()
                    if !(uploads.isEmpty && lastProgressWasEmpty) {
                        try await session.writer.send(ControlReply(id: id, event: ControlJSON.value(
                            WatchEvent(type: .progress, at: Date(), uploads: uploads))))
                    }
                    lastProgressWasEmpty = uploads.isEmpty
                }
                await wake.wait(until: withProgress ? nextProgress : .now + .seconds(60))
            }
        }
    }
}

extension ControlService {
    /// Runs `body` with a doorbell rung at every queue change and when the client goes away (which
    /// also sets `gone`); the long-running commands sleep on it.
    func withWakeUps<T: Sendable>(
        session: ControlSession, _ body: (Doorbell, SetOnce) async throws -> T
    ) async throws -> T {
        let wake = Doorbell()
        let gone = SetOnce()
        let closing = session.closing.register {
            gone.set()
            wake.ring()
        }
        defer { session.closing.unregister(closing) }
        return try await withThrowingTaskGroup(of: Void.self) { group in
            let changes = store.changes.subscribe()
            group.addTask {
                for await _ in changes { wake.ring() }
            }
            defer { group.cancelAll() }
            return try await body(wake, gone)
        }
    }
}

extension JobEvent {
    /// The event as `watch` sends it.
    /// `showingAnswers`: the answer's `location` is included (for peers that may act; others see no
    /// part of a server's answer but its status).
    func watchEvent(showingAnswers: Bool = true) -> WatchEvent {
        WatchEvent(
            type: .job, id: id, at: at, job: jobID.rawValue, spool: spool, file: displayPath,
            state: JobStateName(rawValue: state.rawValue), event: JobEventName(rawValue: kind.rawValue), attempt: attempt, status: httpStatus, message: message,
            location: showingAnswers ? location : nil)
    }
}

/// Durations in words for messages ("1m 30s").
enum DurationText {
    static func format(_ duration: Duration) -> String {
        let seconds = Int(duration.seconds.rounded())
        if seconds < 60 { return "\(max(0, seconds))s" }
        if seconds < 3600 { return "\(seconds / 60)m \(seconds % 60)s" }
        return "\(seconds / 3600)h \(seconds % 3600 / 60)m"
    }
}

/// A flag that is set once, from any task.
final class SetOnce: Sendable {
    private let value = Atomic<Bool>(false)
    func set() { value.store(true, ordering: .relaxed) }
    var isSet: Bool { value.load(ordering: .relaxed) }
}

import Foundation
import Logging
import Synchronization

/// Finds the files in one spool directory that are ready to upload, and hands them over in batches.
///
/// Sources, all reconciled by the queue (which refuses to queue a file twice):
/// - a full scan at start, every `rescanInterval`, and whenever inotify reports an overflow;
/// - `IN_MOVED_TO`: a file renamed into the spool is ready at once (the producer contract);
/// - `IN_CREATE` / `IN_CLOSE_WRITE`: a file written in place is ready once its size and mtime have
///   been unchanged for `settle`.
///
/// Only regular files are taken: symlinks, FIFOs, sockets and devices are logged and skipped, and
/// nothing is ever followed through a symlink.
public final class SpoolWatcher: Sendable {
    public let settings: SpoolWatchSettings
    private let logger: Logger
    private let inputs: AsyncStream<Input>
    private let continuation: AsyncStream<Input>.Continuation
    /// Set when events had to be dropped because the loop fell behind; the next turn rescans.
    private let droppedEvents = Flag()
    /// Set by ``rescanSoon()``.
    private let retryRescan = Flag()
    /// Set when the inotify reader ended on an error: the watcher falls back to rescans.
    private let listenerFailed = Flag()
    /// The running loop's inotify listener, for ``sync()``.
    private let activeListener = Mutex<InotifyListener?>(nil)
    /// Callers of ``sync()`` waiting for the loop to reach their marker.
    private let syncWaiters = Mutex(SyncWaiters())
    private let settling = Atomic<Int>(0)
    /// Events read from inotify and not yet handled. The reader appends to it and wakes the loop
    /// (one `.events` input per batch, not per read), the loop takes everything at once: a burst of
    /// renames is queued in a few large transactions instead of one per read, and the loop does not
    /// fall behind (which costs a full rescan). Bounded by ``maxPendingEvents``.
    private let pendingEvents = Mutex(PendingEvents())

    struct PendingEvents {
        var events: [InotifyEvent] = []
        /// An `.events` input is in the stream (or being handled) for what is here.
        var signalled = false
    }

    /// The most events held for the loop; beyond it they are dropped and replaced by a full rescan.
    static let maxPendingEvents = 16_384

    enum Input: Sendable {
        /// Events are waiting in ``pendingEvents``.
        case events
        case tick
        case rescan
        /// A ``sync()`` marker: every event queued before it has been handled.
        case sync(UInt64)
    }

    struct SyncWaiters {
        var next: UInt64 = 0
        var waiting: [UInt64: CheckedContinuation<Int, Never>] = [:]
        var stopped = false
    }

    /// Files seen being written in place and not settled yet, as of the loop's last turn.
    public var settlingCount: Int { settling.load(ordering: .relaxed) }

    /// How often files still settling are re-examined.
    static let tickInterval = Duration.milliseconds(250)
    /// How many files are handed over at once.
    static let batchSize = 512

    public init(settings: SpoolWatchSettings, logger: Logger) {
        self.settings = settings
        var logger = logger
        logger[metadataKey: "spool"] = .string(settings.name)
        self.logger = logger
        // Bounded: wake-ups, ticks and sync markers wait here (events themselves wait in
        // `pendingEvents`); beyond that, inputs are dropped and replaced by a full rescan, as after an
        // inotify overflow.
        (inputs, continuation) = AsyncStream.makeStream(of: Input.self, bufferingPolicy: .bufferingOldest(64))
    }

    /// Stops the watcher: ``run(deliver:scanned:)`` returns after the input it is handling.
    public func stop() {
        continuation.finish()
    }

    /// Asks for a full rescan as soon as possible.
    public func requestRescan() {
        continuation.yield(.rescan)
    }

    /// Asks for a full rescan within ``retryRescanDelay``: files handed to `deliver` could not be
    /// taken (the queue could not be written, e.g. the state directory is full), and are in the
    /// spool still but no longer watched for.
    public func rescanSoon() {
        retryRescan.set()
        continuation.yield(.tick)
    }

    /// How soon files that could not be delivered are looked for again.
    static let retryRescanDelay = Duration.seconds(5)

    /// A barrier: returns once every change made to the spool before the call has been looked at
    /// (files renamed in are handed over), with the number of files still settling. Returns 0 at
    /// once if the watcher is not running.
    public func sync() async -> Int {
        let listener = activeListener.withLock { $0 }
        listener?.drain { events in self.post(events) }
        return await withCheckedContinuation { (waiter: CheckedContinuation<Int, Never>) in
            let token = syncWaiters.withLock { state -> UInt64? in
                if state.stopped { return nil }
                state.next += 1
                state.waiting[state.next] = waiter
                return state.next
            }
            guard let token else { return waiter.resume(returning: 0) }
            // A dropped marker leaves the waiter registered: the rescan that follows answers it.
            if case .dropped = continuation.yield(.sync(token)) { droppedEvents.set() }
        }
    }

    private func post(_ events: [InotifyEvent]) {
        let wake = pendingEvents.withLock { pending -> Bool in
            if pending.events.count + events.count > Self.maxPendingEvents {
                droppedEvents.set()
            } else {
                pending.events.append(contentsOf: events)
            }
            defer { pending.signalled = true }
            return !pending.signalled
        }
        if wake, case .dropped = continuation.yield(.events) { droppedEvents.set() }
    }

    /// Takes every event waiting for the loop.
    private func takePendingEvents() -> [InotifyEvent] {
        pendingEvents.withLock { pending in
            pending.signalled = false
            defer { pending.events = [] }
            return pending.events
        }
    }

    private func answerSync(_ tokens: [UInt64]?, settling count: Int) {
        let waiters = syncWaiters.withLock { state -> [CheckedContinuation<Int, Never>] in
            if let tokens { return tokens.compactMap { state.waiting.removeValue(forKey: $0) } }
            defer { state.waiting.removeAll() }
            return Array(state.waiting.values)
        }
        for waiter in waiters { waiter.resume(returning: count) }
    }

    /// Watches until the task is cancelled. `deliver` receives each batch of ready files and is awaited,
    /// so a slow consumer slows the watcher rather than piling up memory. `scanned` is called once,
    /// after the first full scan. `directoryProblem` is told while the spool directory cannot be
    /// opened (missing, replaced by a file, unreadable), and `nil` once it is back.
    public func run(
        deliver: @escaping @Sendable ([SpoolFile]) async -> Void, scanned: @escaping @Sendable () -> Void = {},
        directoryProblem: @escaping @Sendable (String?) -> Void = { _ in }
    ) async {
        var state = WatchState(settings: settings, logger: logger)
        state.directoryProblem = directoryProblem
        let listener: InotifyListener?
        do {
            listener = try InotifyListener()
        } catch {
            logger.warning("inotify is unavailable, falling back to rescans every 2s", metadata: ["error": "\(error)"])
            listener = nil
            state.fallbackRescan = true
        }
        state.listener = listener
        listener?.start(onEvents: { events in self.post(events) }, onFailure: { error in
            // Without its reader, files would be found only by the rescans every `rescan_interval`.
            self.listenerFailed.set()
            if case .dropped = self.continuation.yield(.events) { self.droppedEvents.set() }
            self.logger.error("stopped reading filesystem events; falling back to rescans every 2s", metadata: ["error": "\(error)"])
        })
        activeListener.withLock { $0 = listener }
        syncWaiters.withLock { $0.stopped = false }
        let timer = TickTimer(firstAt: state.nextRescan)
        let ticker = Task { [continuation] in
            await timer.run(retry: Self.tickInterval) {
                if case .dropped = continuation.yield(.tick) { return false }
                return true
            }
        }
        defer {
            ticker.cancel()
            activeListener.withLock { $0 = nil }
            listener?.stop()
            syncWaiters.withLock { $0.stopped = true }
            answerSync(nil, settling: 0)
            settling.store(0, ordering: .relaxed)
        }

        await state.fullScan(deliver: deliver, createIfMissing: true)
        scanned()
        timer.schedule(at: state.pending.isEmpty ? state.nextRescan : .now + Self.tickInterval)
        for await input in inputs {
            if Task.isCancelled { break }
            if droppedEvents.takeIfSet() {
                logger.warning("fell behind the filesystem events; rescanning")
                let waiting = syncWaiters.withLock { Array($0.waiting.keys) }
                await state.fullScan(deliver: deliver)
                answerSync(waiting, settling: state.pending.count)
            }
            if listenerFailed.takeIfSet() {
                state.fallbackRescan = true
                state.nextRescan = .now
            }
            // Any input (the tick it sent may have found the buffer full) brings a requested rescan forward.
            if retryRescan.takeIfSet() { state.nextRescan = min(state.nextRescan, .now + Self.retryRescanDelay) }
            // Every input first handles the events read so far (so a sync marker is answered only
            // after the events posted before it, and a dropped wake-up delays none for long).
            let events = takePendingEvents()
            if !events.isEmpty { await state.handle(events, deliver: deliver) }
            switch input {
            case .events:
                break
            case .tick:
                await state.tick(deliver: deliver)
            case .rescan:
                await state.fullScan(deliver: deliver)
            case .sync(let token):
                answerSync([token], settling: state.pending.count)
            }
            settling.store(state.pending.count, ordering: .relaxed)
            // Events dropped while this input was handled (a long rescan, say) are answered by a rescan
            // at the next input: make sure there is one. Ticks every 250 ms used to hide this.
            if droppedEvents.isSet, case .dropped = continuation.yield(.tick) {}
            // Settling files are looked at again soon; otherwise nothing is due before the next rescan.
            timer.schedule(at: state.pending.isEmpty ? state.nextRescan : min(state.nextRescan, .now + Self.tickInterval))
        }
    }
}

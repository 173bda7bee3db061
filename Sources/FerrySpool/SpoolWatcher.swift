import CFerrySystem
import FerrySystem
import Foundation
import Logging
import Synchronization

/// What a ``SpoolWatcher`` watches and how.
public struct SpoolWatchSettings: Sendable {
    /// The spool's name (for logs).
    public var name: String
    /// The spool directory.
    public var directory: String
    /// Whether subdirectories are watched too.
    public var recursive: Bool
    /// A file written in place is ready once its size and mtime have not changed for this long.
    public var settle: Duration
    /// How often the whole spool is rescanned, in case an event was missed.
    public var rescanInterval: Duration
    /// Directories never entered (the sent and failed directories, when they are inside the spool).
    public var excludedDirectories: [String]

    public init(
        name: String, directory: String, recursive: Bool, settle: Duration, rescanInterval: Duration,
        excludedDirectories: [String] = []
    ) {
        self.name = name
        self.directory = directory
        self.recursive = recursive
        self.settle = settle
        self.rescanInterval = rescanInterval
        self.excludedDirectories = excludedDirectories
    }
}

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

    /// How often pending files are re-examined.
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
    /// after the first full scan.
    public func run(
        deliver: @escaping @Sendable ([SpoolFile]) async -> Void, scanned: @escaping @Sendable () -> Void = {}
    ) async {
        var state = WatchState(settings: settings, logger: logger)
        let listener: InotifyListener?
        do {
            listener = try InotifyListener()
        } catch {
            logger.warning("inotify is unavailable, falling back to rescans every 2s", metadata: ["error": "\(error)"])
            listener = nil
            state.fallbackRescan = true
        }
        state.listener = listener
        listener?.start { events in self.post(events) }
        activeListener.withLock { $0 = listener }
        syncWaiters.withLock { $0.stopped = false }
        let ticker = Task {
            while !Task.isCancelled {
                try? await Task.sleep(for: Self.tickInterval)
                continuation.yield(.tick)
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
        for await input in inputs {
            if Task.isCancelled { break }
            if droppedEvents.takeIfSet() {
                logger.warning("fell behind the filesystem events; rescanning")
                let waiting = syncWaiters.withLock { Array($0.waiting.keys) }
                await state.fullScan(deliver: deliver)
                answerSync(waiting, settling: state.pending.count)
            }
            // Every input first handles the events read so far (so a sync marker is answered only
            // after the events posted before it, and a dropped wake-up delays none for long).
            let events = takePendingEvents()
            if !events.isEmpty { await state.handle(events, deliver: deliver) }
            switch input {
            case .events:
                break
            case .tick:
                if retryRescan.takeIfSet() { state.nextRescan = min(state.nextRescan, .now + Self.retryRescanDelay) }
                await state.tick(deliver: deliver)
            case .rescan:
                await state.fullScan(deliver: deliver)
            case .sync(let token):
                answerSync([token], settling: state.pending.count)
            }
            settling.store(state.pending.count, ordering: .relaxed)
        }
    }
}

/// The watcher's mutable state, owned by its `run` loop alone.
struct WatchState {
    let settings: SpoolWatchSettings
    let logger: Logger
    var listener: InotifyListener?
    var fallbackRescan = false

    /// Watch descriptor → relative path of the directory it watches (empty for the spool itself).
    var watches: [Int32: [UInt8]] = [:]
    var watchedDirectories: [[UInt8]: Int32] = [:]
    var rootWatched = false
    /// Whether "the spool directory is missing" was already logged.
    var reportedMissingRoot = false
    /// Files seen being written in place, waiting to settle.
    var pending: [[UInt8]: PendingFile] = [:]
    var nextRescan: ContinuousClock.Instant
    /// Paths already warned about (symlinks, special files), so a rescan does not repeat the warning.
    var warned: Set<[UInt8]> = []
    let excluded: Set<[UInt8]>

    struct PendingFile {
        var status: FileStatus
        var observedAt: ContinuousClock.Instant
    }

    init(settings: SpoolWatchSettings, logger: Logger) {
        self.settings = settings
        self.logger = logger
        nextRescan = .now + settings.rescanInterval
        let root = settings.directory.hasSuffix("/") ? settings.directory : settings.directory + "/"
        excluded = Set(settings.excludedDirectories.compactMap { path in
            path.hasPrefix(root) ? Array(path.dropFirst(root.count).utf8).trimmingSlashes() : nil
        })
    }

    // MARK: Scanning

    /// Scans the whole spool. At start (`createIfMissing`) a missing spool directory is created; one
    /// that disappears later is waited for, checked every second, and watched again when it returns.
    mutating func fullScan(deliver: @Sendable ([SpoolFile]) async -> Void, createIfMissing: Bool = false) async {
        nextRescan = .now + (fallbackRescan ? .seconds(2) : settings.rescanInterval)
        let root: DirectoryHandle
        do {
            root = try DirectoryHandle.open(settings.directory)
        } catch {
            if error.code == ENOENT && createIfMissing {
                do {
                    try makeDirectories(settings.directory, mode: 0o755)
                    logger.notice("created missing spool directory", metadata: ["directory": "\(settings.directory)"])
                    return await fullScan(deliver: deliver)
                } catch {
                    logger.error("spool directory is missing and cannot be created", metadata: ["error": "\(error)"])
                }
            } else if !reportedMissingRoot {
                logger.error("cannot open spool directory; will keep trying", metadata: ["error": "\(error)"])
            }
            reportedMissingRoot = true
            rootWatched = false
            nextRescan = .now + .seconds(1)
            return
        }
        if reportedMissingRoot {
            logger.notice("spool directory is back", metadata: ["directory": "\(settings.directory)"])
            reportedMissingRoot = false
        }
        if !rootWatched, listener != nil {
            rootWatched = watchDirectory([])
        }
        var batch: [SpoolFile] = []
        await scan(root, relative: [], batch: &batch, deliver: deliver)
        if !batch.isEmpty { await deliver(batch) }
    }

    private mutating func scan(
        _ directory: DirectoryHandle, relative: [UInt8], batch: inout [SpoolFile],
        deliver: @Sendable ([SpoolFile]) async -> Void
    ) async {
        let names: [[UInt8]]
        do {
            names = try directory.entryNames()
        } catch {
            logger.error("cannot read spool directory", metadata: ["error": "\(error)"])
            return
        }
        let now = ContinuousClock.now
        for name in names {
            let path = relative.isEmpty ? name : relative + [UInt8(ascii: "/")] + name
            guard let status = directory.status(of: name) else { continue }
            switch status.kind {
            case .regular:
                guard SpoolNameFilter.isCandidate(name) else { continue }
                if let ready = consider(path, status, now: now) {
                    batch.append(ready)
                    if batch.count >= SpoolWatcher.batchSize {
                        await deliver(batch)
                        batch.removeAll(keepingCapacity: true)
                    }
                }
            case .directory:
                guard settings.recursive, SpoolNameFilter.isCandidateDirectory(name), !excluded.contains(path) else { continue }
                guard let child = try? directory.openSubdirectory([name]) else { continue }
                watchDirectory(path)
                await scan(child, relative: path, batch: &batch, deliver: deliver)
            case .symlink, .special:
                guard SpoolNameFilter.isCandidate(name) else { continue }
                warnSkipped(path, status.kind)
            }
        }
    }

    /// Watches the directory at `relative`. Watching an inode already watched returns its descriptor
    /// again (a directory renamed within the spool), so the maps are corrected to its new path.
    @discardableResult
    private mutating func watchDirectory(_ relative: [UInt8]) -> Bool {
        guard let listener else { return false }
        let path = relative.isEmpty ? settings.directory : settings.directory + "/" + String(decoding: relative, as: UTF8.self)
        do {
            // The configured spool path may itself be a symlink (the administrator's choice); below
            // it, nothing is followed.
            let wd = try listener.watch(path, followSymlink: relative.isEmpty)
            if let old = watches[wd], old != relative { watchedDirectories[old] = nil }
            if let oldWatch = watchedDirectories[relative], oldWatch != wd { watches[oldWatch] = nil }
            watches[wd] = relative
            watchedDirectories[relative] = wd
            return true
        } catch {
            logger.warning(relative.isEmpty ? "cannot watch the spool directory; relying on rescans" : "cannot watch a subdirectory; relying on rescans",
                           metadata: ["error": "\(error)"])
            return false
        }
    }

    /// Whether a regular file is ready now; if not, it is remembered until it settles.
    private mutating func consider(_ path: [UInt8], _ status: FileStatus, now: ContinuousClock.Instant) -> SpoolFile? {
        if isSettledByAge(status) {
            pending[path] = nil
            return SpoolFile(relativePath: path, status: status)
        }
        if let known = pending[path], known.status.isSameVersion(as: status) { return nil }
        pending[path] = PendingFile(status: status, observedAt: now)
        return nil
    }

    /// A file whose mtime is at least `settle` in the past has not changed for `settle`.
    private func isSettledByAge(_ status: FileStatus) -> Bool {
        let settle = settings.settle
        if settle == .zero { return true }
        let nowNanoseconds = Int64(Date().timeIntervalSince1970 * 1_000_000_000)
        let age = nowNanoseconds - status.modificationTime
        let settleNanoseconds = settle.components.seconds * 1_000_000_000 + settle.components.attoseconds / 1_000_000_000
        return age >= settleNanoseconds
    }

    private mutating func warnSkipped(_ path: [UInt8], _ kind: FileStatus.Kind) {
        guard !warned.contains(path) else { return }
        if warned.count < 10_000 { warned.insert(path) }
        let what = kind == .symlink ? "a symlink (symlinks are never followed)" : "not a regular file"
        logger.warning("skipping \(what)", metadata: ["file": "\(displayName(path))"])
    }

    // MARK: Events

    mutating func handle(_ events: [InotifyEvent], deliver: @Sendable ([SpoolFile]) async -> Void) async {
        var batch: [SpoolFile] = []
        var rescan = false
        let now = ContinuousClock.now
        for event in events {
            if event.has(CFERRY_IN_Q_OVERFLOW) {
                logger.warning("inotify queue overflowed; rescanning")
                rescan = true
                continue
            }
            guard let directory = watches[event.watch] else { continue }
            if event.name.isEmpty {
                if event.has(CFERRY_IN_IGNORED) || event.has(CFERRY_IN_DELETE_SELF) {
                    forget(watch: event.watch, directory: directory)
                } else if event.has(CFERRY_IN_MOVE_SELF) {
                    // A subdirectory renamed within the spool was re-mapped by its IN_MOVED_TO already;
                    // one moved out of the spool (or the spool itself) is no longer ours to watch.
                    if directory.isEmpty || status(of: directory).map({ $0.kind != .directory }) ?? true
                        || !(watchedAt(directory) == event.watch) {
                        listener?.unwatch(event.watch)
                        forget(watch: event.watch, directory: directory)
                    }
                }
                continue
            }
            let path = directory.isEmpty ? event.name : directory + [UInt8(ascii: "/")] + event.name
            if event.has(CFERRY_IN_ISDIR) {
                guard settings.recursive, event.has(CFERRY_IN_CREATE) || event.has(CFERRY_IN_MOVED_TO),
                      SpoolNameFilter.isCandidateDirectory(event.name), !excluded.contains(path)
                else { continue }
                guard let root = try? DirectoryHandle.open(settings.directory),
                      let child = try? root.openSubdirectory(path.splitPath()) else { continue }
                watchDirectory(path)
                await scan(child, relative: path, batch: &batch, deliver: deliver)
                continue
            }
            guard SpoolNameFilter.isCandidate(event.name), let status = status(of: path) else { continue }
            switch status.kind {
            case .regular:
                if event.has(CFERRY_IN_MOVED_TO) {
                    pending[path] = nil
                    batch.append(SpoolFile(relativePath: path, status: status))
                } else if event.has(CFERRY_IN_CLOSE_WRITE) {
                    if let ready = consider(path, status, now: now) { batch.append(ready) }
                } else {
                    // IN_CREATE: the writer has only begun; wait for it to settle.
                    if pending[path] == nil { pending[path] = PendingFile(status: status, observedAt: now) }
                }
            case .symlink, .special:
                warnSkipped(path, status.kind)
            case .directory:
                break
            }
            if batch.count >= SpoolWatcher.batchSize {
                await deliver(batch)
                batch.removeAll(keepingCapacity: true)
            }
        }
        if !batch.isEmpty { await deliver(batch) }
        if rescan { await fullScan(deliver: deliver) }
    }

    /// The watch descriptor the kernel has for the directory now at `relative`, if any.
    private func watchedAt(_ relative: [UInt8]) -> Int32? {
        guard let listener else { return nil }
        let path = settings.directory + "/" + String(decoding: relative, as: UTF8.self)
        // Adding a watch for an inode already watched only returns its descriptor.
        return try? listener.watch(path)
    }

    private mutating func forget(watch: Int32, directory: [UInt8]) {
        guard watches[watch] != nil else { return }
        watches[watch] = nil
        if watchedDirectories[directory] == watch { watchedDirectories[directory] = nil }
        if directory.isEmpty {
            rootWatched = false
            logger.warning("spool directory was removed or moved away; waiting for it to come back",
                           metadata: ["directory": "\(settings.directory)"])
            // Check again soon rather than at the next full rescan.
            nextRescan = .now + .seconds(1)
        }
    }

    private func status(of path: [UInt8]) -> FileStatus? {
        guard let root = try? DirectoryHandle.open(settings.directory) else { return nil }
        if path.firstIndex(of: UInt8(ascii: "/")) == nil { return root.status(of: path) }
        guard let (parent, name) = try? root.openParent(of: path) else { return nil }
        return parent.status(of: name)
    }

    // MARK: Ticks

    mutating func tick(deliver: @Sendable ([SpoolFile]) async -> Void) async {
        let now = ContinuousClock.now
        if now >= nextRescan {
            await fullScan(deliver: deliver)
            return
        }
        guard !pending.isEmpty else { return }
        var batch: [SpoolFile] = []
        for (path, known) in pending {
            guard let status = status(of: path), status.kind == .regular else {
                pending[path] = nil
                continue
            }
            if !status.isSameVersion(as: known.status) {
                pending[path] = PendingFile(status: status, observedAt: now)
            } else if now - known.observedAt >= settings.settle || isSettledByAge(status) {
                pending[path] = nil
                batch.append(SpoolFile(relativePath: path, status: status))
            }
        }
        if !batch.isEmpty { await deliver(batch) }
    }
}

extension Array where Element == UInt8 {
    /// The path's components, split at `/`.
    func splitPath() -> [[UInt8]] {
        split(separator: UInt8(ascii: "/"), omittingEmptySubsequences: true).map(Array.init)
    }

    func trimmingSlashes() -> [UInt8] {
        var slice = self[...]
        while slice.first == UInt8(ascii: "/") { slice = slice.dropFirst() }
        while slice.last == UInt8(ascii: "/") { slice = slice.dropLast() }
        return Array(slice)
    }
}

/// A thread-safe boolean that one side sets and the other takes.
final class Flag: Sendable {
    private let value = Atomic<Bool>(false)
    func set() { value.store(true, ordering: .relaxed) }
    /// Whether it was set; clears it.
    func takeIfSet() -> Bool { value.exchange(false, ordering: .relaxed) }
}

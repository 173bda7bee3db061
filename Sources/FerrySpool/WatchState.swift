import CFerrySystem
import FerrySystem
import Foundation
import Logging

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
    /// Told while the spool directory cannot be opened (at every try), and `nil` once it is back.
    var directoryProblem: @Sendable (String?) -> Void = { _ in }
    /// Files seen being written in place, waiting to settle.
    var pending: [[UInt8]: PendingFile] = [:]
    var nextRescan: ContinuousClock.Instant
    /// Paths already warned about (symlinks, special files, bundles ferryd cannot write), so a
    /// rescan does not repeat the warning.
    var warned: Set<[UInt8]> = []
    /// Bundles already said to be unreadable: apart from `warned`, so that one made readable but
    /// still not writable gets that warning too.
    var warnedUnreadable: Set<[UInt8]> = []
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

    /// The directories the watcher never enters (the state, sent and failed directories), as device
    /// and inode, looked up now: they may be created, or re-created, at any time, and be named
    /// through symlinks. A full scan looks them up once; a directory created later, when it appears.
    func excludedInodes() -> Set<FileVersion.Inode> {
        Set(settings.excludedDirectories.compactMap { path -> FileVersion.Inode? in
            var st = stat()
            return stat(path, &st) == 0 ? FileStatus(st).version.inodeIdentity : nil
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
            directoryProblem("cannot open the spool directory \(settings.directory): \(error)")
            reportedMissingRoot = true
            rootWatched = false
            nextRescan = .now + .seconds(1)
            return
        }
        if reportedMissingRoot {
            logger.notice("spool directory is back", metadata: ["directory": "\(settings.directory)"])
            directoryProblem(nil)
            reportedMissingRoot = false
        }
        let excludedNow = excludedInodes()
        if let rootStatus = try? root.status(), excludedNow.contains(rootStatus.version.inodeIdentity) {
            logger.error("the spool directory is ferryd's state, sent or failed directory (through a symlink?); not scanning it",
                         metadata: ["directory": "\(settings.directory)"])
            return
        }
        // Every full scan, not only until it first succeeds: a filesystem mounted over the spool
        // directory, or the path rebuilt while its events were lost (an overflow), leaves the watch
        // on a directory no longer there, and inotify says nothing of a mount. The same directory
        // watched again keeps its descriptor.
        if listener != nil {
            rootWatched = watchDirectory([])
        }
        var batch: [SpoolFile] = []
        await scan(root, relative: [], excluding: excludedNow, batch: &batch, deliver: deliver)
        if !batch.isEmpty { await deliver(batch) }
        // Counted from the end: a scan longer than the interval is not followed at once by the next.
        nextRescan = .now + (fallbackRescan ? .seconds(2) : settings.rescanInterval)
        logger.debug("spool scanned", metadata: ["spool": "\(settings.name)"])
    }

    private mutating func scan(
        _ directory: DirectoryHandle, relative: [UInt8], excluding excludedNow: Set<FileVersion.Inode>, batch: inout [SpoolFile],
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
                guard isCandidateFile(name) else { continue }
                if let ready = consider(path, status, now: now) {
                    batch.append(ready)
                    if batch.count >= SpoolWatcher.batchSize {
                        await deliver(batch)
                        batch.removeAll(keepingCapacity: true)
                    }
                }
            case .directory where settings.bundles:
                guard SpoolNameFilter.isCandidate(name), !excluded.contains(path),
                      !excludedNow.contains(status.version.inodeIdentity),
                      let bundle = bundleListing(name, in: directory, at: path), usable(bundle, at: path) else { continue }
                // One seen being made (pending since its IN_CREATE) settles only by being watched.
                if let ready = consider(path, bundle.status, now: now, byAge: pending[path] == nil) {
                    batch.append(SpoolFile(relativePath: path, status: ready.status, bundle: bundle))
                    if batch.count >= SpoolWatcher.batchSize {
                        await deliver(batch)
                        batch.removeAll(keepingCapacity: true)
                    }
                }
            case .directory:
                guard settings.recursive, SpoolNameFilter.isCandidateDirectory(name), !excluded.contains(path),
                      !excludedNow.contains(status.version.inodeIdentity) else { continue }
                guard let child = try? directory.openSubdirectory([name]) else { continue }
                watchDirectory(path)
                await scan(child, relative: path, excluding: excludedNow, batch: &batch, deliver: deliver)
            case .symlink, .special:
                guard SpoolNameFilter.isCandidate(name) else { continue }
                warnSkipped(path, status.kind)
            }
        }
    }

    /// Whether a regular file called `name` may be queued: the name filter, and not a field sidecar
    /// where the spool reads them.
    private func isCandidateFile(_ name: [UInt8]) -> Bool {
        SpoolNameFilter.isCandidate(name) && !(settings.fieldSidecars && SpoolNameFilter.isFieldSidecar(name))
    }

    /// Watches the directory at `relative`. Watching an inode already watched returns its descriptor
    /// again (a directory renamed within the spool), so the maps are corrected to its new path.
    @discardableResult
    private mutating func watchDirectory(_ relative: [UInt8]) -> Bool {
        guard let listener else { return false }
        let path = relative.isEmpty ? Array(settings.directory.utf8) : Array(settings.directory.utf8) + [UInt8(ascii: "/")] + relative
        do {
            // The configured spool path may itself be a symlink (the administrator's choice); below
            // it, nothing is followed.
            let wd = try listener.watch(path, followSymlink: relative.isEmpty)
            if let old = watches[wd], old != relative { watchedDirectories[old] = nil }
            if let oldWatch = watchedDirectories[relative], oldWatch != wd {
                // Another directory was watched at this path (it moved away unseen, an overflow):
                // the kernel's watch goes too, or it would count against max_user_watches for ever.
                watches[oldWatch] = nil
                listener.unwatch(oldWatch)
            }
            watches[wd] = relative
            watchedDirectories[relative] = wd
            return true
        } catch {
            logger.warning(relative.isEmpty ? "cannot watch the spool directory; relying on rescans" : "cannot watch a subdirectory; relying on rescans",
                           metadata: ["error": "\(error)"])
            return false
        }
    }

    /// Whether a regular file is ready now; if not, it is remembered until it settles. `byAge`: an
    /// mtime at least `settle` old is enough (not for a bundle seen being made: see ``tick(deliver:)``).
    private mutating func consider(_ path: [UInt8], _ status: FileStatus, now: ContinuousClock.Instant, byAge: Bool = true) -> SpoolFile? {
        if settings.settle == .zero || (byAge && isSettledByAge(status)) {
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

    /// Whether a bundle may be queued: ferryd must be able to delete or move it once it is sent.
    /// One it cannot (a producer's `mkdir` under umask 022 in the shared spool) stays where it is,
    /// unsent, with a warning, rather than being sent and then stuck hidden under its claim name.
    private mutating func usable(_ bundle: BundleListing, at path: [UInt8]) -> Bool {
        if bundle.writable { return true }
        if !warned.contains(path) {
            if warned.count < 10_000 { warned.insert(path) }
            logger.error("not sending a bundle ferryd could not delete or move afterwards: the directory is not writable by ferryd; have the producer make it group-writable (umask 002, or chmod g+w)",
                         metadata: ["bundle": "\(displayName(path))", "mode": "\(String(bundle.directory.mode & 0o7777, radix: 8))"])
        }
        return false
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
                        if !directory.isEmpty { unwatchMovedOut(below: directory) }
                    }
                }
                continue
            }
            let path = directory.isEmpty ? event.name : directory + [UInt8(ascii: "/")] + event.name
            if event.has(CFERRY_IN_ISDIR) && settings.bundles {
                guard event.has(CFERRY_IN_CREATE) || event.has(CFERRY_IN_MOVED_TO), SpoolNameFilter.isCandidate(event.name),
                      !excluded.contains(path), let bundle = bundleListing(path),
                      !excludedInodes().contains(bundle.directory.version.inodeIdentity) else { continue }
                if event.has(CFERRY_IN_MOVED_TO) {
                    // Renamed in: built elsewhere, complete (the producer contract for bundles).
                    pending[path] = nil
                    guard usable(bundle, at: path) else { continue }
                    batch.append(SpoolFile(relativePath: path, status: bundle.status, bundle: bundle))
                } else if pending[path] == nil {
                    pending[path] = PendingFile(status: bundle.status, observedAt: now)
                }
                if batch.count >= SpoolWatcher.batchSize {
                    await deliver(batch)
                    batch.removeAll(keepingCapacity: true)
                }
                continue
            }
            if event.has(CFERRY_IN_ISDIR) {
                guard settings.recursive, event.has(CFERRY_IN_CREATE) || event.has(CFERRY_IN_MOVED_TO),
                      SpoolNameFilter.isCandidateDirectory(event.name), !excluded.contains(path),
                      let entered = status(of: path), !excludedInodes().contains(entered.version.inodeIdentity)
                else { continue }
                guard let root = try? DirectoryHandle.open(settings.directory),
                      let child = try? root.openSubdirectory(path.splitPath()) else { continue }
                watchDirectory(path)
                await scan(child, relative: path, excluding: excludedInodes(), batch: &batch, deliver: deliver)
                continue
            }
            guard isCandidateFile(event.name), let status = status(of: path) else { continue }
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
        let path = Array(settings.directory.utf8) + [UInt8(ascii: "/")] + relative
        // Adding a watch for an inode already watched only returns its descriptor.
        return try? listener.watch(path)
    }

    /// The watches below a directory moved out of the spool: only the moved directory hears
    /// `IN_MOVE_SELF`, and the kernel keeps the others, each counting against `max_user_watches`
    /// for as long as ferryd runs. They moved with it (a rename within the spool was re-mapped by
    /// its `IN_MOVED_TO` first); a directory made at one of their paths since is watched by its own
    /// `IN_CREATE` or the next scan. Nothing is looked up by path here: below the spool a path may
    /// now pass through a symlink.
    private mutating func unwatchMovedOut(below directory: [UInt8]) {
        let prefix = directory + [UInt8(ascii: "/")]
        for (path, watch) in watchedDirectories where path.starts(with: prefix) {
            listener?.unwatch(watch)
            forget(watch: watch, directory: path)
        }
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

    /// What the bundle directory at `path` holds now, if it is one.
    private mutating func bundleListing(_ path: [UInt8]) -> BundleListing? {
        guard let root = try? DirectoryHandle.open(settings.directory) else { return nil }
        return bundleListing(path, in: root, at: path)
    }

    /// The listing of the bundle `name` in `directory` (at `path` in the spool), or nil: gone, or
    /// unreadable (said once, as an error: a producer's `mkdir` under umask 077 is never sent).
    private mutating func bundleListing(_ name: [UInt8], in directory: DirectoryHandle, at path: [UInt8]) -> BundleListing? {
        do {
            return try BundleListing.read(name, in: directory)
        } catch {
            if error.code != ENOENT, error.code != ENOTDIR, !warnedUnreadable.contains(path) {
                if warnedUnreadable.count < 10_000 { warnedUnreadable.insert(path) }
                logger.error("not sending a bundle ferryd cannot read; have the producer make it readable and writable by ferryd (umask 002, or chmod g+rwx)",
                             metadata: ["bundle": "\(displayName(path))", "error": "\(error)"])
            }
            return nil
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
            let isBundle = known.status.kind == .directory
            let bundle = isBundle ? bundleListing(path) : nil
            // A bundle that cannot be listed now (gone, unreadable) is left to the rescans, never
            // queued as the plain directory it is.
            guard let status = isBundle ? bundle?.status : status(of: path), status.kind == known.status.kind else {
                pending[path] = nil
                continue
            }
            if !status.isSameVersion(as: known.status) {
                pending[path] = PendingFile(status: status, observedAt: now)
            } else if now - known.observedAt >= settings.settle || (!isBundle && isSettledByAge(status)) {
                // A bundle made in place settles only by being watched: its files' times may be old
                // (`cp -p`, `tar x`) while the next one is still to come.
                pending[path] = nil
                if let bundle, !usable(bundle, at: path) { continue }
                batch.append(SpoolFile(relativePath: path, status: status, bundle: bundle))
            }
        }
        if !batch.isEmpty { await deliver(batch) }
    }
}

import FerryConfig
import FerryControl
import FerryMultipart
import FerryQueue
import FerrySpool
import FerrySystem
import FerryTransport
import Foundation
import Logging
import NIOCore
import ServiceLifecycle
import Synchronization
import UnixSignals

/// `ferryd`: watches the configured spools and uploads what lands in them.
///
/// Start-up order: take the state directory's lock, open (and check) the queue, recover from the
/// previous run (uploads in flight go back to the queue, pending dispositions are finished, orphaned
/// bodies are removed), scan every spool once, then report ready and start uploading. On graceful
/// shutdown no new upload starts; those in flight get `shutdown_timeout` to finish.
public final class FerryDaemon: Service, Sendable {
    public let configuration: FerryConfiguration
    private let logger: Logger
    private let onReady: @Sendable () -> Void
    private let notifier: SystemdNotifier
    private let scheduler = Mutex<Scheduler?>(nil)

    /// - Parameters:
    ///   - notifier: tells systemd about start-up, reloads, shutdown and the queue (`Type=notify`), and
    ///     feeds its watchdog from the scheduler's loop; by default, nothing is sent.
    ///   - onReady: called once recovery and the first scan of every spool are done.
    public init(configuration: FerryConfiguration, logger: Logger, notifier: SystemdNotifier? = nil, onReady: @escaping @Sendable () -> Void = {}) {
        self.configuration = configuration
        self.logger = logger
        self.notifier = notifier ?? SystemdNotifier(environment: [:], logger: logger)
        self.onReady = onReady
    }

    public func run() async throws {
        let state = try StateDirectory(path: configuration.stateDirectory)
        let store: JobStore
        do {
            store = try JobStore(path: state.databasePath)
        } catch {
            throw DaemonError.queue(error)
        }
        defer { try? store.close() }
        state.protectDatabase()

        // Recovery.
        notifier.status("recovering the queue")
        let requeued = try await store.requeueInterrupted(now: Date())
        let orphans = state.removeOrphanedBodies()
        if requeued > 0 || orphans > 0 {
            logger.notice("recovered from the previous run", metadata: [
                "requeued_uploads": "\(requeued)", "removed_bodies": "\(orphans)",
            ])
        }

        let uploaders = UploaderPool()
        defer { uploaders.shutdown() }
        let io = BlockingIO(threads: configuration.maxConcurrentUploads)
        let parts = SenderParts(store: store, bodies: BodyBuilder(directory: state.bodiesPath), io: io)
        let registry = SpoolRegistry(try uploaders.runtimes(for: configuration, parts: parts))
        let runtime = DaemonRuntime(configuration: configuration)
        let problems = LocalProblems()
        let intake = Intake(store: store, logger: logger, problems: problems)
        let activity = ActiveJobs()
        let pipeline = JobPipeline(
            store: store, bodies: parts.bodies, spools: registry, activity: activity, logger: logger, io: io,
            problems: problems,
            requeue: { spool, path in
                guard let runtime = registry[spool], let status = runtime.files.status(path), status.kind == .regular else { return }
                await intake.submit(spool: spool, files: [SpoolFile(relativePath: path, status: status)])
            })
        let chores = Chores(store: store, pipeline: pipeline, logger: logger)
        let paused = (try? await store.pausedSpools()) ?? []
        if !paused.isEmpty {
            logger.notice("uploads are paused (ferryctl resume to continue)", metadata: ["spools": "\(paused.sorted().joined(separator: ","))"])
        }
        let eventsBefore = (try? await store.eventBounds().newest) ?? 0
        let reporter = StatusReporter(notifier: notifier, store: store)
        let notifier = self.notifier
        let scheduler = Scheduler(
            store: store, pipeline: pipeline, maxConcurrentUploads: configuration.maxConcurrentUploads, paused: paused,
            eventsBefore: eventsBefore, logger: logger,
            wakeBy: { notifier.nextWatchdogDue },
            onTurn: { notifier.watchdogIfDue() })
        intake.onQueued = { scheduler.wake() }
        self.scheduler.withLock { $0 = scheduler }
        let meter = ThroughputMeter()
        let control = ControlServer(
            path: configuration.controlSocket, access: configuration.control,
            service: ControlService(store: store, runtime: runtime, scheduler: scheduler, pipeline: pipeline, meter: meter, logger: logger),
            logger: logger)
        // `metrics_listen`: bound before the control socket, so a port in use stops start-up leaving nothing behind.
        let metricsServer = try await MetricsServer.bind(configuration.metricsListen, scrape: { try await control.service.metrics().prometheus }, logger: logger)
        let listener: (NIOAsyncChannel<NIOAsyncChannel<ControlFrame, ByteBuffer>, Never>, created: Bool)
        do {
            listener = try await control.bind()
        } catch let error as DaemonError {
            throw error
        } catch {
            throw DaemonError.other("cannot listen on control_socket \(configuration.controlSocket): \(error)")
        }

        await chores.finishPendingDispositions()

        await withGracefulShutdownHandler {
            await withDiscardingTaskGroup { group in
                group.addTask { await control.serve(listener.0, created: listener.created) }
                if let metricsServer { group.addTask { await metricsServer.serve() } }
                group.addTask {
                    while !Task.isCancelled {
                        meter.sample(total: activity.totalBytesSent.load(ordering: .relaxed))
                        try? await Task.sleep(for: .seconds(1))
                    }
                }
                // Watchers: each scans its spool once, then follows events. A reload stops some and starts others.
                let (starts, startWatcher) = AsyncStream.makeStream(of: (SpoolWatcher, @Sendable () -> Void).self)
                group.addTask {
                    await withDiscardingTaskGroup { watchers in
                        for await (watcher, scanned) in starts {
                            watchers.addTask {
                                await watcher.run(
                                    deliver: { files in
                                        // Files the queue could not take are looked for again soon, not at the next full rescan.
                                        if !(await intake.submit(spool: watcher.settings.name, files: files)) { watcher.rescanSoon() }
                                    },
                                    scanned: scanned)
                            }
                        }
                        watchers.cancelAll()
                    }
                }
                notifier.status("scanning \(configuration.spools.count) spool\(configuration.spools.count == 1 ? "" : "s")")
                let scanned = ScanCountdown(count: configuration.spools.count)
                for spool in configuration.spools {
                    let watcher = Self.watcher(for: spool, rescanInterval: configuration.rescanInterval, logger: logger)
                    runtime.setWatcher(watcher, for: spool.name)
                    startWatcher.yield((watcher, { scanned.done() }))
                }
                // SIGHUP reloads the configuration, as `ferryctl reload` does.
                let hangups = await UnixSignalsSequence(trapping: .sighup)
                group.addTask {
                    for await _ in hangups {
                        do {
                            _ = try await runtime.reload(reason: "SIGHUP")
                        } catch let error as ControlError where error.code == .unavailable {
                            self.logger.warning("SIGHUP ignored: ferryd is still starting; send it again once it is ready")
                        } catch {}
                    }
                }
                await scanned.wait()
                logger.info("ready", metadata: [
                    "spools": "\(configuration.spools.map(\.name).joined(separator: ","))",
                    "state_directory": "\(configuration.stateDirectory)",
                    "control_socket": "\(configuration.controlSocket)",
                ])
                // Reloads only once started, so that READY=1 never comes before the first scan.
                runtime.setReloader { reason in
                    notifier.reloading()
                    do {
                        let result = try await self.reload(runtime: runtime, registry: registry, uploaders: uploaders, parts: parts, scheduler: scheduler,
                                                           startWatcher: { startWatcher.yield(($0, {})) }, reason: reason)
                        notifier.ready(status: await reporter.summary() ?? "configuration reloaded")
                        return result
                    } catch {
                        notifier.ready(status: "configuration reload rejected; the running configuration stays (see the log)")
                        throw error
                    }
                }
                notifier.ready(status: await reporter.summary() ?? "ready")
                group.addTask { await reporter.run() }
                group.addTask { await chores.run() }
                onReady()
                await scheduler.run(shutdownTimeout: { runtime.configuration.shutdownTimeout })
                startWatcher.finish()
                group.cancelAll()
            }
        } onGracefulShutdown: {
            self.logger.notice("shutting down: no new uploads will start")
            let scheduler = self.scheduler.withLock { $0 }
            let inFlight = scheduler?.inFlight ?? 0
            self.notifier.stopping(status: inFlight == 0 ? "stopping" : "stopping: waiting for \(inFlight) upload\(inFlight == 1 ? "" : "s") in flight")
            scheduler?.beginShutdown()
        }
        await io.shutdown()
        logger.info("stopped")
    }

    static func watcher(for spool: SpoolConfiguration, rescanInterval: Duration, logger: Logger) -> SpoolWatcher {
        SpoolWatcher(settings: SpoolWatchSettings(
            name: spool.name, directory: spool.directory, recursive: spool.recursive, settle: spool.settle,
            rescanInterval: rescanInterval, excludedDirectories: [spool.sentDirectory, spool.failedDirectory]), logger: logger)
    }

    /// Re-reads the configuration file and applies what can change while running: spools (added,
    /// removed, changed), `max_concurrent_uploads`, `rescan_interval` and `shutdown_timeout`. An
    /// invalid file changes nothing. Uploads in flight finish with the settings they started with.
    private func reload(
        runtime: DaemonRuntime, registry: SpoolRegistry, uploaders: UploaderPool, parts: SenderParts, scheduler: Scheduler,
        startWatcher: @Sendable (SpoolWatcher) -> Void, reason: String
    ) async throws -> ReloadResult {
        let old = runtime.configuration
        let new: FerryConfiguration
        do {
            new = try ConfigurationLoader.fromProcessEnvironment().load(path: old.path)
        } catch {
            logger.error("configuration reload rejected; the running configuration stays", metadata: ["reason": "\(reason)", "error": "\(error)"])
            throw ControlError(.invalidConfiguration, "\(old.path) is invalid; the running configuration stays:\n\(error)")
        }
        let runtimes: [String: SpoolRuntime]
        do {
            runtimes = try uploaders.runtimes(for: new, parts: parts)
        } catch {
            throw ControlError(.invalidConfiguration, "\(error); the running configuration stays")
        }
        var applied: [String] = []
        var restart: [String] = []
        if new.stateDirectory != old.stateDirectory { restart.append("state_directory") }
        if new.controlSocket != old.controlSocket { restart.append("control_socket") }
        if new.control != old.control { restart.append("control_group / control_read_only_for_others / control_idle_timeout") }
        if new.logLevel != old.logLevel { restart.append("log_level") }
        if new.metricsListen != old.metricsListen { restart.append("metrics_listen") }
        if new.maxConcurrentUploads != old.maxConcurrentUploads {
            scheduler.maxConcurrentUploads = new.maxConcurrentUploads
            applied.append("max_concurrent_uploads = \(new.maxConcurrentUploads)")
        }
        if new.shutdownTimeout != old.shutdownTimeout { applied.append("shutdown_timeout = \(DurationParser.format(new.shutdownTimeout))") }
        let rescanChanged = new.rescanInterval != old.rescanInterval
        if rescanChanged { applied.append("rescan_interval = \(DurationParser.format(new.rescanInterval))") }

        registry.replace(with: runtimes)
        runtime.update(configuration: new)
        for spool in old.spools where new.spool(named: spool.name) == nil {
            runtime.removeWatcher(for: spool.name)?.stop()
            applied.append("spool \(spool.name) removed (its queued jobs wait until it is configured again)")
        }
        for spool in new.spools {
            let previous = old.spool(named: spool.name)
            if previous == spool && !rescanChanged { continue }
            if let previous, previous != spool { applied.append("spool \(spool.name) changed") }
            if previous == nil { applied.append("spool \(spool.name) added") }
            runtime.removeWatcher(for: spool.name)?.stop()
            let watcher = Self.watcher(for: spool, rescanInterval: new.rescanInterval, logger: logger)
            runtime.setWatcher(watcher, for: spool.name)
            startWatcher(watcher)
        }
        scheduler.wake()
        logger.notice("configuration reloaded", metadata: [
            "reason": "\(reason)", "applied": "\(applied.isEmpty ? "nothing changed" : applied.joined(separator: "; "))",
            "restart_required": "\(restart.joined(separator: ", "))",
        ])
        return ReloadResult(applied: applied, restartRequired: restart)
    }
}

/// One uploader (connection pool) per distinct transport setting, shared by the spools that use it.
final class UploaderPool: Sendable {
    private let uploaders = Mutex<[TransportSettings: Uploader]>([:])

    /// The spools' run-time parts, creating the uploaders they need.
    func runtimes(for configuration: FerryConfiguration, parts: SenderParts) throws(DaemonError) -> [String: SpoolRuntime] {
        var spools: [String: SpoolRuntime] = [:]
        for spool in configuration.spools {
            let settings = TransportSettings(caFile: spool.caFile, connectTimeout: spool.connectTimeout, noProgressTimeout: spool.noProgressTimeout)
            let uploader: Uploader
            do {
                uploader = try uploaders.withLock { uploaders in
                    if let existing = uploaders[settings] { return existing }
                    let created = try Uploader(settings: settings)
                    uploaders[settings] = created
                    return created
                }
            } catch {
                throw .other("spool \(spool.name): cannot set up TLS: \(error)")
            }
            spools[spool.name] = SpoolRuntime(configuration: spool, uploader: uploader, parts: parts)
        }
        return spools
    }

    func shutdown() {
        for uploader in uploaders.withLock({ Array($0.values) }) { try? uploader.syncShutdown() }
    }
}

/// The parts of the running daemon that a configuration reload replaces, for the control commands.
final class DaemonRuntime: Sendable {
    private struct State {
        var configuration: FerryConfiguration
        var watchers: [String: SpoolWatcher] = [:]
        var reloader: (@Sendable (String) async throws -> ReloadResult)?
        var reloading = false
    }
    private let state: Mutex<State>

    init(configuration: FerryConfiguration) {
        state = Mutex(State(configuration: configuration))
    }

    /// The configuration in force.
    var configuration: FerryConfiguration { state.withLock { $0.configuration } }

    func update(configuration: FerryConfiguration) { state.withLock { $0.configuration = configuration } }

    func watcher(named name: String) -> SpoolWatcher? { state.withLock { $0.watchers[name] } }

    func setWatcher(_ watcher: SpoolWatcher, for name: String) { state.withLock { $0.watchers[name] = watcher } }

    func removeWatcher(for name: String) -> SpoolWatcher? { state.withLock { $0.watchers.removeValue(forKey: name) } }

    func setReloader(_ reloader: @escaping @Sendable (String) async throws -> ReloadResult) {
        state.withLock { $0.reloader = reloader }
    }

    /// Re-reads the configuration (one reload at a time).
    func reload(reason: String) async throws -> ReloadResult {
        let reloader = try state.withLock { state -> (@Sendable (String) async throws -> ReloadResult) in
            guard let reloader = state.reloader else { throw ControlError(.unavailable, "ferryd is still starting; try again") }
            guard !state.reloading else { throw ControlError(.conflict, "a reload is already in progress") }
            state.reloading = true
            return reloader
        }
        defer { state.withLock { $0.reloading = false } }
        return try await reloader(reason)
    }
}

/// Hands files found by the watchers to the queue, and wakes the scheduler when any is new.
final class Intake: Sendable {
    let store: JobStore
    let logger: Logger
    /// Where a spool whose files cannot be queued says so (for `status`).
    let problems: LocalProblems
    private let queuedHook = Mutex<(@Sendable () -> Void)?>(nil)

    init(store: JobStore, logger: Logger, problems: LocalProblems = LocalProblems()) {
        self.store = store
        self.logger = logger
        self.problems = problems
    }

    var onQueued: (@Sendable () -> Void)? {
        get { queuedHook.withLock { $0 } }
        set { queuedHook.withLock { $0 = newValue } }
    }

    /// Queues `files`; returns whether the queue took them (false: they stay in the spool, unqueued).
    @discardableResult
    func submit(spool: String, files: [SpoolFile]) async -> Bool {
        let discovered = files.map {
            JobStore.DiscoveredFile(spool: spool, relativePath: $0.relativePath, identity: FileIdentity($0.status))
        }
        do {
            let jobs = try await store.enqueue(discovered, now: Date(), makeBoundary: { MultipartBoundary.random().value })
            for job in jobs {
                logger.info("queued", metadata: ["job": "\(job.id)", "spool": "\(spool)", "file": "\(job.displayPath)", "bytes": "\(job.identity.size)"])
            }
            if !jobs.isEmpty { onQueued?() }
            problems.resolvedIntake(spool: spool)
            return true
        } catch {
            logger.error("cannot queue files; they stay in the spool and are looked for again in a few seconds",
                         metadata: ["spool": "\(spool)", "files": "\(files.count)", "error": "\(error)"])
            problems.reportIntake(spool: spool, "cannot queue files: \(error)")
            return false
        }
    }
}

/// Periodic work in its own task: finishing dispositions that failed before (a full disk, a
/// directory that was not writable) and pruning the event log.
final class Chores: Sendable {
    let store: JobStore
    let pipeline: JobPipeline
    let logger: Logger

    /// How many job events `watch` can replay.
    static let eventsKept: Int64 = 100_000

    init(store: JobStore, pipeline: JobPipeline, logger: Logger) {
        self.store = store
        self.pipeline = pipeline
        self.logger = logger
    }

    /// Runs until cancelled, in its own task (never in the scheduler's loop, whose turns feed the
    /// watchdog): pending dispositions every minute, event pruning every hour.
    func run() async {
        var minutes = 0
        while !Task.isCancelled {
            try? await Task.sleep(for: .seconds(60))
            if Task.isCancelled { return }
            await finishPendingDispositions()
            if minutes % 60 == 0 { _ = try? await store.pruneEvents(keep: Self.eventsKept) }
            minutes += 1
        }
    }

    /// Applies the disposition of every final job whose file was not dealt with yet, except those a
    /// pipeline is still handling, a page at a time.
    func finishPendingDispositions() async {
        var after: Int64 = 0
        while true {
            guard let jobs = try? await store.pendingDispositions(after: after, limit: 64), let last = jobs.last else { return }
            after = last.sequence ?? after
            for job in jobs where !pipeline.isActive(job) {
                guard let spool = pipeline.spools[job.spool] else { continue }
                if await pipeline.disposer.dispose(job, spool: spool.configuration, files: spool.files) != nil {
                    pipeline.bodies.remove(for: job)
                }
            }
        }
    }
}

/// Counts down the watchers' first scans.
final class ScanCountdown: Sendable {
    private let remaining: Mutex<Int>
    private let doorbell = Doorbell()

    init(count: Int) { remaining = Mutex(count) }

    func done() {
        if remaining.withLock({ $0 -= 1; return $0 }) <= 0 { doorbell.ring() }
    }

    func wait() async {
        while remaining.withLock({ $0 }) > 0 { await doorbell.wait(until: nil) }
    }
}

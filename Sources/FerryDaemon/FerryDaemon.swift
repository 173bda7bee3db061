import FerryConfig
import FerryMultipart
import FerryQueue
import FerrySpool
import FerrySystem
import FerryTransport
import Foundation
import Logging
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
    private let scheduler = Mutex<Scheduler?>(nil)

    /// - Parameter onReady: called once recovery and the first scan of every spool are done.
    public init(configuration: FerryConfiguration, logger: Logger, onReady: @escaping @Sendable () -> Void = {}) {
        self.configuration = configuration
        self.logger = logger
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
        let requeued = try await store.requeueInterrupted(now: Date())
        let orphans = state.removeOrphanedBodies()
        if requeued > 0 || orphans > 0 {
            logger.notice("recovered from the previous run", metadata: [
                "requeued_uploads": "\(requeued)", "removed_bodies": "\(orphans)",
            ])
        }

        // One uploader (connection pool) per distinct transport setting.
        var uploaders: [TransportSettings: Uploader] = [:]
        var spools: [String: SpoolRuntime] = [:]
        for spool in configuration.spools {
            let settings = TransportSettings(caFile: spool.caFile, connectTimeout: spool.connectTimeout, noProgressTimeout: spool.noProgressTimeout)
            let uploader: Uploader
            if let existing = uploaders[settings] {
                uploader = existing
            } else {
                do {
                    uploader = try Uploader(settings: settings)
                } catch {
                    throw DaemonError.other("spool \(spool.name): cannot set up TLS: \(error)")
                }
                uploaders[settings] = uploader
            }
            spools[spool.name] = SpoolRuntime(configuration: spool, uploader: uploader)
        }
        defer {
            for uploader in uploaders.values { try? uploader.syncShutdown() }
        }

        let intake = Intake(store: store, logger: logger)
        let runtimes = spools
        let io = BlockingIO(threads: configuration.maxConcurrentUploads)
        let pipeline = JobPipeline(
            store: store, bodies: BodyBuilder(directory: state.bodiesPath), spools: runtimes, logger: logger, io: io,
            requeue: { spool, path in
                guard let runtime = runtimes[spool], let status = runtime.files.status(path), status.kind == .regular else { return }
                await intake.submit(spool: spool, files: [SpoolFile(relativePath: path, status: status)])
            })
        let chores = Chores(store: store, pipeline: pipeline, logger: logger)
        let scheduler = Scheduler(
            store: store, pipeline: pipeline, maxConcurrentUploads: configuration.maxConcurrentUploads, logger: logger,
            onTurn: { await chores.runIfDue() })
        intake.onQueued = { scheduler.wake() }
        self.scheduler.withLock { $0 = scheduler }

        await chores.finishPendingDispositions()

        await withGracefulShutdownHandler {
            await withDiscardingTaskGroup { group in
                // SIGHUP would otherwise end the process; configuration reload is not in this release.
                let hangups = await UnixSignalsSequence(trapping: .sighup)
                group.addTask {
                    for await _ in hangups {
                        self.logger.notice("SIGHUP received; reloading the configuration is not supported yet: restart ferryd to apply changes")
                    }
                }
                // Watchers: each scans its spool once, then follows events.
                let scanned = ScanCountdown(count: configuration.spools.count)
                for spool in configuration.spools {
                    let watcher = SpoolWatcher(settings: SpoolWatchSettings(
                        name: spool.name, directory: spool.directory, recursive: spool.recursive, settle: spool.settle,
                        rescanInterval: configuration.rescanInterval,
                        excludedDirectories: [spool.sentDirectory, spool.failedDirectory]), logger: logger)
                    group.addTask {
                        await watcher.run(
                            deliver: { files in await intake.submit(spool: spool.name, files: files) },
                            scanned: { scanned.done() })
                    }
                }
                await scanned.wait()
                logger.info("ready", metadata: [
                    "spools": "\(configuration.spools.map(\.name).joined(separator: ","))",
                    "state_directory": "\(configuration.stateDirectory)",
                ])
                onReady()
                await scheduler.run(shutdownTimeout: configuration.shutdownTimeout)
                group.cancelAll()
            }
        } onGracefulShutdown: {
            self.logger.notice("shutting down: no new uploads will start")
            self.scheduler.withLock { $0 }?.beginShutdown()
        }
        await io.shutdown()
        logger.info("stopped")
    }
}

/// Hands files found by the watchers to the queue, and wakes the scheduler when any is new.
final class Intake: Sendable {
    let store: JobStore
    let logger: Logger
    private let queuedHook = Mutex<(@Sendable () -> Void)?>(nil)

    init(store: JobStore, logger: Logger) {
        self.store = store
        self.logger = logger
    }

    var onQueued: (@Sendable () -> Void)? {
        get { queuedHook.withLock { $0 } }
        set { queuedHook.withLock { $0 = newValue } }
    }

    func submit(spool: String, files: [SpoolFile]) async {
        let discovered = files.map {
            JobStore.DiscoveredFile(spool: spool, relativePath: $0.relativePath, identity: FileIdentity($0.status))
        }
        do {
            let jobs = try await store.enqueue(discovered, now: Date(), makeBoundary: { MultipartBoundary.random().value })
            for job in jobs {
                logger.info("queued", metadata: ["job": "\(job.id)", "spool": "\(spool)", "file": "\(job.displayPath)", "bytes": "\(job.identity.size)"])
            }
            if !jobs.isEmpty { onQueued?() }
        } catch {
            logger.error("cannot queue files; they stay in the spool and are found again at the next scan",
                         metadata: ["spool": "\(spool)", "files": "\(files.count)", "error": "\(error)"])
        }
    }
}

/// Periodic work done from the scheduler's loop: finishing dispositions that failed before
/// (a full disk, a directory that was not writable).
final class Chores: Sendable {
    let store: JobStore
    let pipeline: JobPipeline
    let logger: Logger
    private let nextRun = Mutex(ContinuousClock.now + .seconds(60))

    init(store: JobStore, pipeline: JobPipeline, logger: Logger) {
        self.store = store
        self.pipeline = pipeline
        self.logger = logger
    }

    func runIfDue() async {
        let due = nextRun.withLock { next -> Bool in
            guard ContinuousClock.now >= next else { return false }
            next = .now + .seconds(60)
            return true
        }
        if due { await finishPendingDispositions() }
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

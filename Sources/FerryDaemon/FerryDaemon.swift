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
        defer {
            do {
                try store.close()
            } catch {
                logger.warning("the queue database was not closed cleanly; its -wal file keeps the latest changes", metadata: ["error": "\(error)"])
            }
        }
        state.protectDatabase()
        let uploadsSettled: ContinuousClock.Instant?
        do {
            uploadsSettled = try await recover(store, state: state)
        } catch {
            throw DaemonError.queue(QueueError.classify(error, path: state.databasePath))
        }

        // Its HTTP clients are shut down asynchronously: this runs on an event loop, where a
        // synchronous shutdown would wait for itself.
        let uploaders = UploaderPool()
        do {
            let parts = try await DaemonParts.assemble(
                configuration: configuration, state: state, store: store, uploaders: uploaders, notifier: notifier,
                uploadsSettled: uploadsSettled, logger: logger)
            scheduler.withLock { $0 = parts.scheduler }
            // `metrics_listen`: bound before the control socket, so a port in use stops start-up leaving nothing behind.
            let metricsServer = try await MetricsServer.bind(
                configuration.metricsListen, scrape: { try await parts.control.service.metrics().prometheus }, logger: logger)
            let listener: (NIOAsyncChannel<NIOAsyncChannel<ControlFrame, ByteBuffer>, Never>, created: Bool)
            do {
                listener = try await parts.control.bind()
            } catch let error as DaemonError {
                throw error
            } catch {
                throw DaemonError.other("cannot listen on control_socket \(configuration.controlSocket): \(error)")
            }
            await parts.chores.finishPendingDispositions()
            await parts.control.service.finishInterruptedRetries()

            await withGracefulShutdownHandler {
                await withDiscardingTaskGroup { group in
                    group.addTask { await parts.control.serve(listener.0, created: listener.created) }
                    if let metricsServer { group.addTask { await metricsServer.serve() } }
                    // Watchers: each scans its spool once, then follows events. A reload stops some and starts others.
                    let (starts, startWatcher) = AsyncStream.makeStream(of: (SpoolWatcher, @Sendable () -> Void).self)
                    group.addTask { await Self.runWatchers(starts, intake: parts.intake) }
                    notifier.status("scanning \(configuration.spools.count) spool\(configuration.spools.count == 1 ? "" : "s")")
                    let scanned = ScanCountdown(count: configuration.spools.count)
                    for spool in configuration.spools {
                        let watcher = Self.watcher(for: spool, in: configuration, logger: logger)
                        parts.runtime.setWatcher(watcher, for: spool.name)
                        startWatcher.yield((watcher, { scanned.done() }))
                    }
                    // SIGHUP reloads the configuration, as `ferryctl reload` does.
                    let hangups = await UnixSignalsSequence(trapping: .sighup)
                    group.addTask { await self.reloadOnHangup(hangups, runtime: parts.runtime) }
                    await scanned.wait()
                    logger.info("ready", metadata: [
                        "spools": "\(configuration.spools.map(\.name).joined(separator: ","))",
                        "state_directory": "\(configuration.stateDirectory)",
                        "control_socket": "\(configuration.controlSocket)",
                    ])
                    // Reloads only once started, so that READY=1 never comes before the first scan.
                    installReloader(parts: parts, uploaders: uploaders, startWatcher: { startWatcher.yield(($0, {})) })
                    notifier.ready(status: await parts.reporter.summary() ?? "ready")
                    group.addTask { await parts.reporter.run() }
                    group.addTask { await parts.chores.run() }
                    group.addTask { await parts.hooks.run() }
                    group.addTask { await parts.bandwidth.run() }
                    onReady()
                    await parts.scheduler.run(shutdownTimeout: { parts.runtime.configuration.shutdownTimeout })
                    startWatcher.finish()
                    group.cancelAll()
                }
            } onGracefulShutdown: {
                self.logger.notice("shutting down: no new uploads will start")
                let scheduler = self.scheduler.withLock { $0 }
                let inFlight = scheduler?.gate.inUse ?? 0
                self.notifier.stopping(status: inFlight == 0 ? "stopping" : "stopping: waiting for \(inFlight) upload\(inFlight == 1 ? "" : "s") in flight")
                scheduler?.beginShutdown()
            }
            await parts.senders.io.shutdown()
        } catch {
            await uploaders.shutdown()
            throw error
        }
        await uploaders.shutdown()
        logger.info("stopped")
    }

    /// Lets `ferryctl reload` and SIGHUP re-read the configuration, telling systemd around it.
    private func installReloader(parts: DaemonParts, uploaders: UploaderPool, startWatcher: @escaping @Sendable (SpoolWatcher) -> Void) {
        parts.runtime.setReloader { [notifier] reason in
            notifier.reloading()
            do {
                let result = try await self.reload(runtime: parts.runtime, uploaders: uploaders, parts: parts.senders,
                                                   scheduler: parts.scheduler, startWatcher: startWatcher, reason: reason)
                parts.bandwidth.reloaded()
                notifier.ready(status: await parts.reporter.summary() ?? "configuration reloaded")
                return result
            } catch {
                notifier.ready(status: "configuration reload rejected; the running configuration stays (see the log)")
                throw error
            }
        }
    }

    /// How long after the start an upload a crash interrupted waits before it resumes: the kernel
    /// goes on sending what the dead process's sockets held (a part written whole, awaiting its
    /// answer), and the server then stores it, so the resumed upload finds it instead of sending
    /// it again. Best effort: a slow link may need longer.
    static let interruptedUploadSettling = Duration.seconds(2)

    /// Uploads that were in flight go back to the queue; leftover bodies are removed. Returns when
    /// jobs with an upload on the server may resume (`nil`: none was interrupted).
    private func recover(_ store: JobStore, state: borrowing StateDirectory) async throws -> ContinuousClock.Instant? {
        notifier.status("recovering the queue")
        // Bodies first: on a full state directory they are the space the queue's writes need.
        let orphans = state.removeOrphanedBodies()
        let (requeued, withUpload) = try await store.requeueInterrupted(now: Date())
        let settled = withUpload > 0 ? ContinuousClock.now + Self.interruptedUploadSettling : nil
        let partials = SpoolFiles.removeInterruptedMoves(in: configuration.spools.flatMap { [$0.sentDirectory, $0.failedDirectory] })
        if requeued > 0 || orphans > 0 || partials > 0 {
            logger.notice("recovered from the previous run", metadata: [
                "requeued_uploads": "\(requeued)", "removed_bodies": "\(orphans)", "removed_partial_moves": "\(partials)",
            ])
        }
        return settled
    }

    /// Runs each watcher handed over `starts` until the stream ends.
    private static func runWatchers(_ starts: AsyncStream<(SpoolWatcher, @Sendable () -> Void)>, intake: Intake) async {
        await withDiscardingTaskGroup { watchers in
            for await (watcher, scanned) in starts {
                watchers.addTask {
                    await watcher.run(
                        deliver: { files in
                            // Files the queue could not take are looked for again soon, not at the next full rescan.
                            if !(await intake.submit(spool: watcher.settings.name, files: files)) { watcher.rescanSoon() }
                        },
                        scanned: scanned,
                        directoryProblem: { message in
                            // For status and health, like files the queue cannot take.
                            if let message {
                                intake.problems.reportIntake(spool: watcher.settings.name, message)
                            } else {
                                intake.problems.resolvedIntake(spool: watcher.settings.name)
                            }
                        })
                }
            }
            watchers.cancelAll()
        }
    }

    private func reloadOnHangup(_ hangups: UnixSignalsSequence, runtime: DaemonRuntime) async {
        for await _ in hangups {
            do {
                try await runtime.reload(reason: "SIGHUP", againIfBusy: true)
            } catch let error as ControlError where error.code == .unavailable {
                logger.warning("SIGHUP ignored: ferryd is still starting; send it again once it is ready")
            } catch {}
        }
    }

    /// The watcher of `spool`, which never enters the state directory or a sent or failed directory.
    static func watcher(for spool: SpoolConfiguration, in configuration: FerryConfiguration, logger: Logger) -> SpoolWatcher {
        SpoolWatcher(settings: SpoolWatchSettings(
            name: spool.name, directory: spool.directory, recursive: spool.recursive, settle: spool.settle,
            rescanInterval: configuration.rescanInterval,
            excludedDirectories: [spool.sentDirectory, spool.failedDirectory, configuration.stateDirectory]
                + configuration.spools.flatMap { [$0.sentDirectory, $0.failedDirectory] }
                + configuration.spools.compactMap(\.resultDirectory),
            bundles: spool.bundles, fieldSidecars: spool.uploadProtocol == .multipart), logger: logger)
    }

    /// Re-reads the configuration file and applies what can change while running: spools (added,
    /// removed, changed), `max_concurrent_uploads`, `rescan_interval`, `shutdown_timeout`,
    /// `job_retention` and the bandwidth settings. An
    /// invalid file changes nothing. Uploads in flight finish with the settings they started with.
    private func reload(
        runtime: DaemonRuntime, uploaders: UploaderPool, parts: SenderParts, scheduler: Scheduler,
        startWatcher: @Sendable (SpoolWatcher) -> Void, reason: String
    ) async throws -> ReloadResult {
        let old = runtime.configuration
        // A time zone changed since (timedatectl set-timezone on a vessel crossing zones) applies to
        // upload windows and bandwidth schedules from now on.
        NSTimeZone.resetSystemTimeZone()
        // What the file says, and what of it is put in place now: the settings read only at start-up
        // keep their running values (a spool's exclusions use the state directory in use).
        let file: FerryConfiguration
        let new: FerryConfiguration
        do {
            file = try ConfigurationLoader.fromProcessEnvironment().load(path: old.path)
            new = try file.reloadable(over: old)
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
        if file.stateDirectory != old.stateDirectory { restart.append("state_directory") }
        if file.controlSocket != old.controlSocket { restart.append("control_socket") }
        if file.control != old.control { restart.append("control_group / control_read_only_for_others / control_idle_timeout") }
        if file.logLevel != old.logLevel { restart.append("log_level") }
        if file.metricsListen != old.metricsListen { restart.append("metrics_listen") }
        if new.maxConcurrentUploads != old.maxConcurrentUploads {
            scheduler.maxConcurrentUploads = new.maxConcurrentUploads
            applied.append("max_concurrent_uploads = \(new.maxConcurrentUploads)")
        }
        if new.shutdownTimeout != old.shutdownTimeout { applied.append("shutdown_timeout = \(DurationParser.format(new.shutdownTimeout))") }
        if new.bandwidthLimit != old.bandwidthLimit || new.bandwidthSchedule != old.bandwidthSchedule {
            applied.append(new.bandwidthSchedule == nil ? "bandwidth_limit = \(new.bandwidthLimit)" : "bandwidth_schedule")
        }
        if new.jobRetention != old.jobRetention { applied.append("job_retention = \(DurationParser.format(new.jobRetention))") }
        let rescanChanged = new.rescanInterval != old.rescanInterval
        if rescanChanged { applied.append("rescan_interval = \(DurationParser.format(new.rescanInterval))") }

        runtime.apply(new, spools: runtimes)
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
            let watcher = Self.watcher(for: spool, in: new, logger: logger)
            runtime.setWatcher(watcher, for: spool.name)
            startWatcher(watcher)
        }
        // A spool's server may have changed: what the old one asked does not hold it any more. And
        // what reaching a server takes may have (connect_timeout, a CA): the next due job tries now.
        for spool in new.spools where old.spool(named: spool.name)?.url != spool.url { scheduler.pipeline.serverWaits.forget(spool: spool.name) }
        scheduler.pipeline.serverWaits.forgetUnreachable()
        scheduler.wake()
        logger.notice("configuration reloaded", metadata: [
            "reason": "\(reason)", "applied": "\(applied.isEmpty ? "nothing changed" : applied.joined(separator: "; "))",
            "restart_required": "\(restart.joined(separator: ", "))",
        ])
        return ReloadResult(applied: applied, restartRequired: restart)
    }
}

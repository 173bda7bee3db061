import FerryConfig
import FerryQueue
import FerrySpool
import Foundation
import Logging

/// The running daemon's parts, declared in one place: who gets what. Each part receives what it
/// needs; none reaches through another.
struct DaemonParts: Sendable {
    let senders: SenderParts
    let runtime: DaemonRuntime
    let intake: Intake
    let activity: ActiveJobs
    let scheduler: Scheduler
    let control: ControlServer
    let chores: Chores
    let reporter: StatusReporter
    let hooks: HookRunner
    let bandwidth: BandwidthPolicy

    static func assemble(
        configuration: FerryConfiguration, state: borrowing StateDirectory, store: JobStore, uploaders: UploaderPool,
        notifier: SystemdNotifier, uploadsSettled: ContinuousClock.Instant? = nil, logger: Logger
    ) async throws -> DaemonParts {
        let io = BlockingIO(threads: configuration.maxConcurrentUploads)
        let senders = SenderParts(store: store, bodies: BodyBuilder(directory: state.bodiesPath), io: io)
        let runtime = DaemonRuntime(configuration: configuration, spools: try uploaders.runtimes(for: configuration, parts: senders))
        let problems = LocalProblems()
        let intake = Intake(store: store, logger: logger, problems: problems)
        let activity = ActiveJobs()
        let metrics = DaemonMetrics()
        let hooks = HookRunner(store: store, runtime: runtime, io: io, logger: logger)
        let bandwidth = BandwidthPolicy(runtime: runtime, global: uploaders.global, logger: logger)
        let disposer = Disposer(store: store, io: io, logger: logger, disposed: { hooks.wake() })
        let followUps = JobFollowUps(disposer: disposer, problems: problems, requeue: { name, path in
            guard let spool = runtime.spool(named: name), let status = spool.files.status(path) else { return }
            // Found changed by a disposition, it may still be being written: it settles first, as a
            // file that changed before delivery does.
            let notBefore = Date().addingTimeInterval(spool.configuration.settle.seconds)
            if status.kind == .directory, spool.configuration.bundles, let bundle = try? spool.files.openBundle(path), bundle.listing.writable {
                // A bundle changed after its body was built: nothing inside it is watched, so queue it here.
                await intake.submit(spool: name, files: [SpoolFile(relativePath: path, status: bundle.listing.status, bundle: bundle.listing)], notBefore: notBefore)
            } else if status.kind == .regular {
                await intake.submit(spool: name, files: [SpoolFile(relativePath: path, status: status)], notBefore: notBefore)
            }
        })
        let pipeline = JobPipeline(
            records: OutcomeRecorder(store: store, logger: logger, problems: problems, stoppedByOperator: { activity.intervention(for: $0) != nil }),
            runtime: runtime, activity: activity, followUps: followUps, bodies: senders.bodies, io: io,
            metrics: metrics, uploadsSettled: uploadsSettled, logger: logger)
        let paused = (try? await store.pausedSpools()) ?? []
        if !paused.isEmpty {
            logger.notice("uploads are paused (ferryctl resume to continue)", metadata: ["spools": "\(paused.sorted().joined(separator: ","))"])
        }
        let scheduler = Scheduler(
            store: store, pipeline: pipeline, maxConcurrentUploads: configuration.maxConcurrentUploads, paused: paused,
            eventsBefore: (try? await store.eventBounds().newest) ?? 0, logger: logger,
            wakeBy: { notifier.nextWatchdogDue },
            onTurn: { notifier.watchdogIfDue() },
            spools: { runtime.configuration.spools })
        intake.onQueued = { scheduler.wake() }
        let control = ControlServer(
            path: configuration.controlSocket, access: configuration.control,
            service: ControlService(
                store: store, runtime: runtime, scheduler: scheduler, activity: activity, problems: problems, metrics: metrics,
                followUps: followUps, hooks: hooks, bandwidth: bandwidth, meter: activity.meter, logger: logger),
            logger: logger)
        return DaemonParts(
            senders: senders, runtime: runtime, intake: intake, activity: activity, scheduler: scheduler, control: control,
            chores: Chores(
                store: store, runtime: runtime, activity: activity, followUps: followUps, bodies: senders.bodies, logger: logger,
                wakeScheduler: { scheduler.wake() }),
            reporter: StatusReporter(notifier: notifier, store: store), hooks: hooks,
            bandwidth: bandwidth)
    }
}

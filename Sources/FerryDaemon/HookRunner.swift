import FerryConfig
import FerryDelivery
import FerryQueue
import FerrySystem
import Foundation
import Logging
import Synchronization

/// Runs what follows an outcome (``HookRun``: a spool's `on_delivered` and `on_failed` hooks, its
/// result files), at least once each: the queue says what is due, each run's end is recorded, and
/// a failure is retried after the spool's backoff until `hook_max_attempts`. Order, per job:
/// outcome committed → file disposed of → hooks run (so a hook sees the file where it ended up).
/// At most `max_concurrent_hooks` run at once, in tasks of their own: a hook that hangs or floods
/// its output holds a hook slot until its `timeout`, never an upload.
final class HookRunner: Sendable {
    let store: JobStore
    let runtime: DaemonRuntime
    /// Writes result files off the concurrency pool.
    let io: BlockingIO
    let logger: Logger
    private let doorbell = Doorbell()
    private let running = Mutex<Set<HookKey>>([])
    /// When nothing rings, the queue is looked at this often (a disposition finished by a chore).
    static let idleCheck = Duration.seconds(60)
    /// A run whose spool left the configuration waits this long (uncounted) for it to return.
    static let missingSpoolWait: TimeInterval = 300

    init(store: JobStore, runtime: DaemonRuntime, io: BlockingIO, logger: Logger) {
        self.store = store
        self.runtime = runtime
        self.io = io
        self.logger = logger
    }

    /// A file was disposed of, or a hook was retried: look at the queue now.
    func wake() { doorbell.ring() }

    /// Runs due hooks until cancelled (a run cut short by the shutdown stays pending and runs again
    /// at the next start).
    func run() async {
        await withDiscardingTaskGroup { group in
            while !Task.isCancelled {
                let limit = runtime.configuration.maxConcurrentHooks
                let busy = running.withLock { $0 }
                if busy.count < limit {
                    // A pipeline's record of a disposition may still be a deferred write.
                    try? await store.flush()
                    let due = (try? await store.dueHooks(now: Date(), limit: limit - busy.count, excluding: busy)) ?? []
                    for item in due {
                        let key = HookKey(jobSequence: item.run.jobSequence, kind: item.run.kind)
                        running.withLock { _ = $0.insert(key) }
                        group.addTask {
                            await self.execute(item)
                            self.running.withLock { _ = $0.remove(key) }
                            self.wake()
                        }
                    }
                    if !due.isEmpty { continue }
                }
                var deadline = ContinuousClock.now + Self.idleCheck
                let runningNow = running.withLock { $0 }
                if runningNow.count < limit, let next = try? await store.nextHookDue(excluding: runningNow) {
                    deadline = min(deadline, ContinuousClock.now + .milliseconds(max(0, Int64(next.timeIntervalSinceNow * 1000)) + 5))
                }
                await doorbell.wait(until: deadline)
            }
        }
    }

    /// Runs one hook (or writes one result file) and records how it ended.
    private func execute(_ item: JobStore.DueHook) async {
        var log = logger
        log[metadataKey: "job"] = "\(item.job.id)"
        log[metadataKey: "spool"] = "\(item.job.spool)"
        log[metadataKey: "hook"] = "\(item.run.kind.rawValue)"
        guard let spool = runtime.configuration.spool(named: item.job.spool) else {
            // Not counted: the spool may come back with a reload.
            var later = item.run
            later.nextAt = Date().addingTimeInterval(Self.missingSpoolWait)
            later.updatedAt = Date()
            log.warning("the job's spool is no longer configured; its hook waits until the spool returns")
            await record(later, replacing: item.run, log: log)
            return
        }
        let started = ContinuousClock.now
        let (ending, output) = await perform(item, spool: spool, log: log)
        if Task.isCancelled { return }
        var random = SystemRandomNumberGenerator()
        let next = HookRunDecider.next(
            item.run, ended: ending, output: output.map(Self.bounded), policy: spool.retry, maxAttempts: spool.hooks.maxAttempts,
            now: Date(), random: &random)
        guard await record(next, replacing: item.run, log: log) else { return }
        var metadata: Logger.Metadata = ["attempt": "\(next.attempts)", "duration_ms": "\(Int((ContinuousClock.now - started) / .milliseconds(1)))"]
        if let exit = ending.exitStatus { metadata["exit"] = "\(exit)" }
        if let output, !output.isEmpty, !ending.succeeded { metadata["output"] = "\(Self.bounded(output).suffix(1024))" }
        switch next.state {
        case .succeeded:
            log.info(item.run.kind == .result ? "result file written" : "hook ran", metadata: metadata)
        case .pending:
            metadata["error"] = "\(ending.problem ?? "failed")"
            metadata["retry_in_ms"] = "\(max(0, Int(next.nextAt.timeIntervalSinceNow * 1000)))"
            log.warning(item.run.kind == .result ? "cannot write the result file; will try again" : "hook failed; will run it again", metadata: metadata)
        case .gaveUp:
            metadata["error"] = "\(ending.problem ?? "failed")"
            log.error(item.run.kind == .result
                      ? "cannot write the result file; giving up (ferryctl retry-hook runs it again)"
                      : "hook failed; giving up after hook_max_attempts (ferryctl retry-hook runs it again)", metadata: metadata)
        }
    }

    /// Records a run's end, retrying while the queue cannot be written (the run stays taken, so it is
    /// not started again meanwhile); returns whether it was recorded as this run's.
    @discardableResult
    private func record(_ next: HookRun, replacing previous: HookRun, log: Logger) async -> Bool {
        do {
            let recorded = try await RetriedWrite.run(logging: "cannot record a hook's run in the queue; retrying", to: log) {
                try await store.recordHookRun(next, replacing: previous)
            }
            if !recorded { log.debug("the hook was queued anew meanwhile (the job has a newer outcome); this run's end is not recorded") }
            return recorded
        } catch {
            return false  // stopping: the run stays pending and runs again at the next start
        }
    }

    /// Does the work of one run: how it ended and the tail of its output.
    private func perform(_ item: JobStore.DueHook, spool: SpoolConfiguration, log: Logger) async -> (HookEnding, String?) {
        let job = item.job
        let document: [UInt8]
        switch item.run.kind {
        case .result, .delivered:
            document = ResultDocument(job: job, spool: spool).encoded()
        case .failed:
            let attempts = (try? await store.attempts(of: job)) ?? []
            document = FailureReport(job: job, spool: spool, attempts: attempts).encoded()
        }
        if item.run.kind == .result {
            guard let directory = spool.resultDirectory else { return (.failed("the spool no longer has a result_directory"), nil) }
            do {
                _ = try await io.run { _ in try ResultFiles.write(document, for: job, into: directory) }
                return (.written, nil)
            } catch {
                return (.failed("\(error)"), nil)
            }
        }
        guard let command = item.run.kind == .delivered ? spool.hooks.onDelivered : spool.hooks.onFailed else {
            return (.failed("the spool no longer has an on_\(item.run.kind.rawValue) hook"), nil)
        }
        let placeholders = Placeholders(job: job, size: job.identity.size, modificationTime: job.identity.modificationTime)
        let (_, path) = ControlService.location(of: job, spoolDirectory: spool.directory)
        var environment = [
            "FERRY_JOB_ID": job.id.rawValue, "FERRY_SPOOL": job.spool, "FERRY_FILE": String(decoding: job.relativePath, as: UTF8.self),
            "FERRY_STATUS": job.responseStatus.map(String.init) ?? "", "FERRY_OUTCOME": job.state == .done ? "delivered" : job.state.rawValue,
            "FERRY_HOOK_ATTEMPT": "\(item.run.attempts + 1)",
        ]
        if let path { environment["FERRY_PATH"] = path }
        let process = HookProcess(
            argv: command.map { placeholders.render($0, for: .text) }, environment: environment,
            workingDirectory: spool.hooks.workingDirectory, input: document, timeout: spool.hooks.timeout)
        let result = await process.run()
        return (result.ending, result.outputTail)
    }

    /// The output kept with a run: its last 20 lines (of at most ``HookProcess/outputTailLimit`` bytes).
    static func bounded(_ output: String) -> String {
        output.split(separator: "\n", omittingEmptySubsequences: false).suffix(20).joined(separator: "\n")
    }
}

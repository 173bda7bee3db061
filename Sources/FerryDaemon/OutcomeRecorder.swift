import FerryQueue
import Foundation
import Logging
import Synchronization

/// Records job outcomes in the queue, retrying while the database cannot be written (a full disk,
/// an I/O error), so that a job whose outcome is known never sits in `uploading` until the next
/// start. A stop of the daemon ends the retries once its `shutdown_timeout` is over (the job is
/// recovered at the next start); an operator's hold or cancel, which cancels the job's task, does not.
struct OutcomeRecorder: Sendable {
    /// Set when the daemon stops waiting for uploads in flight (``abandonRetries()``): records still
    /// retried then give up, whoever stopped their job first.
    private let abandoned = Abandoned()
    let store: JobStore
    let logger: Logger
    /// While a record waits, its spool shows the problem (`ferryctl status`, `health`).
    let problems: LocalProblems
    /// Whether an operator (hold, cancel, a window's end) stopped the job: its task's cancellation
    /// is then not the daemon stopping.
    let stoppedByOperator: @Sendable (Job) -> Bool

    init(store: JobStore, logger: Logger, problems: LocalProblems, stoppedByOperator: @escaping @Sendable (Job) -> Bool = { _ in false }) {
        self.store = store
        self.logger = logger
        self.problems = problems
        self.stoppedByOperator = stoppedByOperator
    }

    /// The daemon stops: every record still retried gives up at its next try.
    func abandonRetries() {
        abandoned.flag.store(true, ordering: .sequentiallyConsistent)
    }

    @discardableResult
    func finish(
        _ job: Job, startedAt: Date, now: Date, bytesSent: Int64, transition: JobStore.Transition, hooks: [HookRun.Kind] = []
    ) async throws -> Job {
        try await persist(job) {
            try await store.finish(job, startedAt: startedAt, now: now, bytesSent: bytesSent, transition: transition, hooks: hooks)
        }
    }

    @discardableResult
    func fail(_ job: Job, now: Date, error: String, hooks: [HookRun.Kind] = []) async throws -> Job {
        try await persist(job) { try await store.fail(job, now: now, error: error, hooks: hooks) }
    }

    @discardableResult
    func supersede(
        _ job: Job, by identity: FileIdentity, now: Date, notBefore: Date, boundary: String, bundleFiles: [BundleFile] = []
    ) async throws -> Job {
        try await persist(job) {
            try await store.supersede(job, by: identity, now: now, notBefore: notBefore, boundary: boundary, bundleFiles: bundleFiles)
        }
    }

    private func persist<T: Sendable>(_ job: Job, _ write: @escaping @Sendable () async throws -> T) async throws -> T {
        let (logger, problems, stoppedByOperator, abandoned) = (logger, problems, stoppedByOperator, abandoned)
        // A task of its own, which an operator's stop of the job does not reach: a 2xx whose record
        // a cancel cut short would leave the job `uploading` until the next start. The daemon's
        // stop does reach it.
        let recording = Task {
            var waited = false
            let recorded = try await RetriedWrite.run(
                logging: "cannot record a job's outcome in the queue; retrying", to: logger,
                givesUp: { Task.isCancelled || abandoned.flag.load(ordering: .sequentiallyConsistent) }, failed: { error in
                waited = true
                problems.report(spool: job.spool, job: job.id.rawValue, "cannot record an upload's outcome in the queue (it is retried; the file stays until it is recorded): \(error)")
            }, write)
            if waited { problems.resolved(spool: job.spool, job: job.id.rawValue) }
            return recorded
        }
        return try await withTaskCancellationHandler {
            try await recording.value
        } onCancel: {
            if !stoppedByOperator(job) { recording.cancel() }
        }
    }
}

/// ``OutcomeRecorder``'s flag, shared by its copies.
private final class Abandoned: Sendable {
    let flag = Atomic(false)
}

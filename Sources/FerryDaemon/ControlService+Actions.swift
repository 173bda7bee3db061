import FerryConfig
import FerryControl
import FerryDelivery
import FerryMultipart
import FerryQueue
import FerrySpool
import FerrySystem
import Foundation

/// Operator actions on jobs: retry, hold, release, cancel; and `enqueue`.
extension ControlService {
    func act(_ command: ControlCommand, _ arguments: JobActionArguments, peer: ControlPeer) async throws -> ActionResults {
        let ids = arguments.ids ?? []
        let all = arguments.all ?? false
        if all == !ids.isEmpty {
            throw ControlError(.invalidArgument, ids.isEmpty
                ? "name the jobs to \(command.rawValue), or ask for all of them explicitly (\"all\": true)"
                : "give job ids or \"all\", not both")
        }
        if let spool = arguments.spool { try await checkSpoolKnown(spool) }
        var targets: [Result<Job, ControlError>] = []
        if all {
            let states: [JobState] = switch command {
            case .retry: [.failed]
            case .hold: [.queued, .retrying]
            default: [.held]
            }
            targets = try await store.jobs(inStates: states, spool: arguments.spool).map { .success($0) }
        } else {
            for id in ids {
                do {
                    targets.append(.success(try await find(id)))
                } catch let error as ControlError {
                    targets.append(.failure(error))
                }
            }
        }
        let reason = "\(command == .hold ? "held" : command == .cancel ? "cancelled" : command == .release ? "released" : "retried") by \(peer) via the control socket"
        var results: [ActionOutcome] = []
        for (index, target) in targets.enumerated() {
            switch target {
            case .failure(let error):
                results.append(ActionOutcome(id: ids[index], ok: false, error: error))
            case .success(let job):
                guard jobsActedOn.withLock({ $0.insert(job.id.rawValue).inserted }) else {
                    results.append(ActionOutcome(id: job.id.rawValue, ok: false, state: JobStateName(rawValue: job.state.rawValue), error: ControlError(
                        .conflict, "another operator action on job \(job.id) is in progress; try again once it has finished")))
                    continue
                }
                do {
                    defer { jobsActedOn.withLock { _ = $0.remove(job.id.rawValue) } }
                    // The state now, not when the job was looked up: an action just finished may have changed it.
                    let current = try await store.job(sequence: job.sequence ?? -1) ?? job
                    let state = try await perform(command, on: current, reason: reason)
                    // A retry means now, even if the job's server asked the spool to wait.
                    if command == .retry { scheduler.pipeline.serverWaits.forget(spool: job.spool) }
                    results.append(ActionOutcome(id: job.id.rawValue, ok: true, state: JobStateName(rawValue: state.rawValue)))
                } catch let error as ControlError {
                    results.append(ActionOutcome(id: job.id.rawValue, ok: false, state: JobStateName(rawValue: job.state.rawValue), error: error))
                }
            }
        }
        if results.contains(where: \.ok) {
            logger.notice("operator action", metadata: ["action": "\(command.rawValue)", "jobs": "\(results.filter(\.ok).count)", "peer": "\(peer)"])
            scheduler.wake()
        }
        return ActionResults(results: results)
    }

    /// Applies one action to one job and returns its state afterwards.
    private func perform(_ command: ControlCommand, on job: Job, reason: String) async throws -> JobState {
        let now = Date()
        switch command {
        case .hold:
            return try await settle(store.hold(job, now: now, reason: reason), intervention: .hold(reason: reason), wanted: .held, verb: "held")
        case .release:
            switch try await store.release(job, now: now, reason: reason) {
            case .done(let job): return job.state
            case .uploading(let job), .notAllowed(let job): throw Self.refusal(job, "job \(job.id) is \(job.state.rawValue), not held")
            }
        case .cancel:
            let hooks = cancelHooks(job)
            let state = try await settle(
                store.cancel(job, now: now, reason: reason, hooks: hooks), intervention: .cancel(reason: reason), wanted: .cancelled, verb: "cancelled")
            // A pipeline that stopped for this cancel has done its follow-ups, but their record may
            // still be a deferred write: committed, it says the file is disposed of, so the move and
            // the server's DELETE are not done twice.
            try await store.flush()
            if let cancelled = try await store.job(sequence: job.sequence ?? -1), cancelled.state == .cancelled, cancelled.disposedAt == nil,
               !activity.contains(cancelled) {
                // Not in flight, so no pipeline does this: the cancel's follow-ups.
                await followUps.run([.dispose, .endServerUpload, .requeueIfLeft], job: cancelled, recorded: cancelled,
                                    spool: runtime.spool(named: cancelled.spool), log: logger)
            }
            return state
        case .retry:
            switch job.state {
            case .failed, .cancelled:
                return try await retryFinished(job, reason: reason)
            case .done:
                throw ControlError(.conflict, "job \(job.id) was already delivered (HTTP \(job.responseStatus.map(String.init) ?? "2xx"))")
            case .superseded:
                throw ControlError(.conflict, "job \(job.id) was superseded: its file changed and the new version is another job")
            case .uploading:
                throw ControlError(.conflict, "job \(job.id) is uploading right now")
            default:
                switch try await store.retryNow(job, now: now, reason: reason) {
                case .done(let job): return job.state
                case .uploading(let job), .notAllowed(let job): throw Self.refusal(job, "job \(job.id) is \(job.state.rawValue) and cannot be retried")
                }
            }
        default:
            throw ControlError(.invalidArgument, "\(command.rawValue) is not a job action")
        }
    }

    /// The error for an action `job`'s state refuses: `otherwise`, unless a retry reopened the job
    /// and is bringing its file back (held, with its finish time), which says so.
    private static func refusal(_ job: Job, _ otherwise: String) -> ControlError {
        if job.state == .held && job.finishedAt != nil {
            return ControlError(.conflict, "job \(job.id) is being retried: its file is on its way back into the spool; try again in a moment")
        }
        return ControlError(.conflict, otherwise)
    }

    /// Finishes a hold or cancel: done in the queue, or — for a job uploading right now — by stopping
    /// the upload and waiting (up to 10 s) for its pipeline to record the new state.
    private func settle(_ outcome: JobStore.ActionOutcome, intervention: Intervention, wanted: JobState, verb: String) async throws -> JobState {
        switch outcome {
        case .done(let job):
            return job.state
        case .notAllowed(let job):
            throw Self.refusal(job, "job \(job.id) is \(job.state.rawValue) and cannot be \(verb)")
        case .uploading(let job):
            await activity.stop(job, intervention, timeout: .seconds(10))
            guard let current = try await store.job(sequence: job.sequence ?? -1) else {
                throw ControlError(.notFound, "job \(job.id) is gone")
            }
            switch current.state {
            case wanted:
                return wanted
            case .uploading:
                throw ControlError(.conflict, "job \(job.id) is still uploading; the upload did not stop within 10s")
            case .queued, .retrying:
                // The upload ended (for another reason) before the request reached it: apply it now.
                let again = wanted == .held
                    ? try await store.hold(current, now: Date(), reason: Self.reason(of: intervention))
                    : try await store.cancel(current, now: Date(), reason: Self.reason(of: intervention), hooks: cancelHooks(current))
                if case .done(let job) = again { return job.state }
                fallthrough
            default:
                throw ControlError(.conflict, "job \(job.id) finished before it could be \(verb) (it is \(current.state.rawValue))")
            }
        }
    }

    /// `retry-hook`: the job's hooks that gave up (or the one named) run again, now.
    func retryHook(_ arguments: RetryHookArguments) async throws -> RetryHookResult {
        let job = try await find(arguments.id)
        var kind: HookRun.Kind?
        if let name = arguments.hook {
            guard let named = HookRun.Kind(rawValue: name) else {
                throw ControlError(.invalidArgument, "hook must be \"delivered\", \"failed\" or \"result\", not \"\(name)\"")
            }
            kind = named
        }
        let reopened = try await store.retryHooks(of: job, kind: kind, now: Date())
        guard !reopened.isEmpty else {
            let runs = try await store.hookRuns(of: job).filter { kind == nil || $0.kind == kind }
            if runs.isEmpty { throw ControlError(.notFound, "job \(job.id) has no \(kind.map { "\($0.rawValue) " } ?? "")hook on record") }
            let states = runs.map { "\($0.kind.rawValue): \($0.state.rawValue)" }.joined(separator: ", ")
            throw ControlError(.conflict, "job \(job.id) has no hook that gave up (\(states))")
        }
        hooks.wake()
        logger.notice("hooks to run again, by an operator", metadata: ["job": "\(job.id)", "hooks": "\(reopened.map(\.rawValue).joined(separator: ","))"])
        return RetryHookResult(job: job.id.rawValue, hooks: reopened.map(\.rawValue))
    }

    /// What runs after an operator's cancel: the spool's `on_failed` hook, if it has one.
    private func cancelHooks(_ job: Job) -> [HookRun.Kind] {
        runtime.configuration.spool(named: job.spool)?.hooks.onFailed != nil ? [.failed] : []
    }

    private static func reason(of intervention: Intervention) -> String {
        switch intervention {
        case .hold(let reason), .cancel(let reason), .requeue(let reason): reason
        }
    }

    // MARK: - Enqueue

    func enqueue(_ arguments: EnqueueArguments) async throws -> ActionResults {
        guard let spool = runtime.spool(named: arguments.spool) else {
            throw ControlError(.notFound, "no spool named \"\(arguments.spool)\"; configured: \(runtime.configuration.spools.map(\.name).joined(separator: ", "))")
        }
        guard !arguments.files.isEmpty, arguments.files.count <= 10_000 else {
            throw ControlError(.invalidArgument, "give between 1 and 10000 files")
        }
        var results: [ActionOutcome] = []
        var found: [(String, JobStore.DiscoveredFile)] = []
        for file in arguments.files {
            // A NUL (JSON "\u0000") names no file: the system calls would stop at it, so that
            // "..\u0000" passed the check below as a name and reached them as "..".
            guard !file.utf8.contains(0) else {
                results.append(ActionOutcome(id: file, ok: false, error: ControlError(.invalidArgument, "a file name cannot hold a NUL byte")))
                continue
            }
            let parts = file.split(separator: "/", omittingEmptySubsequences: false)
            guard !file.isEmpty, !file.hasPrefix("/"), !parts.contains(where: { $0.isEmpty || $0 == "." || $0 == ".." }),
                  spool.configuration.recursive || parts.count == 1 else {
                results.append(ActionOutcome(id: file, ok: false, error: ControlError(.invalidArgument,
                    "\(file): give a path relative to the spool directory (no \"..\"; subdirectories only in a recursive spool)")))
                continue
            }
            let status = spool.files.status(Array(file.utf8))
            if status?.kind == .directory, spool.configuration.bundles, let bundle = try? spool.files.openBundle(Array(file.utf8)) {
                guard bundle.listing.writable else {
                    results.append(ActionOutcome(id: file, ok: false, error: ControlError(.conflict,
                        "\(file): ferryd cannot write this bundle directory, so it could not delete or move it after sending; make it group-writable (chmod g+w)")))
                    continue
                }
                found.append((file, JobStore.DiscoveredFile(
                    spool: arguments.spool, relativePath: Array(file.utf8), identity: bundle.listing.status.version,
                    bundleFiles: bundle.listing.bundleFiles)))
                continue
            }
            guard let status, status.kind == .regular else {
                let what = spool.configuration.bundles ? "a regular file or a bundle directory" : "a regular file"
                results.append(ActionOutcome(id: file, ok: false, error: ControlError(.notFound, "\(file) is not \(what) in spool \(arguments.spool)")))
                continue
            }
            found.append((file, JobStore.DiscoveredFile(spool: arguments.spool, relativePath: Array(file.utf8), identity: status.version)))
        }
        let created = try await store.enqueue(found.map(\.1), now: Date(), makeBoundary: { MultipartBoundary.random().value })
        for (file, discovered) in found {
            if let job = created.first(where: { $0.relativePath == discovered.relativePath }) {
                results.append(ActionOutcome(id: file, ok: true, state: .queued, job: job.id.rawValue))
            } else if let existing = try await store.latestJob(spool: arguments.spool, relativePath: discovered.relativePath) {
                results.append(ActionOutcome(id: file, ok: true, state: JobStateName(rawValue: existing.state.rawValue), job: existing.id.rawValue))
            } else {
                results.append(ActionOutcome(id: file, ok: false, error: ControlError(.internal, "\(file) could not be queued")))
            }
        }
        if !created.isEmpty { scheduler.wake() }
        return ActionResults(results: results)
    }
}

import FerryConfig
import FerryControl
import FerryQueue
import FerrySpool
import FerrySystem
import Foundation
import Synchronization
import Logging
import NIOCore

#if canImport(Glibc)
import Glibc
#endif

/// Answers control requests: parses a request line, checks the peer may run the command, and runs
/// it against the queue and the daemon's parts. Every failure becomes an error reply; nothing a
/// client sends can stop the daemon.
final class ControlService: Sendable {
    let store: JobStore
    let runtime: DaemonRuntime
    let scheduler: Scheduler
    /// The jobs in flight: progress, and the operators' way to stop one.
    let activity: ActiveJobs
    /// The local problem holding each spool back, if any.
    let problems: LocalProblems
    let metrics: DaemonMetrics
    /// What follows a job's fate (a cancel of a job that is not in flight).
    let followUps: JobFollowUps
    /// Runs what follows outcomes; `retry-hook` wakes it.
    let hooks: HookRunner
    /// The bandwidth limits in force; `limit` overrides one.
    let bandwidth: BandwidthPolicy
    let meter: ThroughputMeter
    let startedAt = Date()
    let logger: Logger
    /// The jobs an operator action (hold, release, cancel, retry) is being applied to: one at a
    /// time per job, since a retry takes two steps and its file moves in between.
    let jobsActedOn = Mutex<Set<String>>([])

    init(
        store: JobStore, runtime: DaemonRuntime, scheduler: Scheduler, activity: ActiveJobs, problems: LocalProblems,
        metrics: DaemonMetrics, followUps: JobFollowUps, hooks: HookRunner, bandwidth: BandwidthPolicy, meter: ThroughputMeter,
        logger: Logger
    ) {
        self.store = store
        self.runtime = runtime
        self.scheduler = scheduler
        self.activity = activity
        self.problems = problems
        self.metrics = metrics
        self.followUps = followUps
        self.hooks = hooks
        self.bandwidth = bandwidth
        self.meter = meter
        var logger = logger
        logger[metadataKey: "component"] = "control"
        self.logger = logger
    }

    /// The replies to one request frame (streaming commands write their events themselves).
    func respond(to frame: ControlFrame, session: ControlSession) async -> [ControlReply] {
        let line: ByteBuffer
        switch frame {
        case .oversized:
            return [ControlReply(id: nil, error: ControlError(.requestTooLarge,
                "the request line is longer than \(ControlProtocol.maximumRequestLength) bytes"))]
        case .line(let buffer):
            line = buffer
        }
        if line.readableBytes == 0 { return [] }
        let object: [String: JSONValue]
        do {
            object = try ControlJSON.decoder.decode([String: JSONValue].self, from: Data(line.readableBytesView))
        } catch {
            return [ControlReply(id: nil, error: ControlError(.badRequest,
                "the request is not a JSON object on one line; send {\"v\":1,\"id\":1,\"cmd\":\"status\"}"))]
        }
        let id = object["id"]
        let version: Double
        switch object["v"] {
        case .integer(let value)?: version = Double(value)
        case .number(let value)?: version = value
        default:
            let problem = object["v"].map { "\"v\" is \($0.kindName); it must be the number of the protocol version" }
                ?? "the request has no protocol version \"v\""
            return [ControlReply(id: id, error: ControlError(.badRequest, "\(problem); this daemon speaks version \(ControlProtocol.version)"))]
        }
        guard version == Double(ControlProtocol.version) else {
            return [ControlReply(id: id, error: ControlError(.unsupportedVersion,
                "protocol version \(version.rounded() == version && abs(version) < 1e15 ? String(Int64(version)) : String(version)) is not supported; this daemon speaks version \(ControlProtocol.version)"))]
        }
        guard case .string(let name)? = object["cmd"] else {
            return [ControlReply(id: id, error: ControlError(.badRequest, object["cmd"].map { "\"cmd\" is \($0.kindName); it must be a command name (a string)" }
                ?? "the request has no command name \"cmd\""))]
        }
        if let unknown = object.keys.filter({ !["v", "id", "cmd", "args"].contains($0) }).sorted().first {
            return [ControlReply(id: id, error: ControlError(.badRequest,
                "the request has an unknown key \"\(unknown)\"; a request has \"v\", \"id\", \"cmd\" and \"args\" (the command's arguments)"))]
        }
        guard let command = ControlCommand(rawValue: name) else {
            let known = ControlCommand.allCases.map(\.rawValue).joined(separator: ", ")
            return [ControlReply(id: id, error: ControlError(.unknownCommand, "unknown command \"\(name)\"; known commands: \(known)"))]
        }
        let arguments: JSONValue
        switch object["args"] {
        case nil, .null?: arguments = .object([:])
        case .object(let value)?: arguments = .object(value)
        default:
            return [ControlReply(id: id, error: ControlError(.badRequest, "\"args\" must be a JSON object"))]
        }
        if !command.isReadOnly && session.peer.access != .control {
            return [ControlReply(id: id, error: ControlError(.permissionDenied,
                "\(session.peer) may only read (status, list, show, watch, health, metrics); \"\(name)\" needs root, ferryd's user or control_group"))]
        }
        do {
            let result = try await run(command, arguments: arguments, id: id, session: session)
            return result.map { [ControlReply(id: id, result: $0)] } ?? []
        } catch let error as ControlError {
            return [ControlReply(id: id, error: error)]
        } catch let error as DecodingError {
            return [ControlReply(id: id, error: ControlError(.invalidArgument, "invalid arguments for \(name): \(error.argumentMessage)"))]
        } catch {
            logger.error("control request failed", metadata: ["command": "\(name)", "error": "\(error)"])
            return [ControlReply(id: id, error: ControlError(.internal, "\(name) failed: \(error)"))]
        }
    }

    /// Runs one command; `nil` when the command wrote its replies itself (streams).
    private func run(_ command: ControlCommand, arguments: JSONValue, id: JSONValue?, session: ControlSession) async throws -> JSONValue? {
        // A misspelt argument must not be mistaken for its absence (a `list` of every job, a `cancel` of the wrong one).
        if let unknown = try arguments.keysUnknown(to: command.argumentsType).first {
            throw ControlError(.invalidArgument, "\(command.rawValue) has no argument \"\(unknown)\" (docs/control-protocol.md lists each command's arguments)")
        }
        switch command {
        case .status: return try ControlJSON.value(await status())
        case .list: return try ControlJSON.value(await list(arguments.decode(ListArguments.self), peer: session.peer))
        case .show: return try ControlJSON.value(await show(arguments.decode(ShowArguments.self), peer: session.peer))
        case .health: return try ControlJSON.value(await health())
        case .metrics: return try ControlJSON.value(await metrics())
        case .pause: return try ControlJSON.value(await pause(arguments.decode(PauseArguments.self), paused: true))
        case .resume: return try ControlJSON.value(await pause(arguments.decode(PauseArguments.self), paused: false))
        case .retry, .hold, .release, .cancel:
            return try ControlJSON.value(await act(command, arguments.decode(JobActionArguments.self), peer: session.peer))
        case .enqueue: return try ControlJSON.value(await enqueue(arguments.decode(EnqueueArguments.self)))
        case .retryHook: return try ControlJSON.value(await retryHook(arguments.decode(RetryHookArguments.self)))
        case .limit: return try ControlJSON.value(try limit(arguments.decode(LimitArguments.self)))
        case .reload:
            guard let result = try await runtime.reload(reason: "reload requested by \(session.peer)") else {
                throw ControlError(.conflict, "a reload is already in progress")
            }
            return try ControlJSON.value(result)
        case .wait: return try ControlJSON.value(await wait(arguments.decode(WaitArguments.self), session: session))
        case .watch:
            try await watch(arguments.decode(WatchArguments.self), id: id, session: session)
            return nil
        }
    }

    // MARK: - Reading

    func status() async throws -> StatusReport {
        let counts = try await store.counts()
        let configuration = runtime.configuration
        let paused = scheduler.paused
        let now = BandwidthPolicy.now()
        let waits = scheduler.pipeline.serverWaits.current(at: Date())
        var spools = configuration.spools.map { spool in
            var status = SpoolStatus(
                name: spool.name, directory: spool.directory, paused: paused.contains("*") || paused.contains(spool.name),
                counts: Self.allStates(counts[spool.name] ?? [:]), settling: runtime.watcher(named: spool.name)?.settlingCount ?? 0,
                problem: problems[spool.name], bundles: spool.bundles, uploadProtocol: spool.uploadProtocol.rawValue)
            if let window = spool.uploadWindow {
                let (open, change) = window.state(at: now, calendar: Calendar.current)
                status.windowOpen = open
                // As a real time: the offset clock of the tests is ferryd's own.
                status.windowChange = change.map { Date().addingTimeInterval($0.timeIntervalSince(now)) }
            }
            status.serverWait = waits[spool.name]
            return status
        }
        for (name, byState) in counts.sorted(by: { $0.key < $1.key }) where configuration.spool(named: name) == nil {
            spools.append(SpoolStatus(name: name, directory: "", paused: false, counts: Self.allStates(byState), settling: 0))
        }
        let total = activity.totalBytesSent.load(ordering: .relaxed)
        return StatusReport(
            version: FerryVersion.current, pid: getpid(), startedAt: startedAt, uptimeSeconds: Date().timeIntervalSince(startedAt),
            configPath: configuration.path, maxConcurrentUploads: scheduler.maxConcurrentUploads, spools: spools,
            bytesPerSecond: meter.bytesPerSecond(total: total), uploads: activity.snapshot(), bandwidth: bandwidth.states())
    }

    private static func allStates(_ counts: [JobState: Int]) -> [String: Int] {
        Dictionary(uniqueKeysWithValues: JobState.allCases.map { ($0.rawValue, counts[$0] ?? 0) })
    }

    func list(_ arguments: ListArguments, peer: ControlPeer) async throws -> JobList {
        let limit = arguments.limit ?? 50
        guard (1...1000).contains(limit) else { throw ControlError(.invalidArgument, "limit must be between 1 and 1000") }
        if let spool = arguments.spool { try await checkSpoolKnown(spool) }
        let states = arguments.states?.compactMap { JobState(rawValue: $0.rawValue) }
        let (jobs, more) = try await store.jobs(states: states, spool: arguments.spool, since: arguments.since, limit: limit)
        // A peer that may only read sees an answer's status, not its headers (as not its body).
        let showsAnswers = peer.access == .control
        var summaries: [JobSummary] = []
        for job in jobs {
            var summary = job.summary
            if !showsAnswers { summary.response?.headers = nil }
            summary.bundle = try await bundleInfo(of: job)
            summaries.append(summary)
        }
        return JobList(jobs: summaries, more: more)
    }

    func show(_ arguments: ShowArguments, peer: ControlPeer) async throws -> JobDetail {
        let job = try await find(arguments.id)
        let attempts = try await store.attempts(of: job)
        let spool = runtime.configuration.spool(named: job.spool)
        var response: ResponseInfo?
        if let status = job.responseStatus {
            var info = ResponseInfo(
                status: status, contentType: job.responseContentType, body: nil, bodyBase64: nil,
                headers: job.responseHeaders.byName)
            if peer.access != .control {
                info.bodyHidden = job.responseBody != nil ? true : nil
                info.headers = nil
            } else if let body = job.responseBody {
                if let text = String(validating: body, as: UTF8.self) { info.body = text } else { info.bodyBase64 = Data(body).base64EncodedString() }
            }
            response = info
        }
        var (location, path) = Self.location(of: job, spoolDirectory: spool?.directory)
        if location == .spool, job.state.isFinal, job.disposedAt == nil, let spool {
            // A delete or move that was cut short leaves the file under its claim name: show that.
            path = SpoolFiles(directory: spool.directory).currentPath(of: job.relativePath, token: job.id.rawValue)
                .map { spool.directory + "/" + displayName($0) }
        }
        var summary = job.summary
        summary.bundle = try await bundleInfo(of: job)
        var detail = JobDetail(
            job: summary, url: spool.map { $0.shownEndpoint(for: job) } ?? "(spool no longer configured)", location: location, path: path,
            disposition: job.disposition.map { JobDetail.Disposition(rawValue: $0.rawValue) }, heldAt: job.heldAt, response: response,
            attempts: attempts.map {
                AttemptInfo(number: $0.number, startedAt: $0.startedAt, durationSeconds: $0.duration, status: $0.httpStatus,
                            error: $0.error, bytesSent: $0.bytesSent, outcome: AttemptInfo.Outcome(rawValue: $0.outcome.rawValue))
            },
            progress: activity.progress(of: job))
        detail.digest = job.contentDigest
        let hooks = try await store.hookRuns(of: job)
        if !hooks.isEmpty {
            detail.hooks = hooks.map {
                HookInfo(kind: $0.kind.rawValue, state: $0.state.rawValue, attempts: $0.attempts, nextAt: $0.state == .pending ? $0.nextAt : nil,
                         exitStatus: $0.lastExit, error: $0.lastError, output: peer.access == .control ? $0.lastOutput : nil, updatedAt: $0.updatedAt)
            }
        }
        if let s3 = spool?.s3, job.upload != nil, !job.state.isFinal {
            detail.partsConfirmed = try await store.uploadParts(of: job).count
            let partSize = s3.partSize(forLength: job.identity.size)
            detail.partsTotal = Int(max(1, (job.identity.size + partSize - 1) / partSize))
        }
        return detail
    }

    /// Where the job's file is now.
    static func location(of job: Job, spoolDirectory: String?) -> (JobDetail.Location, String?) {
        let inSpool = spoolDirectory.map { $0 + "/" + job.displayPath }
        switch (job.state, job.disposition) {
        case (.queued, _), (.uploading, _), (.retrying, _), (.held, _), (.superseded, _), (_, nil), (_, .left?):
            return (.spool, inSpool)
        case (.done, .kept?): return (.kept, inSpool)
        case (.done, .deleted?): return (.deleted, nil)
        case (.done, .moved?): return (.sent, job.finalPath.map(displayName))
        case (_, .moved?): return (.failed, job.finalPath.map(displayName))
        default: return (.missing, nil)
        }
    }

    /// A disposition pending longer than this makes `health` degraded (debug builds: tests may set
    /// `FERRY_STUCK_DISPOSITION_AFTER` in seconds).
    static let stuckDispositionAfter: TimeInterval = {
        #if DEBUG
        if let text = ProcessInfo.processInfo.environment["FERRY_STUCK_DISPOSITION_AFTER"], let seconds = TimeInterval(text) { return seconds }
        #endif
        return 300
    }()

    func health() async -> HealthReport {
        var problems: [String] = []
        let since = scheduler.sinceLastTurn
        if since > .seconds(150) { problems.append("the scheduler has not turned for \(Int(since.seconds))s") }
        do {
            _ = try await store.count(inStates: [.queued])
            // A file that cannot be deleted or moved after its upload (a filesystem refusing renames,
            // a full disk, a directory ferryd may not write) is retried every minute; say so.
            if let stuck = try await store.oldestPendingDisposition(), let finished = stuck.finishedAt,
               Date().timeIntervalSince(finished) > Self.stuckDispositionAfter {
                problems.append("the file of job \(stuck.id) (\(stuck.spool)/\(stuck.displayPath)) has waited \(Int(Date().timeIntervalSince(finished) / 60)) min to be deleted or moved; see the log (cannot dispose of the file)")
            }
        } catch {
            problems.append("the queue database cannot be read: \(error)")
        }
        for spool in runtime.configuration.spools {
            if let problem = self.problems[spool.name] { problems.append("spool \(spool.name): \(problem.message)") }
            if access(spool.directory, F_OK) != 0 {
                problems.append("spool \(spool.name): its directory \(spool.directory) does not exist (\(String(cString: strerror(errno))))")
            }
        }
        return HealthReport(status: problems.isEmpty ? .ok : .degraded, version: FerryVersion.current,
                            uptimeSeconds: Date().timeIntervalSince(startedAt), problems: problems)
    }

    /// The Prometheus text `ferryctl metrics` prints and `GET /metrics` serves (see ``DaemonMetrics``).
    func metrics() async throws -> MetricsReport {
        try await metrics.report(
            store: store, spools: runtime.configuration.spools.map(\.name), startedAt: startedAt,
            bytesSent: activity.totalBytesSent.load(ordering: .relaxed), inFlight: scheduler.gate.inUse, bandwidth: bandwidth.states(),
            unreachableTries: scheduler.pipeline.serverWaits.unreachableTries())
    }

    // MARK: - Limit

    /// `limit`: a bandwidth limit now, until the next reload or restart.
    func limit(_ arguments: LimitArguments) throws -> BandwidthState {
        let scope = arguments.spool ?? "*"
        if let spool = arguments.spool, runtime.configuration.spool(named: spool) == nil {
            throw ControlError(.notFound, "no spool named \"\(spool)\"; configured: \(runtime.configuration.spools.map(\.name).joined(separator: ", "))")
        }
        guard let limit = BandwidthLimit.parse(arguments.rate) else {
            throw ControlError(.invalidArgument, "\"\(arguments.rate)\" is not a rate; write one such as \"4MiB/s\", \"500kB/s\" or \"10Mbit/s\", or \"off\"")
        }
        bandwidth.override(scope, limit)
        logger.notice("bandwidth limit set by an operator (until the next reload or restart)", metadata: [
            "scope": "\(scope == "*" ? "all spools" : "spool \(scope)")", "limit": "\(limit)",
        ])
        return BandwidthState(scope: scope, limit: limit.description, bytesPerSecond: limit.rate, source: "override")
    }

    // MARK: - Pause

    func pause(_ arguments: PauseArguments, paused: Bool) async throws -> PauseState {
        let names = runtime.configuration.spools.map(\.name)
        let now = Date()
        if let spool = arguments.spool {
            guard names.contains(spool) else { throw ControlError(.notFound, "no spool named \"\(spool)\"; configured: \(names.joined(separator: ", "))") }
            let current = try await store.pausedSpools()
            if !paused && current.contains("*") {
                // Resuming one spool while all are paused: pause the others one by one instead.
                try await store.setPaused("*", false, now: now)
                for other in names where other != spool { try await store.setPaused(other, true, now: now) }
            } else {
                try await store.setPaused(spool, paused, now: now)
            }
        } else {
            try await store.setPaused("*", paused, now: now)
        }
        let current = try await store.pausedSpools()
        // Resumed: try now, even if the server asked to wait.
        if !paused { scheduler.pipeline.serverWaits.forget(spool: arguments.spool) }
        scheduler.paused = current
        logger.notice(paused ? "paused" : "resumed", metadata: ["spool": "\(arguments.spool ?? "*")"])
        return PauseState(paused: current.contains("*") ? names : names.filter(current.contains))
    }

    // MARK: - Helpers

    /// The job named by a full id or an unambiguous prefix.
    func find(_ text: String) async throws -> Job {
        switch try await store.lookup(text) {
        case .found(let job): return job
        case .notFound: throw ControlError(.notFound, "no job \(text)")
        case .ambiguous: throw ControlError(.invalidArgument, "\(text) matches more than one job; give more of the id")
        }
    }

    /// A bundle job's files, as queued; `nil` for a file.
    private func bundleInfo(of job: Job) async throws -> BundleInfo? {
        guard job.kind == .bundle else { return nil }
        let members = try await store.bundleMembers(of: job)
        return BundleInfo(files: members.map { BundleFileInfo(name: $0.shownName, size: $0.size) }, totalSize: job.identity.size)
    }

    func checkSpoolKnown(_ spool: String) async throws {
        if runtime.configuration.spool(named: spool) != nil { return }
        if try await store.counts()[spool] != nil { return }
        throw ControlError(.notFound, "no spool named \"\(spool)\"; configured: \(runtime.configuration.spools.map(\.name).joined(separator: ", "))")
    }
}

extension Job {
    /// What the server holds of a resumable upload: where the job's upload record ends, or, once
    /// done, the whole file (the answer that completed the upload is the job's outcome; the offset
    /// recorded is that of the request before it).
    var confirmedBytes: Int64? {
        guard let upload else { return nil }
        return state == .done ? identity.size : upload.offset
    }

    /// The job as `list` shows it.
    var summary: JobSummary {
        JobSummary(
            id: id.rawValue, spool: spool, file: displayPath, size: identity.size,
            state: JobStateName(rawValue: state.rawValue) ?? .queued, attempts: attempts, createdAt: createdAt,
            updatedAt: updatedAt, nextAttemptAt: nextAttemptAt, finishedAt: finishedAt, lastError: lastError,
            responseStatus: responseStatus, confirmedBytes: confirmedBytes, response: responseStatus.map {
                ResponseInfo(status: $0, contentType: responseContentType, body: nil, bodyBase64: nil,
                             headers: responseHeaders.byName)
            })
    }
}

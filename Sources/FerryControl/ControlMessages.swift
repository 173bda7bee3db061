import Foundation

/// The commands of protocol version 1, and who may run them.
public enum ControlCommand: String, Sendable, Codable, CaseIterable {
    case status, list, show, watch, health, metrics
    case retry, hold, release, cancel, pause, resume, wait, enqueue, reload

    /// Commands that only look: any peer allowed to connect may run them (unless
    /// `control_read_only_for_others = false`). The others change the queue or the daemon and need
    /// root, the daemon's own user, or a member of `control_group`.
    public var isReadOnly: Bool {
        switch self {
        case .status, .list, .show, .watch, .health, .metrics: true
        default: false
        }
    }

    /// Commands that stream events after their first reply, or may take long to answer; the idle
    /// timeout does not apply while they run.
    public var isLongRunning: Bool { self == .watch || self == .wait }
}

/// Job states, as the protocol names them.
public enum JobStateName: String, Sendable, Codable, CaseIterable {
    case queued, uploading, retrying, held, done, failed, cancelled, superseded

    /// States in which the job still waits to be delivered.
    public static let pending: [JobStateName] = [.queued, .uploading, .retrying]
}

// MARK: - Arguments

/// Arguments of commands that take none.
public struct NoArguments: Sendable, Codable {
    public init() {}
}

/// `list`: jobs, newest first.
public struct ListArguments: Sendable, Codable {
    /// Only jobs in these states.
    public var states: [JobStateName]?
    /// Only jobs of this spool.
    public var spool: String?
    /// At most this many (default 50, at most 1000).
    public var limit: Int?
    /// Only jobs created at or after this time.
    public var since: Date?

    public init(states: [JobStateName]? = nil, spool: String? = nil, limit: Int? = nil, since: Date? = nil) {
        self.states = states
        self.spool = spool
        self.limit = limit
        self.since = since
    }
}

/// `show`: one job. `id` may be a full job id or an unambiguous prefix of one.
public struct ShowArguments: Sendable, Codable {
    public var id: String
    public init(id: String) { self.id = id }
}

/// `retry`, `hold`, `release`, `cancel`: the jobs named, or all jobs the command's bulk selector
/// picks (`all`: retry → every failed job, hold → every queued or retrying job, release → every
/// held job, cancel → every held job), optionally in one spool only.
public struct JobActionArguments: Sendable, Codable {
    public var ids: [String]?
    public var all: Bool?
    public var spool: String?

    public init(ids: [String]? = nil, all: Bool? = nil, spool: String? = nil) {
        self.ids = ids
        self.all = all
        self.spool = spool
    }
}

/// `pause`, `resume`: one spool, or (no spool) all of them.
public struct PauseArguments: Sendable, Codable {
    public var spool: String?
    public init(spool: String? = nil) { self.spool = spool }
}

/// `wait`: until nothing is queued, uploading, retrying or settling in the spools.
public struct WaitArguments: Sendable, Codable {
    /// Give up after this many seconds (`timeout` error); absent means no limit.
    public var timeoutSeconds: Double?
    /// Only this spool.
    public var spool: String?

    enum CodingKeys: String, CodingKey {
        case timeoutSeconds = "timeout_seconds", spool
    }

    public init(timeoutSeconds: Double? = nil, spool: String? = nil) {
        self.timeoutSeconds = timeoutSeconds
        self.spool = spool
    }
}

/// `watch`: a stream of events.
public struct WatchArguments: Sendable, Codable {
    /// Replay the durable events after this id first (from a previous `watch`); absent means only new ones.
    public var since: Int64?
    /// Whether to include `progress` samples (default true).
    public var progress: Bool?
    /// Seconds between progress samples (default 1, at least 0.2).
    public var progressInterval: Double?

    enum CodingKeys: String, CodingKey {
        case since, progress, progressInterval = "progress_interval"
    }

    public init(since: Int64? = nil, progress: Bool? = nil, progressInterval: Double? = nil) {
        self.since = since
        self.progress = progress
        self.progressInterval = progressInterval
    }
}

/// `enqueue`: files already placed in the spool directory (by the client, under a temporary name,
/// fsynced and renamed into place) to queue right away.
public struct EnqueueArguments: Sendable, Codable {
    public var spool: String
    /// Paths relative to the spool directory.
    public var files: [String]

    public init(spool: String, files: [String]) {
        self.spool = spool
        self.files = files
    }
}

// MARK: - Results

/// One job, as `list` shows it.
public struct JobSummary: Sendable, Codable, Hashable {
    public var id: String
    public var spool: String
    /// The path below the spool directory (bytes that are not UTF-8 appear as `\xNN`).
    public var file: String
    public var size: Int64
    public var state: JobStateName
    /// Attempts made (interrupted ones do not count).
    public var attempts: Int
    public var createdAt: Date
    public var updatedAt: Date
    public var nextAttemptAt: Date?
    public var finishedAt: Date?
    public var lastError: String?
    public var responseStatus: Int?
    /// tus: the bytes the server has confirmed it holds; absent for other protocols and before the
    /// upload exists.
    public var confirmedBytes: Int64?

    enum CodingKeys: String, CodingKey {
        case id, spool, file, size, state, attempts
        case createdAt = "created_at", updatedAt = "updated_at", nextAttemptAt = "next_attempt_at",
             finishedAt = "finished_at", lastError = "last_error", responseStatus = "response_status",
             confirmedBytes = "confirmed_bytes"
    }

    public init(
        id: String, spool: String, file: String, size: Int64, state: JobStateName, attempts: Int, createdAt: Date,
        updatedAt: Date, nextAttemptAt: Date?, finishedAt: Date?, lastError: String?, responseStatus: Int?,
        confirmedBytes: Int64? = nil
    ) {
        self.confirmedBytes = confirmedBytes
        self.id = id
        self.spool = spool
        self.file = file
        self.size = size
        self.state = state
        self.attempts = attempts
        self.createdAt = createdAt
        self.updatedAt = updatedAt
        self.nextAttemptAt = nextAttemptAt
        self.finishedAt = finishedAt
        self.lastError = lastError
        self.responseStatus = responseStatus
    }
}

/// `list`'s result.
public struct JobList: Sendable, Codable {
    public var jobs: [JobSummary]
    /// Whether more jobs matched than `limit` allowed.
    public var more: Bool

    public init(jobs: [JobSummary], more: Bool) {
        self.jobs = jobs
        self.more = more
    }
}

/// One attempt in `show`.
public struct AttemptInfo: Sendable, Codable, Hashable {
    public var number: Int
    public var startedAt: Date
    public var durationSeconds: Double
    public var status: Int?
    public var error: String?
    public var bytesSent: Int64
    /// `success`, `retry`, `failure` or `interrupted` (cut short by a shutdown, hold or cancel; not counted).
    public var outcome: String

    enum CodingKeys: String, CodingKey {
        case number, status, error, outcome
        case startedAt = "started_at", durationSeconds = "duration_seconds", bytesSent = "bytes_sent"
    }

    public init(number: Int, startedAt: Date, durationSeconds: Double, status: Int?, error: String?, bytesSent: Int64, outcome: String) {
        self.number = number
        self.startedAt = startedAt
        self.durationSeconds = durationSeconds
        self.status = status
        self.error = error
        self.bytesSent = bytesSent
        self.outcome = outcome
    }
}

/// The server's last answer to a job.
public struct ResponseInfo: Sendable, Codable, Hashable {
    public var status: Int
    public var contentType: String?
    /// The body's first 64 KiB, as text when it is UTF-8.
    public var body: String?
    /// The same, base64-encoded, when it is not UTF-8.
    public var bodyBase64: String?
    /// Present (and `true`) when the body was hidden because the peer is not allowed to see it.
    public var bodyHidden: Bool?

    enum CodingKeys: String, CodingKey {
        case status, body
        case contentType = "content_type", bodyBase64 = "body_base64", bodyHidden = "body_hidden"
    }

    public init(status: Int, contentType: String?, body: String?, bodyBase64: String?, bodyHidden: Bool? = nil) {
        self.status = status
        self.contentType = contentType
        self.body = body
        self.bodyBase64 = bodyBase64
        self.bodyHidden = bodyHidden
    }
}

/// `show`'s result: everything about one job.
public struct JobDetail: Sendable, Codable {
    public var job: JobSummary
    /// The endpoint, with secrets shown as `***`.
    public var url: String
    /// Where the file is now: `spool`, `sent`, `failed`, `deleted`, `kept` or `missing`, with `path`.
    public var location: String
    /// The file's absolute path now, when it still exists somewhere Ferry put it.
    public var path: String?
    /// What became of the source once the job was final (`deleted`, `moved`, `kept`, `left`, `missing`).
    public var disposition: String?
    public var heldAt: Date?
    public var response: ResponseInfo?
    public var attempts: [AttemptInfo]
    /// Present while the job is being uploaded.
    public var progress: UploadProgress?

    enum CodingKeys: String, CodingKey {
        case job, url, location, path, disposition, response, attempts, progress
        case heldAt = "held_at"
    }

    public init(
        job: JobSummary, url: String, location: String, path: String?, disposition: String?, heldAt: Date?,
        response: ResponseInfo?, attempts: [AttemptInfo], progress: UploadProgress?
    ) {
        self.job = job
        self.url = url
        self.location = location
        self.path = path
        self.disposition = disposition
        self.heldAt = heldAt
        self.response = response
        self.attempts = attempts
        self.progress = progress
    }
}

/// An upload in flight.
public struct UploadProgress: Sendable, Codable, Hashable {
    public var job: String
    public var spool: String
    public var file: String
    /// `preparing` (building the body) or `sending`.
    public var phase: String
    public var bytesSent: Int64
    /// The request body's length (the file plus the multipart framing).
    public var bytesTotal: Int64
    /// Average over the last few seconds.
    public var bytesPerSecond: Double
    public var startedAt: Date
    /// The attempt's number (1 for the first).
    public var attempt: Int
    /// tus: the bytes the server has confirmed it holds (a resumed upload continues from here).
    /// Absent for multipart and put, whose bytes count only once the server answers.
    public var confirmedBytes: Int64?

    enum CodingKeys: String, CodingKey {
        case job, spool, file, phase, attempt
        case bytesSent = "bytes_sent", bytesTotal = "bytes_total", bytesPerSecond = "bytes_per_second",
             startedAt = "started_at", confirmedBytes = "confirmed_bytes"
    }

    public init(job: String, spool: String, file: String, phase: String, bytesSent: Int64, bytesTotal: Int64,
                bytesPerSecond: Double, startedAt: Date, attempt: Int, confirmedBytes: Int64? = nil) {
        self.confirmedBytes = confirmedBytes
        self.job = job
        self.spool = spool
        self.file = file
        self.phase = phase
        self.bytesSent = bytesSent
        self.bytesTotal = bytesTotal
        self.bytesPerSecond = bytesPerSecond
        self.startedAt = startedAt
        self.attempt = attempt
    }
}

/// One spool in `status`.
public struct SpoolStatus: Sendable, Codable, Hashable {
    public var name: String
    public var directory: String
    public var paused: Bool
    /// Jobs by state (every state present, zero included).
    public var counts: [String: Int]
    /// Files seen in the spool that are still being written (waiting for `settle`).
    public var settling: Int
    /// A local problem holding the spool's uploads back (the state directory is full, a file cannot
    /// be read), while it lasts; absent when there is none (so clients that predate it are unaffected).
    public var problem: SpoolProblem?

    public init(name: String, directory: String, paused: Bool, counts: [String: Int], settling: Int, problem: SpoolProblem? = nil) {
        self.name = name
        self.directory = directory
        self.paused = paused
        self.counts = counts
        self.settling = settling
        self.problem = problem
    }
}

/// A local problem that keeps some of a spool's jobs waiting: the last error, since when, how many jobs.
public struct SpoolProblem: Sendable, Codable, Hashable {
    /// The last error, e.g. `cannot build the request body: write …: No space left on device`.
    public var message: String
    /// When the problem began.
    public var since: Date
    /// When it last happened (jobs try again every 15–30 s while it lasts).
    public var lastSeenAt: Date
    /// How many queued jobs are waiting because of it (files the queue could not take are not
    /// jobs yet: a problem with `jobs` 0 is one of those).
    public var jobs: Int

    enum CodingKeys: String, CodingKey {
        case message, since, jobs
        case lastSeenAt = "last_seen_at"
    }

    public init(message: String, since: Date, lastSeenAt: Date, jobs: Int) {
        self.message = message
        self.since = since
        self.lastSeenAt = lastSeenAt
        self.jobs = jobs
    }
}

/// `status`'s result.
public struct StatusReport: Sendable, Codable {
    public var version: String
    public var pid: Int32
    public var startedAt: Date
    public var uptimeSeconds: Double
    public var configPath: String
    public var maxConcurrentUploads: Int
    public var spools: [SpoolStatus]
    /// Request body bytes sent per second, averaged over the last minute.
    public var bytesPerSecond: Double
    public var uploads: [UploadProgress]

    enum CodingKeys: String, CodingKey {
        case version, pid, spools, uploads
        case startedAt = "started_at", uptimeSeconds = "uptime_seconds", configPath = "config_path",
             maxConcurrentUploads = "max_concurrent_uploads", bytesPerSecond = "bytes_per_second"
    }

    public init(version: String, pid: Int32, startedAt: Date, uptimeSeconds: Double, configPath: String,
                maxConcurrentUploads: Int, spools: [SpoolStatus], bytesPerSecond: Double, uploads: [UploadProgress]) {
        self.version = version
        self.pid = pid
        self.startedAt = startedAt
        self.uptimeSeconds = uptimeSeconds
        self.configPath = configPath
        self.maxConcurrentUploads = maxConcurrentUploads
        self.spools = spools
        self.bytesPerSecond = bytesPerSecond
        self.uploads = uploads
    }
}

/// The outcome of an action on one job (`retry`, `hold`, `release`, `cancel`) or one file (`enqueue`).
public struct ActionOutcome: Sendable, Codable, Hashable {
    /// The job id (or, for `enqueue`, the file) the outcome is about.
    public var id: String
    public var ok: Bool
    /// The job's state after the action.
    public var state: JobStateName?
    /// For `enqueue`: the new job's id.
    public var job: String?
    public var error: ControlError?

    public init(id: String, ok: Bool, state: JobStateName? = nil, job: String? = nil, error: ControlError? = nil) {
        self.id = id
        self.ok = ok
        self.state = state
        self.job = job
        self.error = error
    }
}

/// The result of `retry`, `hold`, `release`, `cancel` and `enqueue`: one outcome per job or file.
/// The request as a whole succeeds even when some items do not; check each `ok`.
public struct ActionResults: Sendable, Codable {
    public var results: [ActionOutcome]
    public init(results: [ActionOutcome]) { self.results = results }
}

/// `pause` / `resume`'s result.
public struct PauseState: Sendable, Codable {
    /// Every spool that is paused now.
    public var paused: [String]
    public init(paused: [String]) { self.paused = paused }
}

/// `wait`'s result.
public struct WaitResult: Sendable, Codable {
    public var waitedSeconds: Double
    /// Jobs that failed or were cancelled while waiting.
    public var failed: [JobSummary]
    /// Jobs left on hold (they do not keep `wait` waiting).
    public var held: Int

    enum CodingKeys: String, CodingKey {
        case failed, held
        case waitedSeconds = "waited_seconds"
    }

    public init(waitedSeconds: Double, failed: [JobSummary], held: Int) {
        self.waitedSeconds = waitedSeconds
        self.failed = failed
        self.held = held
    }
}

/// `watch`'s first reply.
public struct WatchStart: Sendable, Codable {
    /// The id of the newest durable event when the stream started.
    public var lastEventId: Int64
    /// Set when `since` was older than the oldest event kept: events in `from...to` are gone (use
    /// `list` to catch up).
    public var missed: EventGap?

    enum CodingKeys: String, CodingKey {
        case lastEventId = "last_event_id", missed
    }

    public init(lastEventId: Int64, missed: EventGap?) {
        self.lastEventId = lastEventId
        self.missed = missed
    }
}

/// A range of event ids no longer kept.
public struct EventGap: Sendable, Codable, Hashable {
    public var from: Int64
    public var to: Int64
    public init(from: Int64, to: Int64) {
        self.from = from
        self.to = to
    }
}

/// One line of `watch`: a durable job event (`type` `"job"`, with an increasing `id`) or an
/// ephemeral `progress` sample (no id; not replayed).
public struct WatchEvent: Sendable, Codable, Hashable {
    public var type: String
    public var id: Int64?
    public var at: Date
    public var job: String?
    public var spool: String?
    public var file: String?
    /// The job's state after the event.
    public var state: JobStateName?
    /// What happened: `queued`, `started`, `retry`, `done`, `failed`, `held`, `released`,
    /// `cancelled`, `superseded`, `requeued`, `disposed`.
    public var event: String?
    public var attempt: Int?
    public var status: Int?
    public var message: String?
    /// For `progress`: the uploads in flight.
    public var uploads: [UploadProgress]?

    public init(
        type: String, id: Int64? = nil, at: Date, job: String? = nil, spool: String? = nil, file: String? = nil,
        state: JobStateName? = nil, event: String? = nil, attempt: Int? = nil, status: Int? = nil,
        message: String? = nil, uploads: [UploadProgress]? = nil
    ) {
        self.type = type
        self.id = id
        self.at = at
        self.job = job
        self.spool = spool
        self.file = file
        self.state = state
        self.event = event
        self.attempt = attempt
        self.status = status
        self.message = message
        self.uploads = uploads
    }
}

/// `health`'s result.
public struct HealthReport: Sendable, Codable {
    /// `ok`, or `degraded` when the scheduler has not turned for a while or the queue is unreadable.
    public var status: String
    public var version: String
    public var uptimeSeconds: Double
    public var problems: [String]

    enum CodingKeys: String, CodingKey {
        case status, version, problems
        case uptimeSeconds = "uptime_seconds"
    }

    public init(status: String, version: String, uptimeSeconds: Double, problems: [String]) {
        self.status = status
        self.version = version
        self.uptimeSeconds = uptimeSeconds
        self.problems = problems
    }
}

/// `reload`'s result.
public struct ReloadResult: Sendable, Codable {
    /// What changed and was applied.
    public var applied: [String]
    /// Changes that only take effect at the next start.
    public var restartRequired: [String]

    enum CodingKeys: String, CodingKey {
        case applied
        case restartRequired = "restart_required"
    }

    public init(applied: [String], restartRequired: [String]) {
        self.applied = applied
        self.restartRequired = restartRequired
    }
}

/// `metrics`' result: counters and gauges since the daemon started, plus the same in the
/// Prometheus text exposition format.
public struct MetricsReport: Sendable, Codable {
    public var values: [String: Double]
    public var prometheus: String

    public init(values: [String: Double], prometheus: String) {
        self.values = values
        self.prometheus = prometheus
    }
}

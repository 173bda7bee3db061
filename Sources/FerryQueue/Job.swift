import FerrySystem
import Foundation
import GRDB

/// Where a job is in its life.
///
///     queued ──claim──▶ uploading ──2xx──▶ done
///        ▲                 │  ├──retryable──▶ retrying ──due──▶ (claimed again)
///        └──interrupted────┘  ├──permanent / out of attempts or age──▶ failed
///                             └──the file changed before delivery──▶ superseded (+ a new job)
///
///     queued / retrying / uploading ──hold──▶ held ──release──▶ queued
///     failed / held / retrying ──retry──▶ queued (a fresh allowance of attempts and max_age)
///     queued / retrying / uploading / held ──cancel──▶ cancelled (the file goes to failed_directory)
///
/// `done`, `failed`, `cancelled` and `superseded` are final. `done` and `failed` are first committed with their
/// *disposition* pending (the source file still to be deleted, moved or kept); ``Job/disposedAt``
/// records that the file was dealt with.
public enum JobState: String, Sendable, Codable, CaseIterable, DatabaseValueConvertible {
    /// Waiting for an upload slot.
    case queued
    /// An attempt is in flight.
    case uploading
    /// The last attempt failed in a way that may succeed later; waiting for `next_attempt_at`.
    case retrying
    /// The server accepted the file.
    case done
    /// Ferry gave up; the file is in the spool's `failed_directory` with an `.error.json` sidecar.
    case failed
    /// The file changed before this job delivered it; the new version is a new job, with its own
    /// id and so its own `Idempotency-Key` (a server must never mistake new content for a retry).
    case superseded
    /// Put on hold by an operator: not attempted, and not ageing toward `max_age`, until released.
    case held
    /// Cancelled by an operator; the file is in the failed directory with a sidecar saying so.
    case cancelled

    /// States in which the job still owns its source file in the spool.
    public static let active: [JobState] = [.queued, .uploading, .retrying, .held]

    /// States that `wait` waits for: the job will be attempted without anyone's help.
    public static let pending: [JobState] = [.queued, .uploading, .retrying]

    /// Whether the job will not change state again (except by an explicit `retry` of a failed job).
    public var isFinal: Bool { self == .done || self == .failed || self == .superseded || self == .cancelled }
}

/// The version of a file a job uploads (see ``FileVersion``).
public typealias FileIdentity = FileVersion

/// A resumable (tus) upload the server created for a job: where it lives, how many bytes the
/// server has confirmed, and when the server will forget it (`Upload-Expires`).
public struct ResumableUpload: Sendable, Hashable, Codable {
    /// The upload's URL (absolute). A capability: whoever knows it can write the upload, so it is
    /// not logged.
    public var url: String
    /// Bytes the server confirmed (`Upload-Offset`).
    public var offset: Int64
    public var expires: Date?
    /// Names the endpoint that created the upload (a digest, as the endpoint may hold a secret):
    /// after the spool's URL changes, the upload is not continued.
    public var endpointKey: String?

    public init(url: String, offset: Int64, expires: Date? = nil, endpointKey: String? = nil) {
        self.url = url
        self.offset = offset
        self.expires = expires
        self.endpointKey = endpointKey
    }
}

/// One file's journey through the queue: one row of the `job` table.
public struct Job: Sendable, Hashable, FetchableRecord, MutablePersistableRecord {
    public static let databaseTableName = "job"

    /// Internal row number; increases with each job and is never reused.
    public var sequence: Int64?
    /// The public id, also sent as `Idempotency-Key`.
    public var id: JobID
    /// The spool's configured name.
    public var spool: String
    /// The file's path below the spool directory, as raw bytes (Linux names need not be UTF-8).
    public var relativePath: [UInt8]
    /// The version of the file this job uploads.
    public var identity: FileIdentity
    public var state: JobState
    /// The multipart boundary, kept so a rebuilt body is byte-identical.
    public var boundary: String
    /// Completed attempts (interrupted ones, e.g. by shutdown, do not count).
    public var attempts: Int
    public var createdAt: Date
    public var updatedAt: Date
    /// When a queued or retrying job may next be attempted.
    public var nextAttemptAt: Date?
    /// When the job reached `done` or `failed`.
    public var finishedAt: Date?
    /// The most recent failure, in words.
    public var lastError: String?
    /// The final HTTP status, when the server answered.
    public var responseStatus: Int?
    /// The first 64 KiB of the server's final response body.
    public var responseBody: [UInt8]?
    /// The final response's `Content-Type`.
    public var responseContentType: String?
    /// The final response's headers the spool keeps (`Location`, `ETag`, …, `result_headers`).
    public var responseHeaders: [ResponseHeader] = []
    /// The RFC 9530 digest of the file as delivered (`sha-256=:…:`), when the spool computes one.
    public var contentDigest: String?
    /// What became of the source file; `nil` while pending.
    public var disposition: Disposition?
    /// When the source file was deleted, moved or kept after a final state; `nil` while pending.
    public var disposedAt: Date?
    /// Where the file is now, if it was moved (sent or failed directory), as raw bytes.
    public var finalPath: [UInt8]?
    /// When the job was put on hold; `nil` unless `held`.
    public var heldAt: Date?
    /// When the `max_age` clock started: creation, moved later by time spent on hold and reset by
    /// an operator's `retry`. `nil` means ``createdAt``.
    public var ageBase: Date?
    /// Attempts made before an operator's last `retry`; `max_attempts` and the backoff count from here.
    public var attemptBase: Int = 0
    /// The tus upload the server created for this job, if any (see ``ResumableUpload``).
    public var upload: ResumableUpload?
    /// A file, or a bundle (a directory sent as one request, its files in ``BundleMember`` rows).
    public var kind: JobSourceKind = .file
    /// The version of the file's field sidecar (`<name>.fields.toml`) the last attempt read, so that
    /// the sidecar is disposed of with the file only if it is still that one.
    public var fieldsSidecar: FileVersion?

    public init(
        id: JobID, spool: String, relativePath: [UInt8], identity: FileIdentity, boundary: String, now: Date
    ) {
        self.id = id
        self.spool = spool
        self.relativePath = relativePath
        self.identity = identity
        self.state = .queued
        self.boundary = boundary
        self.attempts = 0
        self.createdAt = now
        self.updatedAt = now
        self.nextAttemptAt = now
    }

    /// The relative path as text for logs and messages; bytes that are not UTF-8 appear as `\xNN`.
    public var displayPath: String { displayName(relativePath) }

    /// When the `max_age` clock started (see ``ageBase``).
    public var ageStart: Date { ageBase ?? createdAt }

    /// Attempts made since the job was last queued by an operator's `retry` (or since it was created).
    public var attemptsInRound: Int { attempts - attemptBase }

    enum Field {
        static let sequence = Column("seq")
        static let id = Column("id")
        static let spool = Column("spool")
        static let relativePath = Column("relative_path")
        static let state = Column("state")
        static let nextAttemptAt = Column("next_attempt_at")
        static let disposedAt = Column("disposed_at")
    }

    public init(row: Row) throws {
        sequence = row["seq"]
        id = JobID(rawValue: row["id"])
        spool = row["spool"]
        relativePath = [UInt8](row["relative_path"] as Data)
        identity = FileIdentity(
            device: UInt64(bitPattern: row["device"]), inode: UInt64(bitPattern: row["inode"]),
            size: row["size"], modificationTime: row["mtime_ns"])
        state = row["state"]
        boundary = row["boundary"]
        attempts = row["attempts"]
        createdAt = Date(timeIntervalSince1970: row["created_at"])
        updatedAt = Date(timeIntervalSince1970: row["updated_at"])
        nextAttemptAt = (row["next_attempt_at"] as Double?).map(Date.init(timeIntervalSince1970:))
        finishedAt = (row["finished_at"] as Double?).map(Date.init(timeIntervalSince1970:))
        lastError = row["last_error"]
        responseStatus = row["response_status"]
        responseBody = (row["response_body"] as Data?).map { [UInt8]($0) }
        responseContentType = row["response_content_type"]
        responseHeaders = ResponseHeader.decoded(row["response_headers"])
        contentDigest = row["content_digest"]
        // A name this build does not know (written by a newer ferryd) reads as pending rather than stopping the daemon.
        disposition = (row["disposition"] as String?).flatMap(Disposition.init(rawValue:))
        disposedAt = (row["disposed_at"] as Double?).map(Date.init(timeIntervalSince1970:))
        finalPath = (row["final_path"] as Data?).map { [UInt8]($0) }
        heldAt = (row["held_at"] as Double?).map(Date.init(timeIntervalSince1970:))
        ageBase = (row["age_base"] as Double?).map(Date.init(timeIntervalSince1970:))
        attemptBase = row["attempt_base"] ?? 0
        kind = row["kind"] ?? .file
        if let device = row["sidecar_device"] as Int64? {
            fieldsSidecar = FileVersion(
                device: UInt64(bitPattern: device), inode: UInt64(bitPattern: row["sidecar_inode"] ?? 0),
                size: row["sidecar_size"] ?? 0, modificationTime: row["sidecar_mtime_ns"] ?? 0)
        }
        if let url = row["upload_url"] as String? {
            upload = ResumableUpload(
                url: url, offset: row["upload_offset"] ?? 0,
                expires: (row["upload_expires"] as Double?).map(Date.init(timeIntervalSince1970:)),
                endpointKey: row["upload_endpoint"])
        }
    }

    public func encode(to container: inout PersistenceContainer) throws {
        container["seq"] = sequence
        for (column, value) in zip(Self.settledColumns, settledValues) { container[column] = value }
        for (column, value) in zip(Self.outcomeColumns, outcomeValues) { container[column] = value }
    }

    /// The columns an outcome leaves alone: set at intake, changed later only by an operator's
    /// command (a whole-row update) or a disposition's own statement.
    static let settledColumns: [String] = [
        "id", "spool", "relative_path", "device", "inode", "size", "mtime_ns", "boundary", "created_at", "final_path", "age_base", "kind",
    ]

    /// The values of ``settledColumns``, in their order: the one place they are encoded.
    var settledValues: [DatabaseValue] {
        [
            id.rawValue.databaseValue, spool.databaseValue, Data(relativePath).databaseValue,
            Int64(bitPattern: identity.device).databaseValue, Int64(bitPattern: identity.inode).databaseValue,
            identity.size.databaseValue, identity.modificationTime.databaseValue, boundary.databaseValue,
            createdAt.timeIntervalSince1970.databaseValue, finalPath.map { Data($0) }.databaseValue,
            (ageBase?.timeIntervalSince1970).databaseValue, kind.databaseValue,
        ]
    }

    static let insertion = {
        let columns = settledColumns + outcomeColumns
        return "INSERT INTO job (" + columns.joined(separator: ", ") + ") VALUES ("
            + columns.map { _ in "?" }.joined(separator: ", ") + ")"
    }()

    /// Inserts the job as a new row through one cached statement, as `insert(db)` would, and
    /// sets ``sequence``: every file queued takes this path, and GRDB's generic insert encoded the
    /// record and built its statement each time (3.8 % of ferryd's CPU in scenario 2).
    mutating func insertRow(_ db: Database) throws {
        try db.cachedStatement(sql: Self.insertion).execute(arguments: StatementArguments(positional: settledValues + outcomeValues))
        sequence = db.lastInsertedRowID
    }

    /// The columns an attempt's outcome may change. Writing only these leaves untouched the
    /// indexes over what never changes after intake (the id, the path, the creation time), which a
    /// whole-row update rewrote on every outcome.
    static let outcomeColumns: [String] = [
        "state", "attempts", "updated_at", "next_attempt_at", "finished_at", "last_error", "response_status",
        "response_body", "response_content_type", "response_headers", "content_digest", "disposition", "disposed_at", "held_at", "attempt_base",
        "upload_url", "upload_offset", "upload_expires", "upload_endpoint",
        "sidecar_device", "sidecar_inode", "sidecar_size", "sidecar_mtime_ns",
    ]

    /// The values of ``outcomeColumns``, in their order: the one place they are encoded, for
    /// ``encode(to:)`` and ``updateOutcome(_:)`` alike.
    var outcomeValues: [DatabaseValue] {
        [
            state.databaseValue, attempts.databaseValue, updatedAt.timeIntervalSince1970.databaseValue,
            (nextAttemptAt?.timeIntervalSince1970).databaseValue, (finishedAt?.timeIntervalSince1970).databaseValue,
            lastError.databaseValue, responseStatus.databaseValue, responseBody.map { Data($0) }.databaseValue,
            responseContentType.databaseValue, ResponseHeader.encoded(responseHeaders).databaseValue,
            contentDigest.databaseValue, disposition.databaseValue, (disposedAt?.timeIntervalSince1970).databaseValue,
            (heldAt?.timeIntervalSince1970).databaseValue, attemptBase.databaseValue,
            (upload?.url).databaseValue, (upload?.offset).databaseValue,
            (upload?.expires?.timeIntervalSince1970).databaseValue, (upload?.endpointKey).databaseValue,
            fieldsSidecar.map { Int64(bitPattern: $0.device) }.databaseValue,
            fieldsSidecar.map { Int64(bitPattern: $0.inode) }.databaseValue,
            (fieldsSidecar?.size).databaseValue, (fieldsSidecar?.modificationTime).databaseValue,
        ]
    }

    static let outcomeUpdate =
        "UPDATE job SET " + outcomeColumns.map { "\($0) = ?" }.joined(separator: ", ") + " WHERE seq = ?"

    /// Writes ``outcomeColumns`` of the job's row, as `update(db, columns: Job.outcomeColumns)` does,
    /// through one cached statement: on the path every upload takes, GRDB's generic update (encoding
    /// all 36 columns, then building the statement) was 5 % of ferryd's CPU in a 100,000-file drain.
    /// - Throws: `RecordError.recordNotFound` when the row is gone, as GRDB's update does.
    func updateOutcome(_ db: Database) throws {
        guard let sequence else { throw RecordError.recordNotFound(databaseTableName: Self.databaseTableName, key: [:]) }
        try db.cachedStatement(sql: Self.outcomeUpdate).execute(arguments: StatementArguments(positional: outcomeValues + [sequence.databaseValue]))
        if db.changesCount == 0 {
            throw RecordError.recordNotFound(databaseTableName: Self.databaseTableName, key: ["seq": sequence.databaseValue])
        }
    }

    public mutating func didInsert(_ inserted: InsertionSuccess) {
        sequence = inserted.rowID
    }
}

/// One try at uploading a job: a row of the `attempt` table.
public struct Attempt: Sendable, Hashable, FetchableRecord, PersistableRecord {
    public static let databaseTableName = "attempt"

    /// How an attempt ended.
    public enum Outcome: String, Sendable, Codable, DatabaseValueConvertible {
        /// The server accepted the file (2xx).
        case success
        /// A failure that will be retried.
        case retry
        /// A failure that ended the job.
        case failure
        /// Cut short by a shutdown, a hold or a cancel; it does not count against the job.
        case interrupted
    }

    public var jobSequence: Int64
    /// 1 for the first attempt; interrupted attempts share the number of the next real one.
    public var number: Int
    public var startedAt: Date
    /// Seconds from start to outcome.
    public var duration: Double
    public var httpStatus: Int?
    public var error: String?
    /// Request body bytes handed to the connection.
    public var bytesSent: Int64
    public var outcome: Outcome

    public init(
        jobSequence: Int64, number: Int, startedAt: Date, duration: Double, httpStatus: Int?, error: String?,
        bytesSent: Int64, outcome: Outcome
    ) {
        self.jobSequence = jobSequence
        self.number = number
        self.startedAt = startedAt
        self.duration = duration
        self.httpStatus = httpStatus
        self.error = error
        self.bytesSent = bytesSent
        self.outcome = outcome
    }

    public init(row: Row) throws {
        jobSequence = row["job_seq"]
        number = row["number"]
        startedAt = Date(timeIntervalSince1970: row["started_at"])
        duration = row["duration"]
        httpStatus = row["http_status"]
        error = row["error"]
        bytesSent = row["bytes_sent"]
        outcome = row["outcome"]
    }

    public func encode(to container: inout PersistenceContainer) throws {
        for (column, value) in zip(Self.columns, values) { container[column] = value }
    }

    private static let columns = ["job_seq", "number", "started_at", "duration", "http_status", "error", "bytes_sent", "outcome"]

    /// The values of ``columns``, in their order: the one place they are encoded.
    private var values: [DatabaseValue] {
        [
            jobSequence.databaseValue, number.databaseValue, startedAt.timeIntervalSince1970.databaseValue,
            duration.databaseValue, httpStatus.databaseValue, error.databaseValue, bytesSent.databaseValue,
            outcome.databaseValue,
        ]
    }

    private static let insertion =
        "INSERT INTO attempt (" + columns.joined(separator: ", ") + ") VALUES (" + columns.map { _ in "?" }.joined(separator: ", ") + ")"

    /// Inserts the row through one cached statement, as `insert(db)` would: every upload's outcome
    /// writes one, and GRDB's generic insert builds its statement each time.
    func insertRow(_ db: Database) throws {
        try db.cachedStatement(sql: Self.insertion).execute(arguments: StatementArguments(positional: values))
    }
}

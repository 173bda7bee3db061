import FerrySystem
import Foundation
import GRDB
import Synchronization

/// A durable record of one change to a job, written in the same transaction as the change, so the
/// event log and the queue never disagree. Ids increase and are never reused; `watch` streams them.
public struct JobEvent: Sendable, Hashable {
    /// What happened.
    public enum Kind: String, Sendable, Hashable {
        /// A file was queued (a new job).
        case queued
        /// An attempt started.
        case started
        /// An attempt failed and will be retried.
        case retry
        /// The server accepted the file.
        case done
        /// Ferry gave up on the file.
        case failed
        /// The attempt was cut short (shutdown, restart); the job is queued again.
        case requeued
        /// The file changed before delivery; a new job carries the new version.
        case superseded
        /// An operator held the job.
        case held
        /// An operator released the job.
        case released
        /// An operator retried the job.
        case retried
        /// An operator cancelled the job.
        case cancelled
        /// The source file was deleted, moved or kept after a final state (`message` says which).
        case disposed
    }

    public var id: Int64
    public var at: Date
    public var jobID: JobID
    public var spool: String
    public var relativePath: [UInt8]
    public var kind: Kind
    /// The job's state after the event.
    public var state: JobState
    public var attempt: Int?
    public var httpStatus: Int?
    public var message: String?
    /// For a `done` event: the answer's `Location`, if the server gave one.
    public var location: String?

    /// Appends an event for `job` (whose `state` is already the new one) inside the caller's transaction.
    static func record(
        _ db: Database, _ job: Job, kind: Kind, at: Date, attempt: Int? = nil, status: Int? = nil, message: String? = nil
    ) throws {
        let statement = try db.cachedStatement(sql: """
            INSERT INTO event (at, job_seq, kind, state, attempt, http_status, message) VALUES (?, ?, ?, ?, ?, ?, ?)
            """)
        try statement.execute(arguments: [
            at.timeIntervalSince1970, job.sequence, kind.rawValue, job.state.rawValue, attempt, status, message,
        ])
    }

    init(row: Row) {
        id = row["id"]
        at = Date(timeIntervalSince1970: row["at"])
        jobID = JobID(rawValue: row["job_id"])
        spool = row["spool"]
        relativePath = [UInt8](row["relative_path"] as Data)
        kind = Kind(rawValue: row["kind"]) ?? .queued
        state = JobState(rawValue: row["state"]) ?? .queued
        attempt = row["attempt"]
        httpStatus = row["http_status"]
        message = row["message"]
        location = ResponseHeader.decoded(row["response_headers"]).value("location")
    }

    /// The relative path as text (bytes that are not UTF-8 appear as `\xNN`).
    public var displayPath: String { displayName(relativePath) }
}

/// Wakes every subscriber when the queue changes. Each subscriber's stream holds at most one
/// pending wake-up, so a slow subscriber costs nothing while it is busy.
public final class ChangeSignal: Sendable {
    private let subscribers = Mutex<[UInt64: AsyncStream<Void>.Continuation]>([:])
    private let nextKey = Atomic<UInt64>(0)

    public init() {}

    /// Tells every subscriber that something changed.
    public func notify() {
        for continuation in subscribers.withLock({ Array($0.values) }) { continuation.yield() }
    }

    /// A stream that yields after each change, until the task that iterates it ends.
    public func subscribe() -> AsyncStream<Void> {
        let key = nextKey.add(1, ordering: .relaxed).newValue
        let (stream, continuation) = AsyncStream.makeStream(of: Void.self, bufferingPolicy: .bufferingNewest(1))
        continuation.onTermination = { [weak self] _ in
            _ = self?.subscribers.withLock { $0.removeValue(forKey: key) }
        }
        subscribers.withLock { $0[key] = continuation }
        return stream
    }
}

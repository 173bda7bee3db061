import FerryQueue
import Foundation
import Logging

/// The fate of a job after one attempt, decided by ``AttemptDecider``: what to record, in one
/// durable write, and what to do once it is recorded. The pipeline carries it out and decides
/// nothing itself.
public struct AttemptDecision: Sendable, Equatable {
    /// What the queue records.
    public enum Record: Sendable, Equatable {
        /// An attempt and its effect on the job (``JobStore/finish(_:startedAt:now:bytesSent:transition:)``).
        case attempt(JobStore.Transition)
        /// The job fails without an attempt on record: no request was made (``JobStore/fail(_:now:error:)``).
        case failure(String)
        /// The job ends as superseded and the file's new version becomes a new job, due at `notBefore`
        /// (``JobStore/supersede(_:by:now:notBefore:boundary:)``).
        case supersede(by: FileIdentity, notBefore: Date)
    }

    /// What follows once the record is durable, in the order listed.
    public enum FollowUp: Sendable, Hashable {
        /// The spool has a local problem (for `ferryctl status`) until the job is next prepared.
        case reportLocalProblem(String)
        /// The job was prepared without a local problem: any the spool had for it is over.
        case clearLocalProblem
        /// Apply the job's disposition: `after_upload`, or the move to `failed_directory` with its sidecar.
        case dispose
        /// A file the disposer had to leave (it changed meanwhile: a new version) is queued again,
        /// after a delivery and after a failure alike.
        case requeueIfLeft
        /// Ask the server to forget the job's unfinished resumable upload (cancelled, superseded, or given up), so no
        /// orphaned upload (S3 parts that are billed) is left behind.
        case endServerUpload
    }

    public var record: Record
    /// The attempt moved a resumable upload forward: the retry count starts again from it
    /// (`attempt_base`), so `max_attempts` counts attempts without progress.
    public var resetsRetryCount: Bool
    public var followUps: [FollowUp]
    /// How the metrics count the attempt; `nil` when no request was made.
    public var counted: AttemptOutcome?
    /// The line the pipeline logs once the record is durable.
    public var log: LogEntry
    /// What runs after this outcome, queued with its record (the spool's hooks, the result file).
    public var hooks: [HookRun.Kind] = []

    public init(record: Record, resetsRetryCount: Bool = false, followUps: [FollowUp], counted: AttemptOutcome?, log: LogEntry) {
        self.record = record
        self.resetsRetryCount = resetsRetryCount
        self.followUps = followUps
        self.counted = counted
        self.log = log
    }

    /// When a retry or an interrupted job is due again, if it is.
    public var nextAttemptAt: Date? {
        switch record {
        case .attempt(.retry(let at, _, _, _, _, _)), .attempt(.interrupted(let at, _, _)), .attempt(.putBack(let at, _)): at
        case .supersede(_, let notBefore): notBefore
        default: nil
        }
    }
}

/// A log line, decided with the fate it reports.
public struct LogEntry: Sendable, Equatable {
    public var level: Logger.Level
    public var message: String
    public var metadata: [String: String]

    public init(_ level: Logger.Level, _ message: String, _ metadata: [String: String] = [:]) {
        self.level = level
        self.message = message
        self.metadata = metadata
    }

    /// Writes the line to `logger`.
    public func write(to logger: Logger) {
        logger.log(level: level, "\(message)", metadata: metadata.mapValues { .string($0) })
    }
}
